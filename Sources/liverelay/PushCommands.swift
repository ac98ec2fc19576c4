import APNs
import ArgumentParser
import Foundation
import LiveActivityKit

struct Push: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Send a Live Activity push (start, update or end by token, or a broadcast to a channel), or reload an app's widgets or controls.",
        discussion: """
            JSON arguments (--content-state, --attributes, --payload) take literal JSON,
            @file, or - for stdin.
            Dates (--stale-date, --dismissal-date, --expiration, --timestamp) take
            ISO-8601, UNIX seconds, or +15m / +2h / +1d.

            \(ExitStatus.helpText)
            """,
        subcommands: [Start.self, Update.self, End.self, Broadcast.self, Widgets.self, Controls.self])
}

/// The `aps` content every event shares.
struct ContentOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The ContentState as JSON (literal, @file or -), encoded as the app's default JSONEncoder would.", valueName: "json"))
    var contentState: String?

    // A relative date may begin with a minus (-15m): the next word is the value, whatever it looks like.
    @Option(parsing: .unconditional, help: ArgumentHelp("When the activity turns stale.", valueName: "date"))
    var staleDate: String?

    @Option(
        help: ArgumentHelp(
            "Relevance among the app's activities: any number, higher first (default: not sent, 0 on the device).", valueName: "number"))
    var relevanceScore: Double?

    @Option(help: ArgumentHelp("Alert title (literal text).", valueName: "text"))
    var alertTitle: String?

    @Option(help: ArgumentHelp("Alert body (literal text).", valueName: "text"))
    var alertBody: String?

    @Option(help: ArgumentHelp("Alert title as a localisation key of the app.", valueName: "key"))
    var alertTitleLocKey: String?

    @Option(help: ArgumentHelp("An argument of --alert-title-loc-key (repeat in order).", valueName: "text"))
    var alertTitleLocArg: [String] = []

    @Option(help: ArgumentHelp("Alert body as a localisation key of the app.", valueName: "key"))
    var alertBodyLocKey: String?

    @Option(help: ArgumentHelp("An argument of --alert-body-loc-key (repeat in order).", valueName: "text"))
    var alertBodyLocArg: [String] = []

    @Option(help: ArgumentHelp("Alert sound: default, a sound file in the app bundle, or none.", valueName: "name"))
    var sound: String = "default"

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("The push's timestamp; the device ignores pushes not newer than the last it applied. Default: now.", valueName: "date"))
    var timestamp: String?

    @Option(help: ArgumentHelp("The whole payload as JSON, sent as given after validation (replaces the content options).", valueName: "json"))
    var payload: String?

    @Option(
        help: ArgumentHelp(
            "The app's contract for the attributes type (JSON file: {\"name\", \"attributes\", \"contentState\"}, as the server takes it): what its widget would not decode is refused before sending.",
            valueName: "file"))
    var contract: String?

    /// The alert from the alert options, if any was given.
    func alert() throws(InputError) -> AlertConfiguration? {
        let title = try text(literal: alertTitle, key: alertTitleLocKey, arguments: alertTitleLocArg, field: "alert-title")
        let body = try text(literal: alertBody, key: alertBodyLocKey, arguments: alertBodyLocArg, field: "alert-body")
        switch (title, body) {
        case (nil, nil):
            return nil
        case (let title?, let body?):
            return AlertConfiguration(title: title, body: body, sound: sound == "none" ? nil : sound == "default" ? .default : .named(sound))
        case (nil, _):
            throw InputError("alert-title: is required with an alert body; the device ignores an alert without a title")
        case (_, nil):
            throw InputError("alert-body: is required with an alert title")
        }
    }

    private func text(literal: String?, key: String?, arguments: [String], field: String) throws(InputError) -> AlertConfiguration.Text? {
        switch (literal, key) {
        case (let literal?, nil): return .literal(literal)
        case (nil, let key?): return .localized(key: key, arguments: arguments)
        case (nil, nil):
            guard arguments.isEmpty else { throw InputError("\(field)-loc-arg: needs --\(field)-loc-key") }
            return nil
        case (_?, _?): throw InputError("\(field): give literal text or a loc key, not both")
        }
    }

    /// The payload: `--payload` as given, or built from the options; checked against `--contract`.
    func build(event: LiveActivityPayload.Event, now: Date, extra: (inout LiveActivityPayload.Fields) throws -> Void) throws -> LiveActivityPayload {
        let built = try buildUnchecked(event: event, now: now, extra: extra)
        if let contract { try Self.check(built, against: try readContract(contract)) }
        return built
    }

    private func readContract(_ path: String) throws -> ActivityContract {
        let json = try readJSONArgument(path.hasPrefix("@") || path == "-" ? path : "@" + path, field: "contract")
        do {
            return try ActivityContract(json: json)
        } catch {
            throw InputError("contract: \(error.description)")
        }
    }

    /// What the widget would report decoding the payload, in the device's words.
    static func check(_ payload: LiveActivityPayload, against contract: ActivityContract) throws {
        let aps = payload.aps
        if let type = aps?["attributes-type"]?.stringValue, type != contract.attributesType {
            throw InputError("aps.attributes-type: is \(type), but the contract is for \(contract.attributesType)")
        }
        func refuse(_ failure: DecodingFailure, _ field: String) -> InputError {
            InputError("\(failure.path(under: field)): \(failure.reason) (the app's widget would not decode it: the iPhone drops this push)")
        }
        if let attributes = aps?["attributes"] {
            do { try contract.checkAttributes(attributes) } catch { throw refuse(error, "aps.attributes") }
        }
        if let state = aps?["content-state"] {
            do { try contract.checkContentState(state) } catch { throw refuse(error, "aps.content-state") }
        }
    }

    private func buildUnchecked(
        event: LiveActivityPayload.Event, now: Date, extra: (inout LiveActivityPayload.Fields) throws -> Void
    ) throws -> LiveActivityPayload {
        if let payload {
            let given = [contentState, staleDate, timestamp, alertTitle, alertBody, alertTitleLocKey, alertBodyLocKey].compactMap { $0 }
            guard given.isEmpty, relevanceScore == nil else {
                throw InputError("payload: replaces the content options; give one or the other")
            }
            let json = try readJSONArgument(payload, field: "payload")
            let built = LiveActivityPayload(json: json)
            if let actual = built.event, actual != event {
                throw InputError("aps.event: is \"\(actual.rawValue)\" but the command is `push \(event.rawValue)`")
            }
            return built
        }
        var fields = LiveActivityPayload.Fields(
            event: event,
            timestamp: try timestamp.map { try parseCommandLineDate($0, field: "timestamp", now: now) } ?? now)
        fields.contentState = try contentState.map { try readJSONArgument($0, field: "content-state") }
        fields.staleDate = try staleDate.map { try parseCommandLineDate($0, field: "stale-date", now: now) }
        if let relevanceScore {
            try LiveActivityPayload.checkRelevance(relevanceScore)
            fields.relevanceScore = relevanceScore
        }
        fields.alert = try alert()
        try extra(&fields)
        return LiveActivityPayload(fields)
    }
}

