/// A named schema change. Names are shared by every engine, so `liverelay` reports the same
/// migration history whichever store runs; never edit one that has shipped, add another.
public struct StoreMigration: Sendable {
    public let name: String
    public let statements: [String]
}
