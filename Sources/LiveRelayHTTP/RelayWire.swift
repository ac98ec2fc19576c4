import Foundation
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// The API's format of answers: an accepted request's answer, fresh or replayed for its
/// idempotency key, is rendered from what it did by `answer`.
package struct RelayWire: Sendable {
    package init() {}

    /// The HTTP answer to an accepted request: `201` for a start, `200` for an update or end, `202`
    /// for a schedule, with the body the API document describes.
    package func answer(_ accepted: AcceptedRequest) -> (status: Int, body: JSONValue) {
        switch accepted {
        case .accepted(let acceptance): (acceptance.action == .start ? 201 : 200, RelayView.json(acceptance))
        case .scheduled(let schedule): (202, RelayView.json(schedule))
        case .reloaded(let reload): (200, RelayView.json(reload))
        }
    }
}
