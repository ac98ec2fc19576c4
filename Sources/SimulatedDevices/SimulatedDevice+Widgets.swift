import Foundation
import LiveActivityKit

/// What a widget's or control's reloads left: when the last was, how many there were, and the
/// value its provider read then.
public struct SurfaceReloads: Sendable, Hashable, Codable {
    public var lastAt: Date?
    public var count = 0
    /// The app's shared data under the kind at the last reload, as a timeline provider reads its
    /// app group; `nil` before the first reload or when the app wrote nothing there.
    public var value: JSONValue? { valueText.flatMap(JSONValue.init(kept:)) }
    /// Kept as JSON text, so that a state file keeps its numbers' literals.
    private var valueText: String?

    mutating func reload(at now: Date, reading value: JSONValue?) {
        lastAt = now
        count += 1
        valueText = value?.serializedString
    }
}

/// A widget the person placed: WidgetKit's `WidgetInfo` (kind and family).
public struct PlacedWidget: Sendable, Hashable, Codable {
    public var kind: String
    /// `systemSmall`, `systemMedium`, `accessoryRectangular`…, as `WidgetFamily` names them.
    public var family: String
    public var reloads = SurfaceReloads()

    public init(kind: String, family: String) {
        self.kind = kind
        self.family = family
    }

    /// WidgetKit's families; a widget of another is refused when placed.
    public static let families = [
        "systemSmall", "systemMedium", "systemLarge", "systemExtraLarge", "accessoryCircular", "accessoryRectangular", "accessoryInline",
    ]
}

/// A control the person added to Control Center, with its own token.
public struct PlacedControl: Sendable, Hashable, Codable {
    public var kind: String
    public var token: String
    public var reloads = SurfaceReloads()

    public init(kind: String, token: String) {
        self.kind = kind
        self.token = token
    }
}

/// One app's widgets and controls on a device, WidgetKit's tokens for them, the data its
/// extension shares with it, and the reloads that pushes spent of the day's budget.
public struct AppSurfaces: Sendable, Hashable, Codable {
    /// `WidgetPushInfo.token`: one per app and device while it has a widget placed.
    public var widgetToken: String?
    public var widgets: [PlacedWidget] = []
    public var controls: [PlacedControl] = []
    /// The app group's data the timeline providers read, by widget or control kind.
    public var sharedData: [String: JSONValue] {
        get { sharedText.compactMapValues(JSONValue.init(kept:)) }
        set { sharedText = newValue.mapValues(\.serializedString) }
    }
    private var sharedText: [String: String] = [:]
    var widgetReloads: [Date] = []
    var controlReloads: [Date] = []

    public var isEmpty: Bool { widgets.isEmpty && controls.isEmpty && sharedData.isEmpty }
}

extension JSONValue {
    /// A value kept as its JSON text; text that no longer parses reads as nothing.
    fileprivate init?(kept text: String) {
        guard let value = try? JSONValue(parsing: Array(text.utf8)) else { return nil }
        self = value
    }
}

/// Refusals of the widget and control operations, named as the person or WidgetKit would see them.
public struct SurfaceError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
}

/// WidgetKit's side (widget pushes from iOS 26, control pushes from iOS 18): widgets and controls placed and removed, their tokens issued,
/// rotated and withdrawn, and what a widgets or controls push does.
extension SimulatedDevice {
    public mutating func placeWidget(bundleID: String, kind: String, family: String, at now: Date) throws(SurfaceError) -> [DeviceEvent] {
        try checkSurfaceTarget(bundleID, kind: kind, needs: .widgetPushes)
        guard PlacedWidget.families.contains(family) else {
            throw SurfaceError(description: "family: must be one of \(PlacedWidget.families.joined(separator: ", ")), got \"\(family)\"")
        }
        var events: [DeviceEvent] = []
        surfaces[bundleID, default: AppSurfaces()].widgets.append(PlacedWidget(kind: kind, family: family))
        if surfaces[bundleID]?.widgetToken == nil {
            let token = newToken()
            surfaces[bundleID]?.widgetToken = token
            events.append(.tokenIssued(token: token, bundleID: bundleID, kind: .widgets, environment: environment(of: bundleID)))
        }
        write("widget \(kind) (\(family)) placed on the Home Screen", bundleID, at: now)
        return events + [.widgetPushInfoChanged(bundleID: bundleID)]
    }

    /// Removes one widget of that kind and family; with the last one, WidgetKit withdraws the token.
    public mutating func removeWidget(bundleID: String, kind: String, family: String, at now: Date) throws(SurfaceError) -> [DeviceEvent] {
        guard let index = surfaces[bundleID]?.widgets.firstIndex(where: { $0.kind == kind && $0.family == family }) else {
            throw SurfaceError(description: "no \(kind) widget (\(family)) of \(bundleID) is placed")
        }
        surfaces[bundleID]?.widgets.remove(at: index)
        var events: [DeviceEvent] = []
        if surfaces[bundleID]?.widgets.isEmpty == true, let token = surfaces[bundleID]?.widgetToken {
            surfaces[bundleID]?.widgetToken = nil
            events.append(.tokenRetired(token: token, at: now, bundleID: bundleID))
            write("widget \(kind) (\(family)) removed: the app has no widget left, its widget token is withdrawn", bundleID, at: now)
        } else {
            write("widget \(kind) (\(family)) removed", bundleID, at: now)
        }
        dropEmptySurfaces(bundleID)
        return events + [.widgetPushInfoChanged(bundleID: bundleID)]
    }

