import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// Requests kept to run at their time.
extension RelayService {
    func schedule(
        app: String, key: String, _ request: ScheduledRequest, at: Date, context: WriteContext
    ) async throws -> AcceptedRequest {
        var waiting = request
        switch waiting {  // run as given, when due
        case .start(var start):
            start.at = nil
            waiting = .start(start)
        case .change(var change):
            change.at = nil
            waiting = .change(change)
        case .reload(let type, var reload):
            reload.at = nil
            waiting = .reload(type, reload)
        }
        let schedule = ScheduleRecord(
            id: "sch_" + randomHex(bytes: 8), bundleID: app, key: key, action: request.action, request: try waiting.stored(), dueAt: at,
            createdAt: now())
        try await store.insertSchedule(schedule, context: context)
        metrics.count(Metric.requestsAcceptedTotal, ["action": "schedule"])
        noteChange()
        return .scheduled(schedule)
    }

    /// The schedules of an app (nil: every app), of one key if given.
    package func schedules(app: String?, key: String?) async throws -> [ScheduleRecord] {
        try await store.schedules(app: app, key: key)
    }

    package func schedule(id: String) async throws -> ScheduleRecord {
        guard let schedule = try await store.schedule(id: id) else { throw RelayError.notFound("id", "no schedule \(id)") }
        return schedule
    }

    package func cancelSchedule(id: String) async throws -> ScheduleRecord {
        do {
            guard let schedule = try await store.cancelSchedule(id: id, at: now()) else { throw RelayError.notFound("id", "no schedule \(id)") }
            noteChange()
            return schedule
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Runs the schedules that are due; a schedule whose request no longer reads or applies fails
    /// with the reason.
    @discardableResult
    package func runDueSchedules() async throws -> Int {
        let due = try await store.dueSchedules(at: now(), limit: 100)
        if !due.isEmpty { noteChange() }
        for schedule in due {
            let context = WriteContext(scheduleID: schedule.id)
            guard let request = ScheduledRequest(stored: schedule.request) else {
                try await store.failSchedule(id: schedule.id, reason: "its request is not in the form this release keeps schedules in")
                continue
            }
            do {
                let app = try await app(schedule.bundleID)
                switch request {
                case .start(let request): _ = try await start(app: app, key: schedule.key, request, context: context)
                case .change(let request): _ = try await change(app: app, key: schedule.key, request, context: context)
                case .reload(let type, let request): _ = try await reload(app: app, type, request, context: context)
                }
            } catch let error as RelayError {
                try await store.failSchedule(id: schedule.id, reason: error.description)
            } catch let error as LiveActivityValidationError {
                try await store.failSchedule(id: schedule.id, reason: error.description)
            }
        }
        return due.count
    }
}