/// Headers of a device push, and dry-run.
struct DeviceDeliveryOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The device token, hex: an activity's update token (start: the push-to-start token; widgets and controls: the token WidgetKit gave the app).",
            valueName: "hex"))
    var token: String

    @Option(help: ArgumentHelp("10 (now, counts against the budget) or 5 (opportunistic).", valueName: "5|10"))
    var priority: Int = 10

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Until when APNs stores and retries the push, or 0 for one attempt (default: APNs' policy).", valueName: "date|0"))
    var expiration: String?

    @Option(help: ArgumentHelp("apns-collapse-id, at most 64 bytes.", valueName: "id"))
    var collapseID: String?

    @Option(help: ArgumentHelp("apns-id, a UUID (default: APNs makes one).", valueName: "uuid"))
    var apnsID: String?

    @Flag(help: "Print the exact request (provider token elided) instead of sending it.")
    var dryRun = false

    func pushOptions(now: Date) throws -> (DeviceToken, PushOptions) {
        let token = try DeviceToken(token)
        var options = PushOptions(priority: try APNsPriority(value: priority, for: .device))
        options.expiration = try expiration.map { try parseExpiration($0, now: now) }
        options.collapseID = try collapseID.map { try CollapseID($0) }
        options.apnsID = try apnsID.map { try APNsMessageID($0) }
        return (token, options)
    }
}

/// `--dismissal-date`: absent is the system default, `immediate`, or a date.
func parseDismissalPolicy(_ text: String?, now: Date) throws(InputError) -> ActivityUIDismissalPolicy {
    guard let text else { return .default }
    if text == "immediate" { return .immediate }
    return .after(try parseCommandLineDate(text, field: "dismissal-date", now: now))
}

func parseExpiration(_ text: String, now: Date) throws -> APNsExpiration {
    if text == "0" { return .immediately }
    return try APNsExpiration(unixSeconds: unixSeconds(parseCommandLineDate(text, field: "apns-expiration", now: now)))
}

/// Builds a device push from the options (`extra` adds what the event needs), then sends or prints it.
private func sendDevicePush(
    _ event: LiveActivityPayload.Event, connection: ConnectionOptions, delivery: DeviceDeliveryOptions,
    content: ContentOptions, extra: (inout LiveActivityPayload.Fields, Date) throws -> Void
) async throws {
    let now = Date()
    let request = try checked {
        let payload = try content.build(event: event, now: now) { try extra(&$0, now) }
        let (token, options) = try delivery.pushOptions(now: now)
        return try APNsRequest.liveActivity(payload, to: token, topic: connection.resolvedBundleID(), options: options)
    }
    try await perform(request, connection: connection, dryRun: delivery.dryRun)
}

extension Push {
    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a Live Activity with a push-to-start token (event: start; alert, attributes-type and attributes required).")

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var delivery: DeviceDeliveryOptions
        @OptionGroup var content: ContentOptions

        @Option(help: ArgumentHelp("The Swift name of the app's ActivityAttributes type.", valueName: "name"))
        var attributesType: String?

        @Option(help: ArgumentHelp("The ActivityAttributes (the outer struct) as JSON: literal, @file or -.", valueName: "json"))
        var attributes: String?