    /// A new widget token, as APNs routing events bring (the old one is `410` from now).
    public mutating func rotateWidgetToken(bundleID: String, at now: Date) throws(SurfaceError) -> [DeviceEvent] {
        guard let old = surfaces[bundleID]?.widgetToken else {
            throw SurfaceError(description: "\(bundleID) has no widget token: place a widget first")
        }
        let token = newToken()
        surfaces[bundleID]?.widgetToken = token
        write("widget token replaced", bundleID, at: now)
        return [
            .tokenRetired(token: old, at: now, bundleID: bundleID),
            .tokenIssued(token: token, bundleID: bundleID, kind: .widgets, environment: environment(of: bundleID)),
            .widgetPushInfoChanged(bundleID: bundleID),
        ]
    }

    public mutating func addControl(bundleID: String, kind: String, at now: Date) throws(SurfaceError) -> [DeviceEvent] {
        try checkSurfaceTarget(bundleID, kind: kind, needs: .controlPushes)
        guard surfaces[bundleID]?.controls.contains(where: { $0.kind == kind }) != true else {
            throw SurfaceError(description: "control \(kind) of \(bundleID) is in Control Center already")
        }
        let token = newToken()
        surfaces[bundleID, default: AppSurfaces()].controls.append(PlacedControl(kind: kind, token: token))
        write("control \(kind) added to Control Center", bundleID, at: now)
        return [
            .tokenIssued(token: token, bundleID: bundleID, kind: .control(kind: kind), environment: environment(of: bundleID)),
            .controlPushInfoChanged(bundleID: bundleID),
        ]
    }

    public mutating func removeControl(bundleID: String, kind: String, at now: Date) throws(SurfaceError) -> [DeviceEvent] {
        guard let index = surfaces[bundleID]?.controls.firstIndex(where: { $0.kind == kind }), let control = surfaces[bundleID]?.controls[index]
        else {
            throw SurfaceError(description: "no control \(kind) of \(bundleID) is in Control Center")
        }
        surfaces[bundleID]?.controls.remove(at: index)
        dropEmptySurfaces(bundleID)
        write("control \(kind) removed from Control Center: its token is withdrawn", bundleID, at: now)
        return [.tokenRetired(token: control.token, at: now, bundleID: bundleID), .controlPushInfoChanged(bundleID: bundleID)]
    }

    /// What the app writes to the app group its extension reads (`nil` removes the value).
    public mutating func setSharedData(bundleID: String, kind: String, value: JSONValue?) throws(SurfaceError) {
        guard apps[bundleID] != nil else { throw SurfaceError(description: "\(bundleID) is not installed") }
        surfaces[bundleID, default: AppSurfaces()].sharedData[kind] = value
        dropEmptySurfaces(bundleID)
    }

    private func checkSurfaceTarget(_ bundleID: String, kind: String, needs feature: ActivityKitFeature) throws(SurfaceError) {
        guard apps[bundleID] != nil else { throw SurfaceError(description: "\(bundleID) is not installed") }
        guard supports(feature) else {
            throw SurfaceError(description: "\(feature.name) need iOS \(feature.introduced); this iPhone runs iOS \(systemVersion)")
        }
        guard !kind.isEmpty, kind.utf8.count <= 200 else { throw SurfaceError(description: "kind: must be 1 to 200 bytes") }
    }

    private mutating func dropEmptySurfaces(_ bundleID: String) {
        if surfaces[bundleID]?.isEmpty == true, surfaces[bundleID]?.widgetToken == nil { surfaces[bundleID] = nil }
    }

    /// Where a widget or control token leads on this device.
    func surfaceTarget(of token: String) -> TokenTarget? {
        for (bundleID, app) in surfaces {
            if app.widgetToken == token { return .widgets(bundleID: bundleID) }
            if let control = app.controls.first(where: { $0.token == token }) { return .control(bundleID: bundleID, kind: control.kind) }
        }
        return nil
    }

    /// A widgets or controls push APNs handed over: WidgetKit reloads the app's widgets (every
    /// one) or that control, as a timeline provider would, within the day's budget.
    mutating func reload(_ push: DevicePush, _ type: ReloadPushType, bundleID: String, controlKind: String?, at now: Date) -> [DeviceEvent] {
        guard ReloadPushType.asksForReload(push.payload) else {
            write("dropped a \(type.rawValue) push: its body has no aps.content-changed true", bundleID, at: now)
            return []
        }
        var app = surfaces[bundleID] ?? AppSurfaces()
        defer { surfaces[bundleID] = app }
        let spent: WritableKeyPath<AppSurfaces, [Date]> = type == .widgets ? \.widgetReloads : \.controlReloads
        if let roomAt = Self.spend(settings.reloadsPerDay, per: 86_400, from: &app[keyPath: spent], at: now) {
            write(
                "dropped a \(type.rawValue) push: the reload budget of \(settings.reloadsPerDay) a day is spent (the next fits at \(roomAt.iso8601))",
                bundleID, at: now)
            return []
        }
        var kinds: [String] = []
        if type == .widgets {
            for index in app.widgets.indices {
                app.widgets[index].reloads.reload(at: now, reading: app.sharedData[app.widgets[index].kind])
                kinds.append(app.widgets[index].kind)
            }
        } else {
            for index in app.controls.indices where app.controls[index].kind == controlKind {
                app.controls[index].reloads.reload(at: now, reading: app.sharedData[app.controls[index].kind])
                kinds.append(app.controls[index].kind)
            }
        }
        kinds = Array(Set(kinds)).sorted()
        write("\(type.rawValue) push: reloaded \(kinds.joined(separator: ", ")) (priority \(push.priority))", bundleID, at: now)
        return [.surfacesReloaded(bundleID: bundleID, type: type, kinds: kinds)]
    }
}
