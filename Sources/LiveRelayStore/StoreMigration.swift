/// A named schema change. Names are shared by every engine, so `liverelay` reports the same
/// migration history whichever store runs; never edit one that has shipped, add another.
package struct StoreMigration: Sendable {
    package let name: String
    package let statements: [String]
}