        @Flag(help: "Ask the system for an update token for the new activity (iOS 18: input-push-token).")
        var inputPushToken = false

        @Option(help: ArgumentHelp("Subscribe the new activity to this broadcast channel (iOS 18: input-push-channel).", valueName: "id"))
        var inputPushChannel: String?

        func run() async throws {
            try await sendDevicePush(.start, connection: connection, delivery: delivery, content: content) { fields, _ in
                if let stale = fields.staleDate, let why = LiveActivityPayload.staleOnArrival(staleDate: stale, startsAt: fields.timestamp) {
                    throw InputError("stale-date: " + why)
                }
                fields.attributesType = attributesType
                fields.attributes = try attributes.map { try readJSONArgument($0, field: "attributes") }
                if inputPushToken, inputPushChannel != nil {
                    throw InputError("input-push-channel: cannot be combined with --input-push-token; an activity has one push type")
                }
                fields.inputPush = inputPushToken ? .token : inputPushChannel.map { .channel($0) }
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Update a Live Activity through its update token (event: update).")

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var delivery: DeviceDeliveryOptions
        @OptionGroup var content: ContentOptions

        func run() async throws {
            try await sendDevicePush(.update, connection: connection, delivery: delivery, content: content) { _, _ in }
        }
    }

    struct End: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End a Live Activity through its update token (event: end), with its final content.")

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var delivery: DeviceDeliveryOptions
        @OptionGroup var content: ContentOptions

        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                "When the ended activity leaves the Lock Screen: a date (at most 4 h away is honoured) or immediate. Default: the system decides (up to 4 h).",
                valueName: "date|immediate"))
        var dismissalDate: String?

        func run() async throws {
            try await sendDevicePush(.end, connection: connection, delivery: delivery, content: content) { fields, now in
                fields.dismissalPolicy = try parseDismissalPolicy(dismissalDate, now: now)
            }
        }
    }

    struct Broadcast: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Update or end every Live Activity subscribed to a broadcast channel (iOS 18).")

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var content: ContentOptions

        @Option(help: ArgumentHelp("The channel id, as `channels create` printed it.", valueName: "id"))
        var channelID: String

        @Option(help: ArgumentHelp("update or end.", valueName: "event"))
        var event: String = "update"

        @Option(
            parsing: .unconditional,
            help: ArgumentHelp("When an ended activity leaves the Lock Screen (end only): a date or immediate.", valueName: "date|immediate"))
        var dismissalDate: String?

        @Option(help: ArgumentHelp("10, 5 or 1 (required by APNs for broadcasts).", valueName: "1|5|10"))
        var priority: Int = 10

        @Option(
            help: ArgumentHelp(
                "Until when APNs keeps the message for offline devices, or 0 (the only value a No-Message-Stored channel takes).", valueName: "date|0"
            ))
        var expiration: String = "0"

        @Option(help: ArgumentHelp("apns-request-id, a UUID (default: APNs makes one).", valueName: "uuid"))
        var requestID: String?

        @Flag(help: "Print the exact request (provider token elided) instead of sending it.")
        var dryRun = false

        func run() async throws {
            let now = Date()
            let request = try checked {
                guard let event = LiveActivityPayload.Event(rawValue: event), event != .start else {
                    throw InputError("event: must be update or end; a broadcast cannot start a Live Activity")
                }
                let payload = try content.build(event: event, now: now) { fields in
                    guard dismissalDate == nil || event == .end else {
                        throw InputError("dismissal-date: is only allowed with --event end")
                    }
                    fields.dismissalPolicy = try parseDismissalPolicy(dismissalDate, now: now)
                }
                let options = BroadcastOptions(
                    priority: try APNsPriority(value: priority, for: .broadcast),
                    expiration: try parseExpiration(expiration, now: now),
                    requestID: try requestID.map { try APNsMessageID($0, field: "apns-request-id") })
                return try APNsRequest.broadcast(payload, channelID: channelID, bundleID: connection.resolvedBundleID(), options: options)
            }
            try await perform(request, connection: connection, dryRun: dryRun)
        }
    }

    struct Widgets: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Reload an app's widgets on one device (iOS 26: apns-push-type widgets, body {\"aps\":{\"content-changed\":true}}).")

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var delivery: DeviceDeliveryOptions

        func run() async throws { try await sendReload(.widgets, connection: connection, delivery: delivery) }
    }

    struct Controls: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Reload an app's control on one device, with the control's token (apns-push-type controls).")

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var delivery: DeviceDeliveryOptions

        func run() async throws { try await sendReload(.controls, connection: connection, delivery: delivery) }
    }
}

/// A widgets or controls push from the options: its body is always Apple's one.
private func sendReload(_ type: ReloadPushType, connection: ConnectionOptions, delivery: DeviceDeliveryOptions) async throws {
    let request = try checked {
        let (token, options) = try delivery.pushOptions(now: Date())
        return try APNsRequest.reload(type, to: token, topic: connection.resolvedBundleID(), options: options)
    }
    try await perform(request, connection: connection, dryRun: delivery.dryRun)
}
