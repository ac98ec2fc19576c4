import Foundation
import LiveActivityKit

/// A statement with `?` for each argument, and the arguments in order. Written once for every
/// engine: SQLite takes it as it is, PostgreSQL with `$1`, `$2`… (`numbered`).
struct SQLStatement: Sendable, Hashable {
    var text: String
    var arguments: [SQLArgument]

    /// The text with PostgreSQL's numbered parameters. No statement here has a `?` of its own:
    /// every value, reasons included, is an argument.
    var numbered: String { Self.numbering(text) }

    /// `count` parameters, comma-separated: a list's or a row's values.
    static func marks(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ", ") }

    static func numbering(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count + 16)
        var number = 0
        var start = text.utf8.startIndex
        for index in text.utf8.indices where text.utf8[index] == UInt8(ascii: "?") {
            number += 1
            result += text[start..<index]
            result += "$\(number)"
            start = text.utf8.index(after: index)
        }
        result += text[start...]
        return result
    }
}

/// A listing's `WHERE`, built from the filters given: only what is asked appears, so that each
/// form of the statement is planned for itself.
struct SQLConditions {
    private var conditions: [String] = []
    private(set) var arguments: [SQLArgument] = []

    /// `condition` with its `?`s, and their values in order.
    mutating func add(_ condition: String, _ values: SQLArgument...) { add(condition, values) }

    mutating func add(_ condition: String, _ values: [SQLArgument]) {
        conditions.append(condition)
        arguments += values
    }

    /// `WHERE …`, or nothing when no filter was given.
    var clause: String { conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ") }
}

/// A value bound to a statement, as the stores' columns hold it: dates are seconds since 1970.
enum SQLArgument: Sendable, Hashable {
    case text(String?)
    case real(Double?)
    case integer(Int64?)
    case bool(Bool)
    case bytes([UInt8])

    static func seconds(_ date: Date?) -> SQLArgument { .real(date?.timeIntervalSince1970) }
}

/// The outbox's decisions as statements, the same text for both engines: what a move may change
/// is exactly what `DeliveryStatus.after(_:)` allows, because its `status` condition is made from
/// the event's sources.
enum OutboxStatements {
    /// With `returningIDs`, the statement gives the id of each delivery it moved.
    static func move(_ move: DeliveryMove, returningIDs: Bool = false) -> SQLStatement {
        var set = "status = '\(move.event.destination.rawValue)'"
        set += move.event.destination.isFinal ? ", finished_at = ?" : ", next_attempt_at = ?"
        var arguments: [SQLArgument] = [.seconds(move.at)]
        if let reason = move.reason {
            set += ", apns_reason = ?"
            arguments.append(.text(reason))
        }
        let (conditions, selected) = where_(move.selection, event: move.event)
        return SQLStatement(
            text: "UPDATE deliveries SET \(set) WHERE \(conditions)" + (returningIDs ? " RETURNING id" : ""), arguments: arguments + selected)
    }

    /// Records an answer to one delivery while it is still claimed, returning what the rules need
    /// to know of it (`AnsweredDelivery`, read with `answered(bundleID:key:target:deviceID:token:channelID:)`)
    /// when it was. The engines record `sent` answers in batches their own way (SQLite's `VALUES`,
    /// PostgreSQL's arrays), setting what this sets for one.
    static func answer(id: Int64, _ outcome: DeliveryOutcome, at now: Date) -> SQLStatement {
        let event = outcome.event
        let status = SQLArgument.integer
        var set = "status = '\(event.destination.rawValue)', attempts = attempts + 1, attempted_at = ?, apns_status = ?, apns_reason = ?"
        var arguments: [SQLArgument]
        switch outcome {
        case .sent(let code, let apnsID):
            set += ", apns_id = ?, finished_at = ?"
            arguments = [.seconds(now), status(Int64(code)), .text(nil), .text(apnsID), .seconds(now)]
        case .retry(let next, let code, let reason):
            set += ", next_attempt_at = ?"
            arguments = [.seconds(now), status(code.map(Int64.init)), .text(reason), .seconds(next)]
        case .failed(let code, let reason, _):
            set += ", finished_at = ?"
            arguments = [.seconds(now), status(code.map(Int64.init)), .text(reason), .seconds(now)]
        }
        let (statuses, statusArguments) = statusCondition(amongIDs: event)
        return SQLStatement(
            text: "UPDATE deliveries SET \(set) WHERE id = ? AND \(statuses) RETURNING \(answeredColumns)",
            arguments: arguments + [.integer(id)] + statusArguments)
    }

    /// What an `answer` statement returns, which `answered(_:)` reads.
    static let answeredColumns = "bundle_id, key, target, device_id, token, channel_id, id, event, environment, attempts"

