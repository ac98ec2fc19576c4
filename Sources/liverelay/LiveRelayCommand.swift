import ArgumentParser
import LiveRelayBenchmarks

@main
struct LiveRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "liverelay",
        abstract: "LiveRelay: send, serve and emulate Live Activity pushes.",
        subcommands: [Serve.self, Push.self, Channels.self, Emulator.self, Keys.self, Bench.self])
}
