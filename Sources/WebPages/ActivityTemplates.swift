import Foundation
import LiveActivityKit
import Mustache
import SimulatedDevices

/// The places a Live Activity's widget fills (seed 000): the Lock Screen presentation (also the
/// banner, StandBy, CarPlay without `small` and the Mac's menu bar), the compact and minimal
/// Dynamic Island, the four expanded regions, and the `small` family of the Watch's Smart Stack and
/// CarPlay (`.supplementalActivityFamilies([.small])`: a type whose template has it declares it).
package enum TemplateRegion: String, Sendable, CaseIterable {
    case lockScreen, compactLeading, compactTrailing, minimal, expandedLeading, expandedTrailing, expandedCenter, expandedBottom, small
}

/// What fills each region of each attributes type, in Mustache, over the activity's
/// `attributes` and content-state (`state`), `isStale`, `isEnded`, `relevanceScore`, `app` and
/// `attributesType`. A region without a template is drawn by the generic layout.
///
/// From a folder: `<folder>/<AttributesType>/<region>.mustache`; files directly in the folder are
/// partials (`{{> name}}`). Every value a template inserts is escaped: templates that could insert
/// markup unescaped (`{{{…}}}`, `{{&…}}`) or switch escaping off (`{{%…}}`, `{{=…=}}`) are refused.
/// Rendering is bounded: a template that includes itself, however indirectly, or partials nested
/// deeper than `maximumPartialDepth` is refused as it is added, and so is a partial named by a
/// value (`{{>*name}}`), which the pushed content could point anywhere.
package struct ActivityTemplates: Sendable {
    /// Partials within partials, at most.
    package static let maximumPartialDepth = 8

    private var library = MustacheLibrary()
    /// Which regions have a template, by attributes type.
    private var regions: [String: Set<TemplateRegion>] = [:]
    /// The partials each template includes, by the name it is registered under.
    private var includes: [String: Set<String>] = [:]

    package init() {}

    /// A template that cannot be used, and why, naming its file.
    package struct LoadError: Error, CustomStringConvertible {
        package var file: String
        package var reason: String
        package var description: String { "\(file): \(reason)" }
    }

    /// Reads every template under `folder`.
    package init(folder: String) throws(LoadError) {
        let manager = FileManager.default
        var isFolder: ObjCBool = false
        guard manager.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw LoadError(file: folder, reason: "is not a folder of templates (<AttributesType>/<region>.mustache)")
        }
        let files = (manager.enumerator(atPath: folder)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".mustache") }.sorted()
        for file in files {
            let path = (folder as NSString).appendingPathComponent(file)
            guard let data = manager.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
                throw LoadError(file: path, reason: "cannot be read as UTF-8 text")
            }
            let parts = String(file.dropLast(".mustache".count)).split(separator: "/").map(String.init)
            switch parts.count {
            case 1: try addPartial(named: parts[0], text, file: path)
            case 2:
                guard let region = TemplateRegion(rawValue: parts[1]) else {
                    throw LoadError(
                        file: path,
                        reason: "\(parts[1]) is not a region; the regions are \(TemplateRegion.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                try add(text, for: region, of: parts[0], file: path)
            default:
                throw LoadError(file: path, reason: "templates are <AttributesType>/<region>.mustache, partials <name>.mustache; nothing deeper")
            }
        }
    }

    /// Adds the template of one region of one attributes type.
    package mutating func add(_ text: String, for region: TemplateRegion, of attributesType: String, file: String? = nil) throws(LoadError) {
        let name = Self.name(region, of: attributesType)
        try register(text, named: name, file: file ?? "\(name).mustache")
        regions[attributesType, default: []].insert(region)
    }

    /// Adds a partial that templates include with `{{> name}}`.
    package mutating func addPartial(named name: String, _ text: String, file: String? = nil) throws(LoadError) {
        try register(text, named: name, file: file ?? "\(name).mustache")
    }

    private mutating func register(_ text: String, named name: String, file: String) throws(LoadError) {
        var includes = includes
        includes[name] = try Self.partials(in: text, file: file)
        let template = try Self.parse(text, file: file)
        try Self.checkNesting(includes, file: file)
        self.includes = includes
        library.register(template, named: name)
    }

    /// The partials `text` includes (`{{> name}}`, and parents `{{< name}}…{{/name}}`).
    private static func partials(in text: String, file: String) throws(LoadError) -> Set<String> {
        var names: Set<String> = []
        var rest = text[...]
        while let tag = rest.range(of: "{{") {
            rest = rest[tag.upperBound...]
            guard let sigil = rest.first, sigil == ">" || sigil == "<" else { continue }
            let name = rest.dropFirst().drop { $0.isWhitespace }.prefix { !$0.isWhitespace && $0 != "}" }
            if name.hasPrefix("*") {
                throw LoadError(
                    file: file,
                    reason: "{{\(sigil)\(name)}} names its partial by a value, which the pushed content could point anywhere; name the partial")
            }
            names.insert(String(name))
        }
        return names
    }

    /// Refuses partials that include themselves (the renderer would recurse until the stack ends)
    /// or nest deeper than `maximumPartialDepth`, naming the chain.
    private static func checkNesting(_ includes: [String: Set<String>], file: String) throws(LoadError) {
        var heights: [String: Int] = [:]
        var chain: [String] = []
        func tooDeep(_ names: [String]) -> LoadError {
            LoadError(file: file, reason: "nests partials deeper than \(maximumPartialDepth): \(names.joined(separator: " > "))")
        }
        /// The most partials within partials below `name`.
        func height(_ name: String) throws(LoadError) -> Int {
            if let start = chain.firstIndex(of: name) {
                throw LoadError(file: file, reason: "includes itself: \((chain[start...] + [name]).joined(separator: " > "))")
            }
            if let known = heights[name] { return known }
            guard let below = includes[name] else { return 0 }
            chain.append(name)
            guard chain.count <= maximumPartialDepth + 1 else { throw tooDeep(chain) }
            var tallest = 0
            for partial in below.sorted() { tallest = max(tallest, 1 + (try height(partial))) }
            guard tallest <= maximumPartialDepth else { throw tooDeep(chain) }
            chain.removeLast()
            heights[name] = tallest
            return tallest
        }
        for name in includes.keys.sorted() { _ = try height(name) }
    }

    package var attributesTypes: [String] { regions.keys.sorted() }

    /// The region of `activity` drawn by its type's template, or `nil` when it has none.
    package func render(_ region: TemplateRegion, of activity: PresentedActivity) -> HTML? {
        guard regions[activity.attributesType]?.contains(region) == true,
            let text = library.render(Self.context(of: activity), withTemplate: Self.name(region, of: activity.attributesType))
        else { return nil }
        return HTML(markup: text)
    }

    private static func name(_ region: TemplateRegion, of type: String) -> String { "\(type)/\(region.rawValue)" }

    private static func parse(_ text: String, file: String) throws(LoadError) -> MustacheTemplate {
        for (tag, what) in [
            ("{{{", "inserts a value unescaped"), ("{{&", "inserts a value unescaped"), ("{{%", "changes how values are escaped"),
            ("{{=", "changes the delimiters"),
        ] where text.contains(tag) {
            throw LoadError(file: file, reason: "\(tag)…}} \(what); every value a template inserts is escaped")
        }
        do {
            return try MustacheTemplate(string: text)
        } catch let error as MustacheTemplate.ParserError {
            throw LoadError(file: file, reason: "line \(error.context.lineNumber), column \(error.context.columnNumber): \(error.error)")
        } catch {
            throw LoadError(file: file, reason: "\(error)")
        }
    }

    /// What a template sees.
    static func context(of activity: PresentedActivity) -> [String: Any] {
        [
            "attributes": mustacheValue(activity.attributes), "state": mustacheValue(activity.content), "isStale": activity.isStale,
            "isEnded": activity.state == .ended, "relevanceScore": activity.relevanceScore, "app": activity.bundleID,
            "attributesType": activity.attributesType,
        ]
    }

    /// JSON as Mustache walks it: objects as dictionaries, numbers as written.
    static func mustacheValue(_ value: JSONValue) -> Any {
        switch value {
        case .null: Optional<String>.none as Any
        case .bool(let flag): flag
        case .number(let literal): literal
        case .string(let text): text
        case .array(let elements): elements.map(mustacheValue)
        case .object(let members): Dictionary(members.map { ($0.key, mustacheValue($0.value)) }, uniquingKeysWith: { first, _ in first })
        }
    }
}
