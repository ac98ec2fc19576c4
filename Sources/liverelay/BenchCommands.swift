import ArgumentParser
struct Bench: AsyncParsableCommand { static let configuration = CommandConfiguration(abstract: "Benchmarks.") }
