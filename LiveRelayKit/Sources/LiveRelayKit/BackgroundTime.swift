import Foundation

/// Time the system lets an app finish a send in: a push-to-start wakes the app in the background
/// for a few seconds, and an app the person leaves is suspended soon after; without asking, a
/// report's request may be cut off before the server answers. A report that was cut off stays in
/// the backlog and is sent again (it counts only once the server acknowledged it), so the time
/// asked for makes a report arrive sooner, never makes one lost.
@_spi(Adapter) public struct BackgroundTime: Sendable {
    /// Asks for time for the work named `reason`; the function it returns says the work is over.
    public let begin: @Sendable (_ reason: String) -> @Sendable () -> Void

    public init(begin: @escaping @Sendable (_ reason: String) -> @Sendable () -> Void) {
        self.begin = begin
    }

    /// Nothing asked: a Mac, Linux, a test.
    public static let none = BackgroundTime { _ in {} }

    /// The system's, where it suspends apps: `ProcessInfo.performExpiringActivity`, which an app
    /// extension may call too (UIKit's `beginBackgroundTask` may not), and which needs no main actor.
    public static let system: BackgroundTime = {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            return BackgroundTime { reason in
                let over = DispatchSemaphore(value: 0)
                // https://developer.apple.com/documentation/foundation/processinfo/performexpiringactivity(withreason:using:):
                // the time lasts while the block runs, so it waits for the work; called again with
                // `expired` when the time is up, it lets the first go (the send goes on until the
                // app is suspended, and a report not answered is sent again at the next launch).
                ProcessInfo.processInfo.performExpiringActivity(withReason: reason) { expired in
                    if expired { over.signal() } else { over.wait() }
                }
                return { over.signal() }
            }
        #else
            return .none
        #endif
    }()
}
