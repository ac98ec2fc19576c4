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
            let root = try folder([path: text])
            do {
                _ = try ActivityTemplates(folder: root)
                Issue.record("\(path) with \(text) was accepted")
            } catch {
                #expect(error.description.contains(path), "\(error)")
                #expect(error.description.contains(rule), "\(error)")
            }
        }
        #expect(throws: ActivityTemplates.LoadError.self) { try ActivityTemplates(folder: "/nonexistent/templates") }
    }

    @Test func aTemplateSeesWhetherTheActivityEnded() throws {
        var templates = ActivityTemplates()
        try templates.add("{{#isEnded}}Delivered{{/isEnded}}{{^isEnded}}{{state.etaMinutes}} min{{/isEnded}}", for: .minimal, of: "DeliveryAttributes")
        #expect(templates.render(.minimal, of: activity(state: status("x", eta: 3)))?.description == "3 min")
        #expect(templates.render(.minimal, of: activity(state: status("x", eta: 3), ended: true))?.description == "Delivered")
    }
}
