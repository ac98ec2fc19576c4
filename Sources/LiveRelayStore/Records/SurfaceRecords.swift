import Foundation
import LiveActivityKit

/// A widget as WidgetKit's `WidgetInfo` names it: its kind and family.
package struct WidgetPlacement: Sendable, Hashable {
    package var kind: String
    package var family: String

    package init(kind: String, family: String) {
        self.kind = kind
        self.family = family
    }
}

/// A token WidgetKit gave an app on a device (iOS 26): the app's one widget token, with the
/// widgets placed, or the token of one of its controls.
package struct SurfaceTokenRecord: Sendable, Hashable {
    package var bundleID: String
    package var deviceID: String
    package var pushType: ReloadPushType
    /// The control's kind; empty for the widget token.
    package var kind: String
    package var token: String
    /// The widgets placed, for the widget token; empty for a control's.
    package var widgets: [WidgetPlacement]
    package var environment: PushEnvironment
    package var userID: String?
    package var appVersion: String?
    package var updatedAt: Date

    package init(
        bundleID: String, deviceID: String, pushType: ReloadPushType, kind: String = "", token: String, widgets: [WidgetPlacement] = [],
        environment: PushEnvironment, userID: String? = nil, appVersion: String? = nil, updatedAt: Date
    ) {
        self.bundleID = bundleID
        self.deviceID = deviceID
        self.pushType = pushType
        self.kind = kind
        self.token = token
        self.widgets = widgets
        self.environment = environment
        self.userID = userID
        self.appVersion = appVersion
        self.updatedAt = updatedAt
    }

    /// The widgets as kept: `[{"kind": …, "family": …}]`.
    var storedWidgets: String? {
        widgets.isEmpty
            ? nil
            : JSONValue.array(widgets.map { .object([("kind", .string($0.kind)), ("family", .string($0.family))]) }).serializedString
    }

    static func widgets(stored text: String?) -> [WidgetPlacement] {
        guard let text, let value = try? JSONValue(parsing: Array(text.utf8)), let items = value.arrayElements else { return [] }
        return items.compactMap { item in
            guard let kind = item["kind"]?.stringValue, let family = item["family"]?.stringValue else { return nil }
            return WidgetPlacement(kind: kind, family: family)
        }
    }
}

/// What a reload sees of its app, in its transaction: the tokens of the push type its audience
/// holds, and each device's reloads of that type since the budget's window began.
package struct ReloadSnapshot: Sendable, Hashable {
    package var tokens: [SurfaceTokenRecord]
    package var recentReloads: [String: Int]

    package init(tokens: [SurfaceTokenRecord], recentReloads: [String: Int]) {
        self.tokens = tokens
        self.recentReloads = recentReloads
    }
}

/// The pushes a reload queues (each to a widget or control token, with Apple's one body), and its answer.
package struct ReloadPlan: Sendable, Hashable {
    package var acceptedAt: Date
    package var deliveries: [NewDelivery]
    package var acceptance: ReloadAcceptance

    package init(acceptedAt: Date, deliveries: [NewDelivery], acceptance: ReloadAcceptance) {
        self.acceptedAt = acceptedAt
        self.deliveries = deliveries
        self.acceptance = acceptance
    }
}
