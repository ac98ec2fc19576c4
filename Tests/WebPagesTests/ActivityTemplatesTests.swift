import Foundation
import LiveActivityKit
import LiveRelayTesting
import SimulatedDevices
import Testing
import WebPages

/// Templates per attributes type: loaded from a folder, refused with the file and the rule when
/// they could not be used safely, rendered over the activity.
@Suite struct ActivityTemplatesTests {
    func folder(_ files: [String: String]) throws -> String {
        let root = TestFiles.path("templates")
        for (path, text) in files {
            let file = (root as NSString).appendingPathComponent(path)
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try text.write(toFile: file, atomically: true, encoding: .utf8)
        }
        return root
    }

    /// A folder of `files` is refused, naming the file (its path ends so) and the rule.
    func expectRefused(_ files: [String: String], file: String, rule: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let root = try folder(files)
        defer { try? FileManager.default.removeItem(atPath: root) }
        do {
            _ = try ActivityTemplates(folder: root)
            Issue.record("\(files) was accepted", sourceLocation: sourceLocation)
        } catch {
            #expect(error.file.hasSuffix(file), "\(error)", sourceLocation: sourceLocation)
            #expect(error.reason.contains(rule), "\(error)", sourceLocation: sourceLocation)
        }
    }

    func activity(state: JSONValue, ended: Bool = false, stale: Bool = false) -> PresentedActivity {
        PresentedActivity(
            activityID: "A1", bundleID: "com.example.deliveries", attributesType: "DeliveryAttributes",
            attributes: .object([("orderNumber", .string("42"))]), state: ended ? .ended : .active, isStale: stale, relevanceScore: 0,
            content: state, startDate: Date(timeIntervalSince1970: 0))
    }

    @Test func aFolderGivesEachTypeItsRegionsAndPartials() throws {
        let root = try folder([
            "DeliveryAttributes/lockScreen.mustache": "{{> heading}}<p>{{state.status}}{{#isStale}} (stale){{/isStale}}</p>",
            "DeliveryAttributes/compactTrailing.mustache": "{{state.etaMinutes}} min",
            "heading.mustache": "<h3>Order {{attributes.orderNumber}}</h3>",
        ])
        let templates = try ActivityTemplates(folder: root)
        #expect(templates.attributesTypes == ["DeliveryAttributes"])
        let shown = activity(state: status("preparing", eta: 12), stale: true)
        #expect(templates.render(.lockScreen, of: shown)?.description == "<h3>Order 42</h3><p>preparing (stale)</p>")
        #expect(templates.render(.compactTrailing, of: shown)?.description == "12 min")
        #expect(templates.render(.minimal, of: shown) == nil, "a region without a template is drawn generically")
    }

    @Test func templatesThatCouldInsertMarkupOrCannotBeReadAreRefusedNamingTheFileAndTheRule() throws {
        let refused: [(String, String, String)] = [
            ("DeliveryAttributes/lockScreen.mustache", "{{{state.status}}}", "unescaped"),
            ("DeliveryAttributes/lockScreen.mustache", "{{&state.status}}", "unescaped"),
            ("DeliveryAttributes/lockScreen.mustache", "{{% CONTENT_TYPE: TEXT}}{{state.status}}", "escaped"),
            ("DeliveryAttributes/lockScreen.mustache", "{{=<% %>=}}<%state.status%>", "delimiters"),
            ("DeliveryAttributes/lockScreen.mustache", "{{#state}}open", "line 1"),
            ("DeliveryAttributes/sidebar.mustache", "x", "sidebar is not a region"),
            ("DeliveryAttributes/deep/lockScreen.mustache", "x", "nothing deeper"),
        ]
        for (path, text, rule) in refused {
            try expectRefused([path: text], file: path, rule: rule)
        }
        #expect(throws: ActivityTemplates.LoadError.self) { try ActivityTemplates(folder: "/nonexistent/templates") }
    }

    /// A partial that includes itself once crashed the server (its stack) the first time a device
    /// was drawn; one named by a value could be pointed anywhere by a push. Both are refused at
    /// start, naming the file and the chain; partials nest at most `maximumPartialDepth` deep.
    @Test func partialsThatIncludeThemselvesOrNestTooDeepOrAreNamedByAValueAreRefused() throws {
        let chain = (0...ActivityTemplates.maximumPartialDepth).map { level in
            ("p\(level).mustache", level == ActivityTemplates.maximumPartialDepth ? "end" : "{{> p\(level + 1)}}")
        }
        let refused: [([String: String], String, String)] = [
            (
                ["row.mustache": "<p>{{> row}}</p>", "DeliveryAttributes/lockScreen.mustache": "{{> row}}"], "row.mustache",
                "includes itself: row > row"
            ),
            (
                ["DeliveryAttributes/lockScreen.mustache": "{{#state}}{{>  a }}{{/state}}", "a.mustache": "{{>b}}", "b.mustache": "{{> a}}"],
                "b.mustache", "includes itself: a > b > a"
            ),
            (
                ["DeliveryAttributes/lockScreen.mustache": "{{> base}}", "base.mustache": "{{<base}}{{$title}}x{{/title}}{{/base}}"],
                "base.mustache", "includes itself: base > base"
            ),
            (["DeliveryAttributes/lockScreen.mustache": "{{>*state.status}}"], "lockScreen.mustache", "names its partial by a value"),
            (
                ["DeliveryAttributes/lockScreen.mustache": "{{<*state.status}}{{/state.status}}"], "lockScreen.mustache",
                "names its partial by a value"
            ),
            (
                Dictionary(uniqueKeysWithValues: chain + [("DeliveryAttributes/lockScreen.mustache", "{{> p0}}")]), "",
                "nests partials deeper than \(ActivityTemplates.maximumPartialDepth)"
            ),
        ]
        for (files, file, rule) in refused {
            try expectRefused(files, file: file, rule: rule)
        }
        // As deep as allowed: drawn, every level.
        let root = try folder(
            Dictionary(uniqueKeysWithValues: chain.dropFirst().map { $0 } + [("DeliveryAttributes/lockScreen.mustache", "{{> p1}}")]))
        defer { try? FileManager.default.removeItem(atPath: root) }
        let templates = try ActivityTemplates(folder: root)
        #expect(templates.render(.lockScreen, of: activity(state: status("preparing", eta: 1)))?.description == "end")
    }

    @Test func aTemplateSeesWhetherTheActivityEnded() throws {
        var templates = ActivityTemplates()
        try templates.add(
            "{{#isEnded}}Delivered{{/isEnded}}{{^isEnded}}{{state.etaMinutes}} min{{/isEnded}}", for: .minimal, of: "DeliveryAttributes")
        #expect(templates.render(.minimal, of: activity(state: status("x", eta: 3)))?.description == "3 min")
        #expect(templates.render(.minimal, of: activity(state: status("x", eta: 3), ended: true))?.description == "Delivered")
    }
}
