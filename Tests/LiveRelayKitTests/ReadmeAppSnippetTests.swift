import Foundation
import LiveRelayKit
import Testing

#if canImport(ActivityKit)
    import ActivityKit

    struct DeliveryAttributes: ActivityAttributes {
        struct ContentState: Codable, Hashable {
            var status: String
            var etaMinutes: Int
        }
        var activityKey: String
    }
#endif

/// The README's "Your app" snippet is this code: compiled here (its `track` line where
/// ActivityKit is, an iOS build), and the README must show it as written.
struct ReadmeAppSnippetTests {
    static let marker = "<!-- app snippet: compiled by ReadmeAppSnippetTests -->"

    /// The snippet, as the README shows it (never called: it would report to a server).
    static func setUp(grant: String) async -> LiveRelayClient {
        // snippet begins
        let liveRelay = LiveRelayClient.setUp(
            server: URL(string: "https://relay.example.com")!,
            clientKey: "lr_client_…")
        #if canImport(ActivityKit)
            liveRelay.track(DeliveryAttributes.self)
        #endif
        // Before requesting an activity in the app (not started by your server), hand over the
        // key's grant, which your backend asks the server for (POST /v1/grants):
        await liveRelay.grant(grant, forKey: "order-42")
        // snippet ends
        return liveRelay
    }

    @Test func theReadmeShowsTheCompiledSnippet() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let shown = try #require(
            readme.components(separatedBy: Self.marker + "\n```swift\n").dropFirst().first?.components(separatedBy: "\n```").first)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let region = try #require(
            source.components(separatedBy: "// snippet begins\n").dropFirst().first?.components(separatedBy: "        // snippet ends").first)
        // Line by line, indentation aside (the format gate indents within `#if`).
        func lines(_ text: some StringProtocol) -> [String] {
            text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        }
        let compiled = lines(region).joined(separator: "\n")
        let readmeLines = lines(shown).joined(separator: "\n")
        #expect(readmeLines.contains(compiled), "README:\n\(shown)\n\ncompiled:\n\(compiled)")
    }
}
