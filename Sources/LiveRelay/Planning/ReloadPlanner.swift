import Foundation
import LiveActivityKit
import LiveRelayStore

/// Decides a reload of an app's widgets or controls, from the tokens its audience holds and what
/// each device's reloads of the day spent: a push to each widget token whose widgets include a
/// kind asked for (or any), or to each control token of a kind asked for, except past the
/// device's budget, where it is held back and counted. Pure.
struct ReloadPlanner {
    /// Reloads one device is sent a day, of an app's widgets and, apart, of its controls. The
    /// system budgets them and Apple publishes no figure for pushes; its "40 to 70 refreshes in a
    /// 24-hour period" for a widget viewed often is our assumption (the simulated iPhones drop
    /// reloads past the same number).
    static let perDevicePerDay = 70
    static let window: TimeInterval = 86_400

    func plan(
        app: String, _ type: ReloadPushType, _ request: ReloadRequest, snapshot: ReloadSnapshot, at acceptedAt: Date, requestID: String
    ) -> (ReloadPlan, ReloadAcceptance) {
        let kinds = request.kinds.map(Set.init)
        let matching = snapshot.tokens.filter { token in
            guard let kinds else { return true }
            return type == .widgets ? token.widgets.contains { kinds.contains($0.kind) } : kinds.contains(token.kind)
        }
        var room = snapshot.recentReloads.mapValues { max(0, Self.perDevicePerDay - $0) }
        var deliveries: [NewDelivery] = []
        var heldBack = 0
        for token in matching {
            guard room[token.deviceID, default: Self.perDevicePerDay] > 0 else {
                heldBack += 1
                continue
            }
            room[token.deviceID, default: Self.perDevicePerDay] -= 1
            deliveries.append(
                NewDelivery(
                    bundleID: app, key: "", event: .reload, target: .surface(type, deviceID: token.deviceID, token: token.token),
                    environment: token.environment, payloadIndex: 0, priority: request.priority, priorityReason: "requested",
                    expiration: request.expiration.map(unixSeconds), timestamp: unixSeconds(acceptedAt), requestID: requestID))
        }
        var warnings: [String] = []
        let what = type == .widgets ? "a widget" : "a control"
        if matching.isEmpty {
            warnings.append(
                "no device of the audience has \(what)\(request.kinds.map { " of the kinds \($0.joined(separator: ", "))" } ?? "") with a token: nothing is sent"
            )
        }
        if heldBack > 0 {
            warnings.append(
                "\(heldBack) held back: their device has had \(Self.perDevicePerDay) \(type.rawValue) reloads in the last 24 hours, the most the system is assumed to allow"
            )
        }
        let acceptance = ReloadAcceptance(
            pushType: type, kinds: request.kinds, requestID: requestID, deliveries: deliveries.count, heldBack: heldBack, warnings: warnings)
        return (ReloadPlan(acceptedAt: acceptedAt, deliveries: deliveries, acceptance: acceptance), acceptance)
    }
}