    /// The delivery an `answer` statement returned.
    static func answered(_ row: some StoreRow) throws -> AnsweredDelivery {
        let kind = row.string(2)
        guard let target = DeliveryTargetKind(rawValue: kind) else { throw UnreadableStoreValue(column: "deliveries.target", value: "\"\(kind)\"") }
        return AnsweredDelivery(
            id: row.integer(6) ?? 0, bundleID: row.string(0), key: row.string(1), event: try row.value(7, "deliveries.event"),
            target: DeliveryTarget(kind: target, deviceID: row.text(3), token: row.text(4), channelID: row.text(5)),
            environment: try row.value(8, "deliveries.environment"), attempts: Int(row.integer(9) ?? 1))
    }

    /// Writes `event` to the log, at `at`; `onlyIfEndedOnEveryDevice`: only when no device of its
    /// key still has the activity.
    static func record(
        _ event: NewEvent, at: Date, id: String = NewEvent.newID(), onlyIfEndedOnEveryDevice: Bool = false, unlessRecordedSince: Date? = nil
    ) -> SQLStatement {
        let values: [SQLArgument] = [
            .text(id), .text(event.type.rawValue), .text(event.bundleID), .text(event.environment?.rawValue), .text(event.key),
            .text(event.deviceID), .seconds(at), .text(event.data.serializedString),
        ]
        let columns = "id, type, bundle_id, environment, key, device_id, occurred_at, data"
        if let since = unlessRecordedSince {
            return SQLStatement(
                text: """
                    INSERT INTO events (\(columns)) SELECT \(SQLStatement.marks(values.count))
                    WHERE NOT EXISTS (SELECT 1 FROM events WHERE bundle_id = ? AND key = ? AND type = ? AND occurred_at > ?)
                    """,
                arguments: values + [.text(event.bundleID), .text(event.key), .text(event.type.rawValue), .seconds(since)])
        }
        guard onlyIfEndedOnEveryDevice else {
            return SQLStatement(text: "INSERT INTO events (\(columns)) VALUES (\(SQLStatement.marks(values.count)))", arguments: values)
        }
        return SQLStatement(
            text: """
                INSERT INTO events (\(columns)) SELECT \(SQLStatement.marks(values.count))
                WHERE NOT EXISTS (SELECT 1 FROM activity_tokens WHERE bundle_id = ? AND key = ? AND state = 'live')
                    AND NOT EXISTS (SELECT 1 FROM channel_listeners WHERE bundle_id = ? AND key = ? AND state = 'live')
                """,
            arguments: values + [.text(event.bundleID), .text(event.key), .text(event.bundleID), .text(event.key)])
    }

    /// The statement that carries out a decision.
    static func statement(_ decision: OutboxDecision, at now: Date) -> SQLStatement {
        switch decision {
        case .move(let move): OutboxStatements.move(move)
        case .killToken(let token): OutboxStatements.kill(token)
        case .record(let event): OutboxStatements.record(event, at: now)
        case .recordIfEndedOnEveryDevice(let event): OutboxStatements.record(event, at: now, onlyIfEndedOnEveryDevice: true)
        case .recordUnlessRecorded(let event, let since): OutboxStatements.record(event, at: now, unlessRecordedSince: since)
        }
    }

    static func kill(_ token: DeadToken) -> SQLStatement {
        switch token.kind {
        case .activity:
            SQLStatement(
                text: "UPDATE activity_tokens SET state = 'dead', state_reason = ? WHERE bundle_id = ? AND key = ? AND device_id = ? AND token = ?",
                arguments: [.text(token.reason), .text(token.bundleID), .text(token.key), .text(token.deviceID), .text(token.token)])
        case .pushToStart:
            SQLStatement(
                text: "UPDATE push_to_start_tokens SET dead_reason = ? WHERE bundle_id = ? AND device_id = ? AND token = ?",
                arguments: [.text(token.reason), .text(token.bundleID), .text(token.deviceID), .text(token.token)])
        case .surface:
            // A widget or control token APNs refused is forgotten: the extension reports a new one.
            SQLStatement(
                text: "DELETE FROM surface_tokens WHERE bundle_id = ? AND device_id = ? AND token = ?",
                arguments: [.text(token.bundleID), .text(token.deviceID), .text(token.token)])
        }
    }

    /// The deliveries an event applies to.
    static func statusCondition(_ event: DeliveryEvent) -> String {
        list("status", sourceStatuses(event))
    }

    /// The deliveries an event applies to, among rows looked up by id: the statuses bound, not
    /// written. Written, they let PostgreSQL prove that the partial index on claimable statuses
    /// (`deliveries_due`, by due time and then id) may serve the lookup; believing it small (it
    /// is nearly empty between fan-outs, when statistics are taken), it then read all of it for
    /// each batch or answer: 100,000 entries while a fan-out was in flight, 46 ms to record 100
    /// pushes sent and 6.5 ms for one answer, instead of 2 ms and 0.08 ms by primary key. Bound,
    /// only the primary key can find them.
    static func statusCondition(amongIDs event: DeliveryEvent, column: String = "status") -> (text: String, arguments: [SQLArgument]) {
        let statuses = sourceStatuses(event)
        return ("\(column) IN (\(SQLStatement.marks(statuses.count)))", statuses.map { .text($0) })
    }

