import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import Testing

/// The README's tours run as written, in bash, against a fresh `liverelay serve`: every block
/// marked `<!-- tour: runs in CI (ReadmeTourTests) -->`, in order, after the `shell:` line serve
/// printed, with `swift run -c release liverelay` meaning the binary under test. Every request must
/// succeed but those the README shows refused (a `# 422 …` line below the command), in order.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ReadmeTourTests {
    static let marker = "<!-- tour: runs in CI (ReadmeTourTests) -->"

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The marked blocks of the README, in order.
    static func tourBlocks() throws -> [String] {
        let text = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        return text.components(separatedBy: marker + "\n```sh\n").dropFirst().compactMap { $0.components(separatedBy: "\n```").first }
    }

    @Test func theToursRunAsWritten() async throws {
        let blocks = try Self.tourBlocks()
        #expect(blocks.count >= 4, "the README's marked tours")
        let directory = try TestFiles.folder("tour")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withDeadline(.seconds(120)) {
            let server = try await ServeProcess.start(["serve", "--data-dir", directory + "/data", "--http-port", "0"])
            // The banner comes once the demo app has reported its push-to-start token: a tour
            // pasted at once finds the iPhone.
            let store = try await SQLiteStore.open(path: directory + "/data/liverelay.sqlite")
            #expect(try await store.pushToStartTokens(deviceID: "demo-iphone").count == 1)
            #expect(server.printed.contains("its push-to-start token is reported to the server"))
            let shell = try #require(server.printed.split(separator: "\n").first { $0.hasPrefix("shell:") }?.dropFirst("shell:".count))
            let statuses = directory + "/statuses"
            // Its output goes to files: a read of a pipe would block a thread of the cooperative
            // pool (two on this machine) for the whole tour, and every other test with it.
            let (outputFile, errorFile) = (directory + "/tour.out", directory + "/tour.err")
            let script = """
                exec > \(outputFile) 2> \(errorFile)
                set -euo pipefail
                # Each request's status, in order, beside its output.
                curl() { local out; out=$(command curl -w '\\n%{http_code}' "$@"); printf '%s\\n' "${out%$'\\n'*}"; echo "${out##*$'\\n'}" >> \(statuses); }
                swift() { [ "$1 $2 $3 $4" = "run -c release liverelay" ] || return 99; shift 4; \(liverelayExecutable.path) "$@"; }
                \(shell)
                \(blocks.joined(separator: "\n"))
                echo "$API $S $E $KEY" > \(directory)/tour.names
                """
            try script.write(toFile: directory + "/tour.sh", atomically: true, encoding: .utf8)
            let child = try ChildProcess.start(
                "/bin/bash", [directory + "/tour.sh"], environment: ChildProcess.environment(dropping: "LIVERELAY_"), output: .null)
            let status = await child.exitCode()
            let (printed, complaints) = (
                (try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? "", (try? String(contentsOfFile: errorFile, encoding: .utf8)) ?? ""
            )
            #expect(status == 0, "the tour stopped: \(complaints)\n\(printed)")
            let answered = try String(contentsOfFile: statuses, encoding: .utf8).split(separator: "\n").map(String.init)
            let shownRefused = blocks.joined(separator: "\n").split(separator: "\n").compactMap { line -> String? in
                guard line.hasPrefix("# "), let code = line.dropFirst(2).split(separator: " ").first, code.count == 3, Int(code) != nil else {
                    return nil
                }
                return String(code)
            }
            #expect(answered.count >= 10, "\(answered)")
            #expect(answered.filter { !$0.hasPrefix("2") } == shownRefused, "statuses in order: \(answered)")
            try await Self.theDemoIPhoneShowsTheTourAsTheREADMESays(names: directory + "/tour.names")
            #expect(await server.stop() == 0)
        }
    }

    /// Pasted as one block, the tour's update and end reach the server before the demo app has
    /// reported its update token: the iPhone must still end showing the end's content, leave the
    /// Lock Screen at the dismissal date, and the server must have the device's report (so no
    /// `activity.start_unconfirmed` comes two minutes later).
    static func theDemoIPhoneShowsTheTourAsTheREADMESays(names: String) async throws {
        let words = try String(contentsOfFile: names, encoding: .utf8).split(whereSeparator: \.isWhitespace).map(String.init)
        try #require(words.count == 4, "\(words)")
        let (api, serverKey, emulator, key) = (words[0], words[1], words[2], words[3])
        // The key's one device, as the server knows it, and its activity on the demo iPhone.
        func reported() async throws -> JSONValue? {
            try await httpCall(.GET, api + "/v1/activities/" + key, key: serverKey).json["tokens"]?.arrayElements?.first
        }
        try await eventually { try await reported() != nil }
        let device = try #require(try await reported())
        #expect(device["deviceID"] == .string("demo-iphone"), "\(device)")
        func tourActivity() async throws -> JSONValue? {
            let shown = try await httpCall(.GET, emulator + "/devices/demo-iphone/presentation").json
            return shown["lockScreen"]?.arrayElements?.first { $0["activityID"] == device["activityID"] }
        }
        try await eventually { try await tourActivity()?["state"] == .string("ended") }
        let ended = try #require(try await tourActivity())
        #expect(ended["contentState"] == .object([("status", .string("delivered")), ("etaMinutes", .integer(0))]), "\(ended)")
        let events = try await httpCall(.GET, api + "/v1/events?key=" + key, key: serverKey).json["events"]?.arrayElements ?? []
        let types = events.compactMap { $0["type"]?.stringValue }
        #expect(types.contains("activity.started") && types.contains("activity.ended"), "\(types)")
        #expect(!types.contains("activity.start_unconfirmed"), "\(types)")
        // The README's dismissal date is an hour on: past it, the demo iPhone shows nothing of it.
        _ = try await httpCall(.POST, emulator + "/clock/advance", body: .object([("seconds", .integer(3700))]))
        try await eventually { try await tourActivity() == nil }
    }

    /// The README, the changelog and the guides link to each other and to their pictures by relative
    /// paths: each must name a file that exists, and a link to a section (`#…`) a heading there.
    @Test func theGuidesLinksLeadToFilesAndSections() throws {
        let guides = try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Documentation").path)
            .filter { $0.hasSuffix(".md") }.map { "Documentation/" + $0 }
        #expect(guides.count >= 10, "\(guides)")
        var broken: [String] = []
        var sections = 0
        for guide in ["README.md", "CHANGELOG.md"] + guides {
            let file = Self.root.appendingPathComponent(guide)
            let text = try String(contentsOf: file, encoding: .utf8)
            // A Markdown link's target: `](target)` or `](target#anchor)`.
            for part in text.components(separatedBy: "](").dropFirst() {
                guard let end = part.firstIndex(of: ")") else { continue }
                let link = part[..<end]
                let target = String(link.prefix { $0 != "#" })
                if link.contains("://") || link.contains(" ") { continue }
                let linked = target.isEmpty ? file : file.deletingLastPathComponent().appendingPathComponent(target)
                guard FileManager.default.fileExists(atPath: linked.path) else {
                    broken.append("\(guide): \(target)")
                    continue
                }
                guard link.contains("#"), linked.pathExtension == "md" else { continue }
                sections += 1
                let anchor = String(link.drop { $0 != "#" }.dropFirst())
                if !Self.sectionAnchors(try String(contentsOf: linked, encoding: .utf8)).contains(anchor) {
                    broken.append("\(guide): \(link)")
                }
            }
        }
        #expect(sections >= 20, "links to sections checked")
        #expect(broken.isEmpty, "links to no file or section: \(broken)")
    }

    /// The anchors GitHub gives a Markdown file's headings: lowercased, spaces as hyphens, other
    /// punctuation dropped, a repeated heading's with `-1`, `-2`…; none inside code blocks.
    static func sectionAnchors(_ text: String) -> Set<String> {
        var anchors = Set<String>()
        var repeats: [String: Int] = [:]
        var inCode = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode, line.hasPrefix("#") else { continue }
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
            let anchor = String(title.compactMap { $0 == " " ? "-" : ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") ? $0 : nil })
            let seen = repeats[anchor, default: 0]
            repeats[anchor] = seen + 1
            anchors.insert(seen == 0 ? anchor : "\(anchor)-\(seen)")
        }
        return anchors
    }

    @Test func anchorsAreMadeAsGitHubMakesThem() {
        let anchors = Self.sectionAnchors(
            "# LiveRelay\n## A request's floor, and hops that cost no CPU\n```sh\n# not a heading\n```\n### `bench server` (SQLite)\n## Notes\n## Notes\n"
        )
        #expect(anchors == ["liverelay", "a-requests-floor-and-hops-that-cost-no-cpu", "bench-server-sqlite", "notes", "notes-1"])
    }
}

/// `Documentation/architecture.md` is where a newcomer starts: it names every target.
struct ArchitectureGuideTests {
    @Test func theGuideNamesEveryTargetOfThePackage() throws {
        let manifest = try String(contentsOf: ReadmeTourTests.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let guide = try String(contentsOf: ReadmeTourTests.root.appendingPathComponent("Documentation/architecture.md"), encoding: .utf8)
        let targets = try Regex(#"\.(?:target|testTarget|executableTarget)\(\s*name:\s*"([^"]+)""#)
        let names = manifest.matches(of: targets).compactMap { $0.output[1].substring.map(String.init) }
        #expect(names.count >= 25, "\(names)")
        #expect(names.filter { !guide.contains("`\($0)`") }.isEmpty, "targets the guide does not name")
    }
}