    /// The statuses an event moves deliveries from.
    static func sourceStatuses(_ event: DeliveryEvent) -> [String] { event.sources.map(\.rawValue) }

    /// The deliveries that count against a key's priority-10 budget.
    static let budgetCondition = list("status", DeliveryStatus.allCases.filter(\.countsTowardBudget).map(\.rawValue))

    /// The condition of the index of claimable pushes (`deliveries_due`), word for word.
    static let claimableCondition = statusCondition(.claim)

    private static func where_(_ selection: DeliverySelection, event: DeliveryEvent) -> (String, [SQLArgument]) {
        let (statuses, statusArguments) = selection.ids == nil ? (statusCondition(event), []) : statusCondition(amongIDs: event)
        var conditions = [statuses]
        // Pushes being sent, of no key, are held by no index of their own, only by that of
        // claimable pushes, which SQLite reads when a statement names its condition: without it,
        // a restart's release of every claim read the whole history (1.5 s at each start with 10
        // million pushes). A key's are found by the key's indexes.
        if selection.ids == nil, event.sources.contains(.sending), statuses != claimableCondition,
            Set(event.sources).isSubset(of: DeliveryEvent.claim.sources), selection.bundleID == nil, selection.key == nil,
            selection.deviceID == nil, selection.token == nil, selection.channelID == nil
        {
            conditions.insert(claimableCondition, at: 0)
        }
        var arguments = statusArguments
        for (column, value) in [
            ("bundle_id", selection.bundleID), ("key", selection.key), ("device_id", selection.deviceID), ("token", selection.token),
            ("channel_id", selection.channelID),
        ] {
            guard let value else { continue }
            conditions.append("\(column) = ?")
            arguments.append(.text(value))
        }
        if let ids = selection.ids {
            conditions.append("id IN (\(SQLStatement.marks(ids.count)))")
            arguments += ids.map { .integer($0) }
        }
        if let dueBy = selection.dueBy {
            conditions.append("next_attempt_at <= ?")
            arguments.append(.seconds(dueBy))
        }
        if let targets = selection.targets { conditions.append(list("target", targets.map(\.rawValue))) }
        if let events = selection.events { conditions.append(list("event", events)) }
        if selection.onlyStartsThatArrived {
            conditions.append(
                """
                (EXISTS (SELECT 1 FROM activity_tokens t
                    WHERE t.bundle_id = deliveries.bundle_id AND t.key = deliveries.key AND t.device_id = deliveries.device_id)
                OR EXISTS (SELECT 1 FROM channel_listeners l
                    WHERE l.bundle_id = deliveries.bundle_id AND l.key = deliveries.key AND l.device_id = deliveries.device_id))
                """)
        }
        return (conditions.joined(separator: " AND "), arguments)
    }

    /// A condition on a column's value among fixed words of ours (never a caller's text). One
    /// word gives `=`, not `IN`: the partial indexes on queued rows are chosen only when the
    /// query's terms imply their condition.
    private static func list(_ column: String, _ values: [String]) -> String {
        let quoted = values.map { "'\($0)'" }
        return quoted.count == 1 ? "\(column) = \(quoted[0])" : "\(column) IN (\(quoted.joined(separator: ", ")))"
    }
}

extension DeliveryTarget {
    /// `target`, `device_id`, `token`, `channel_id`: the columns `init(kind:deviceID:token:channelID:)` reads.
    var columns: (String, String?, String?, String?) {
        switch self {
        case .pushToStartToken(let deviceID, let token), .activityToken(let deviceID, let token), .surface(_, let deviceID, let token):
            (kind.rawValue, deviceID, token, nil)
        case .channel(let id): (kind.rawValue, nil, nil, id)
        }
    }

    /// The target as the stores' `target`, `device_id`, `token` and `channel_id` columns hold it.
    init(kind: DeliveryTargetKind, deviceID: String?, token: String?, channelID: String?) {
        switch kind {
        case .channel: self = .channel(channelID ?? "")
        case .pushToStart: self = .pushToStartToken(deviceID: deviceID ?? "", token: token ?? "")
        case .activity: self = .activityToken(deviceID: deviceID ?? "", token: token ?? "")
        case .widgets: self = .surface(.widgets, deviceID: deviceID ?? "", token: token ?? "")
        case .controls: self = .surface(.controls, deviceID: deviceID ?? "", token: token ?? "")
        }
    }
}
