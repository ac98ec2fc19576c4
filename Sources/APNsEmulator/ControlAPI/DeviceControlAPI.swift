import Foundation
import HTTPTypes
import Hummingbird
import JSONAPI
import LiveActivityKit
import NIOCore
import SimulatedDevices
import WebPages

/// The simulated iPhones in the control API: create devices and apps, act as the app and as the
/// person, read state, presentations, the log and events, move the clock.
///
///     POST  /devices                                       {id, model?, pairedWatch?, iOS?}
///     GET   /devices, /devices/{id}
///     PATCH /devices/{id}                                  {online?, locked?, landscape?, carPlay?, pairedMac?}  the person
///     POST  /devices/{id}/os-update                        {to?}                                 the person
///     GET   /devices/{id}/presentation, /devices/{id}/log?limit=
///     POST  /devices/{id}/apps                             {bundleID, attributeTypes, supportsLiveActivities?, …, environment?, reportTo?}
///     PATCH /devices/{id}/apps/{bundleID}                  {liveActivitiesEnabled?, frequentUpdatesEnabled?, inForeground?, reportTo?}
///     POST  /devices/{id}/apps/{bundleID}/push-to-start-tokens/{type}/rotate
///     POST  /devices/{id}/apps/{bundleID}/widgets          {kind, family}      the person (iOS 26)
///     DELETE /devices/{id}/apps/{bundleID}/widgets/{kind}/{family}
///     POST  /devices/{id}/apps/{bundleID}/widgets/rotate-token
///     POST  /devices/{id}/apps/{bundleID}/controls         {kind};  DELETE …/controls/{kind}
///     PUT   /devices/{id}/apps/{bundleID}/shared-data/{kind}   {value}: what the app writes for its extension (null removes)
///     POST  /devices/{id}/apps/{bundleID}/activities       {attributesType, attributes, contentState, …}   the app
///     POST  /devices/{id}/activities/{activityID}/update   {contentState, staleDate?, relevanceScore?, alert?, timestamp?}
///     POST  /devices/{id}/activities/{activityID}/end      {contentState?, dismissalPolicy?, dismissalDate?, timestamp?}
///     POST  /devices/{id}/activities/{activityID}/rotate-token
///     POST  /devices/{id}/activities/{activityID}/dismiss                                         the person
///     GET   /events?after=&limit=&wait=&device=&bundleID=&activityID=   (long poll)
///     GET   /events/stream?after=&limit=&device=&bundleID=&activityID=  (server-sent events)
///     GET   /clock;  POST /clock/advance {seconds}
extension EmulatorControlAPI {
    /// The routes of the simulated iPhones, a method per resource.
    func addDeviceRoutes(to router: Router<ControlRequestContext>) {
        addDevicesRoutes(to: router)
        addAppRoutes(to: router)
        addSurfaceRoutes(to: router)
        addActivityRoutes(to: router)
        addEventRoutes(to: router)
        addClockRoutes(to: router)
    }

    /// `/devices`: the iPhones, and what the person does to one.
    private func addDevicesRoutes(to router: Router<ControlRequestContext>) {
        let fleet = emulator.devices
        router.post("/devices") { request, context in
            let body = try await request.decodeJSON(NewDeviceBody.self, context: context)
            let id = body.id
            do throws(DeviceFleet.FleetError) {
                try fleet.addDevice(id: id, model: body.model, hasPairedWatch: body.pairedWatch, systemVersion: body.systemVersion)
            } catch {
                throw APIError(.conflict, code: "exists", message: error.description, field: "id")
            }
            return EditedResponse(status: .created, response: try deviceView(id))
        }
        router.get("/devices") { _, _ in
            JSONResponse(.object([("devices", .array(try fleet.deviceIDs.map { try deviceView($0).json }))]))
        }
        router.get("/devices/{id}") { _, context in try deviceView(try deviceID(context)) }
        router.patch("/devices/{id}") { request, context in
            let id = try deviceID(context)
            let body = try await request.decodeJSON(DeviceStateBody.self, context: context)
            if let locked = body.locked { try fleet.perform(locked ? .lock : .unlock, on: id) }
            if let online = body.online { try fleet.perform(online ? .goOnline : .goOffline, on: id) }
            if let landscape = body.landscape { try fleet.perform(.setLandscape(landscape), on: id) }
            if let carPlay = body.carPlay { try fleet.perform(.setCarPlay(carPlay), on: id) }
            if let paired = body.pairedMac { try fleet.perform(.setPairedMac(paired), on: id) }
            return try deviceView(id)
        }
        // An iOS update that silently kills the apps' push-to-start tokens (spec §14.2).
        router.post("/devices/{id}/os-update") { request, context in
            let id = try deviceID(context)
            let body = try await request.decodeJSONIfPresent(OSUpdateBody.self, context: context)
            if let version = body?.to, version <= (try fleet.device(id).systemVersion) {
                throw APIError(
                    .conflict, code: "not_newer", message: "iOS \(version) is not newer than the device's iOS \(try fleet.device(id).systemVersion)",
                    field: "to")
            }
            try fleet.perform(.updateOS(to: body?.to), on: id)
            return try deviceView(id)
        }
        router.get("/devices/{id}/presentation") { _, context in
            JSONResponse(PresentationJSON.json(try fleet.presentation(of: try deviceID(context))))
        }
        router.get("/devices/{id}/log") { request, context in
            let limit = try nonNegative(request.uri.queryParameters, "limit") ?? 200
            let log = try fleet.device(try deviceID(context)).log.suffix(limit)
            return JSONResponse(.object([("log", .array(log.map(PresentationJSON.json)))]))
        }
    }

    /// `/devices/{id}/apps`: installing an app, its settings, its push-to-start tokens.
    private func addAppRoutes(to router: Router<ControlRequestContext>) {
        let fleet = emulator.devices
        router.post("/devices/{id}/apps") { request, context in
            let id = try deviceID(context)
            let body = try await request.jsonObject(
                fields: [
                    "bundleID", "attributeTypes", "supportsLiveActivities", "supportsFrequentUpdates", "liveActivitiesEnabled",
                    "frequentUpdatesEnabled", "inForeground", "environment", "reportTo", "appVersion",
                ], context: context)
            let bundleID = try body.requireString("bundleID")
            do throws(LiveActivityValidationError) { _ = try BundleID(bundleID) } catch { throw APIError.invalid(error, field: "bundleID") }
            guard let types = try body.require("attributeTypes").arrayElements else {
                throw APIError(.badRequest, code: "wrong_type", message: "must be an array of attribute types", field: "attributeTypes")
            }
            var attributeTypes: [ActivityAttributesType] = []
            for (index, type) in types.enumerated() {
                do throws(LiveActivityValidationError) {
                    attributeTypes.append(ActivityAttributesType(try ActivityContract(json: type, path: "attributeTypes[\(index)]")))
                } catch {
                    throw APIError.invalid(error)
                }
            }
            let reportTo = try reporting(body)
            let environment = try body.string("environment").map { name in
                guard let environment = PushEnvironment(rawValue: name) else {
                    throw APIError.invalid(
                        "environment", "must be sandbox (a development build) or production (TestFlight, App Store), got \"\(name)\"")
                }
                return environment
            }
            let app = SimulatedApp(
                bundleID: bundleID, supportsLiveActivities: try body.bool("supportsLiveActivities") ?? true,
                supportsFrequentUpdates: try body.bool("supportsFrequentUpdates") ?? false,
                liveActivitiesEnabled: try body.bool("liveActivitiesEnabled") ?? true,
                frequentUpdatesEnabled: try body.bool("frequentUpdatesEnabled") ?? true,
                attributeTypes: attributeTypes, isInForeground: try body.bool("inForeground") ?? true, environment: environment ?? .sandbox,
                version: try appVersion(body) ?? SimulatedApp.firstVersion)
            // The reporting target first, so that the push-to-start tokens issued now are reported.
            if let reportTo { try emulator.reporter.setTarget(reportTo, deviceID: id, bundleID: bundleID) }
            try fleet.install(app, on: id)
            return EditedResponse(status: .created, response: try appView(id, bundleID))
        }
        router.patch("/devices/{id}/apps/{bundleID}") { request, context in
            let (id, bundleID) = try appPath(context)
            let body = try await request.jsonObject(
                fields: ["liveActivitiesEnabled", "frequentUpdatesEnabled", "inForeground", "reportTo"], context: context)
            let enabled = try body.bool("liveActivitiesEnabled")
            let frequent = try body.bool("frequentUpdatesEnabled")
            let foreground = try body.bool("inForeground")
            if body.members.contains(where: { $0.key == "reportTo" }) {  // null stops the reports
                try emulator.reporter.setTarget(try reporting(body), deviceID: id, bundleID: bundleID)
            }
            try fleet.withDevice(id) { device, now in
                if let foreground { device.setForeground(bundleID, foreground) }
                return ((), device.setSettings(of: bundleID, liveActivitiesEnabled: enabled, frequentUpdatesEnabled: frequent, at: now))
            }
            return try appView(id, bundleID)
        }
        router.post("/devices/{id}/apps/{bundleID}/push-to-start-tokens/{type}/rotate") { _, context in
            let (id, bundleID) = try appPath(context)
            let type = try context.parameters.require("type")
            guard try fleet.device(id).apps[bundleID]?.pushToStartTokens[type] != nil else {
                throw APIError.notFound("type", "the app has no push-to-start token for \(type)")
            }
            try fleet.withDevice(id) { device, now in ((), device.rotatePushToStartToken(bundleID: bundleID, attributesType: type, at: now)) }
            return try appView(id, bundleID)
        }
    }

    /// An app's widgets and controls (iOS 26): the person places and removes them, WidgetKit
    /// rotates the widget token, the app writes the data its extension reads.
    private func addSurfaceRoutes(to router: Router<ControlRequestContext>) {
        router.post("/devices/{id}/apps/{bundleID}/widgets") { request, context in
            let body = try await request.jsonObject(fields: ["kind", "family"], context: context)
            let (kind, family) = (try body.requireString("kind"), try body.requireString("family"))
            let bundleID = try appPath(context).1
            return try changeSurfaces(context, status: .created) { device, now throws(SurfaceError) in
                try device.placeWidget(bundleID: bundleID, kind: kind, family: family, at: now)
            }
        }
        router.delete("/devices/{id}/apps/{bundleID}/widgets/{kind}/{family}") { _, context in
            let (bundleID, kind, family) = (try appPath(context).1, try context.parameters.require("kind"), try context.parameters.require("family"))
            return try changeSurfaces(context) { device, now throws(SurfaceError) in
                try device.removeWidget(bundleID: bundleID, kind: kind, family: family, at: now)
            }
        }
        router.post("/devices/{id}/apps/{bundleID}/widgets/rotate-token") { _, context in
            let bundleID = try appPath(context).1
            return try changeSurfaces(context) { device, now throws(SurfaceError) in try device.rotateWidgetToken(bundleID: bundleID, at: now) }
        }
        router.post("/devices/{id}/apps/{bundleID}/controls") { request, context in
            let kind = try await request.jsonObject(fields: ["kind"], context: context).requireString("kind")
            let bundleID = try appPath(context).1
            return try changeSurfaces(context, status: .created) { device, now throws(SurfaceError) in
                try device.addControl(bundleID: bundleID, kind: kind, at: now)
            }
        }
        router.delete("/devices/{id}/apps/{bundleID}/controls/{kind}") { _, context in
            let (bundleID, kind) = (try appPath(context).1, try context.parameters.require("kind"))
            return try changeSurfaces(context) { device, now throws(SurfaceError) in try device.removeControl(bundleID: bundleID, kind: kind, at: now)
            }
        }
        router.put("/devices/{id}/apps/{bundleID}/shared-data/{kind}") { request, context in
            let value = try await request.jsonObject(fields: ["value"], context: context).require("value")
            let (bundleID, kind) = (try appPath(context).1, try context.parameters.require("kind"))
            return try changeSurfaces(context) { device, _ throws(SurfaceError) in
                try device.setSharedData(bundleID: bundleID, kind: kind, value: value == .null ? nil : value)
                return []
            }
        }
    }

    /// Carries out a widget or control operation on the app's device; WidgetKit's refusal is `422`.
    private func changeSurfaces(
        _ context: ControlRequestContext, status: HTTPResponse.Status = .ok,
        _ body: (inout SimulatedDevice, Date) throws(SurfaceError) -> [DeviceEvent]
    ) throws -> EditedResponse<JSONResponse> {
        let (id, bundleID) = try appPath(context)
        try emulator.devices.withDevice(id) { device, now in
            do throws(SurfaceError) {
                return ((), try body(&device, now))
            } catch {
                throw APIError(.unprocessableContent, code: "refused", message: error.description)
            }
        }
        return EditedResponse(status: status, response: try appView(id, bundleID))
    }

    /// An app's activities: the app requests, updates and ends them; the person dismisses them.
    private func addActivityRoutes(to router: Router<ControlRequestContext>) {
        let fleet = emulator.devices
        router.post("/devices/{id}/apps/{bundleID}/activities") { request, context in
            let (id, bundleID) = try appPath(context)
            let body = try await request.jsonObject(
                fields: [
                    "attributesType", "attributes", "contentState", "staleDate", "relevanceScore", "pushType", "channelID", "style", "alert", "start",
                ], context: context)
            let type = try body.requireString("attributesType")
            let attributes = try body.require("attributes")
            let content = try contentState(body, required: true)!
            let pushType: ActivityPushType
            switch try body.string("pushType") ?? "none" {
            case "none": pushType = .none
            case "token": pushType = .token
            case "channel": pushType = .channel(try body.requireString("channelID"))
            case let other: throw APIError.invalid("pushType", "must be none, token or channel, got \"\(other)\"")
            }
            let style =
                try body.string("style").map { (name: String) throws -> ActivityStyle in
                    guard let style = ActivityStyle(rawValue: name) else {
                        throw APIError.invalid("style", "must be standard or transient, got \"\(name)\"")
                    }
                    return style
                } ?? .standard
            let start = try body.date("start")
            let alertBody = try body.object("alert", fields: ["title", "body", "sound"])
            let activityID = try fleet.withDevice(id) { device, now in
                guard device.apps[bundleID] != nil else { throw APIError.notFound("bundleID", "\(bundleID) is not installed on \(id)") }
                let alert = try alertBody.map { alert throws in try shownAlert(alert, at: start ?? now) }
                do {
                    return try device.request(
                        bundleID: bundleID, attributesType: type, attributes: attributes, content: content, pushType: pushType, style: style,
                        alert: alert, start: start, at: now)
                } catch let error as ActivityAuthorizationError {
                    throw APIError(.unprocessableContent, code: error.code, message: error.message)
                }
            }
            return EditedResponse(status: .created, response: try activityView(id, activityID))
        }
        router.post("/devices/{id}/activities/{activityID}/update") { request, context in
            let (id, activityID) = try activityPath(context)
            let body = try await request.jsonObject(fields: ["contentState", "staleDate", "relevanceScore", "alert", "timestamp"], context: context)
            let content = try contentState(body, required: true)!
            let alertBody = try body.object("alert", fields: ["title", "body", "sound"])
            let timestamp = try body.date("timestamp")
            try fleet.withDevice(id) { device, now in
                let alert = try alertBody.map { alert throws in try shownAlert(alert, at: now) }
                return ((), device.update(activityID: activityID, content: content, alert: alert, timestamp: timestamp, at: now))
            }
            return try activityView(id, activityID)
        }
        router.post("/devices/{id}/activities/{activityID}/end") { request, context in
            let (id, activityID) = try activityPath(context)
            let body = try await request.jsonObject(
                fields: ["contentState", "staleDate", "relevanceScore", "dismissalPolicy", "dismissalDate", "timestamp"], context: context)
            let content = try contentState(body, required: false)
            let policy: ActivityUIDismissalPolicy
            switch try body.string("dismissalPolicy") ?? (body.value("dismissalDate") == nil ? "default" : "after") {
            case "default": policy = .default
            case "immediate": policy = .immediate
            case "after":
                guard let date = try body.date("dismissalDate") else {
                    throw APIError(.badRequest, code: "missing", message: "is required with dismissalPolicy \"after\"", field: "dismissalDate")
                }
                policy = .after(date)
            case let other: throw APIError.invalid("dismissalPolicy", "must be default, immediate or after, got \"\(other)\"")
            }
            let timestamp = try body.date("timestamp")
            try fleet.withDevice(id) { device, now in
                ((), device.end(activityID: activityID, content: content, dismissalPolicy: policy, timestamp: timestamp, at: now))
            }
            return try activityView(id, activityID)
        }
        router.post("/devices/{id}/activities/{activityID}/rotate-token") { _, context in
            let (id, activityID) = try activityPath(context)
            try fleet.withDevice(id) { device, now in ((), device.rotateUpdateToken(activityID: activityID, at: now)) }
            return try activityView(id, activityID)
        }
        router.post("/devices/{id}/activities/{activityID}/dismiss") { _, context in
            let (id, activityID) = try activityPath(context)
            let view = try activityView(id, activityID)
            try fleet.perform(.dismiss(activityID: activityID), on: id)
            return (try? activityView(id, activityID)) ?? view.dismissed
        }
    }

    /// `/events`: the fleet's event log, long-polled or streamed.
    private func addEventRoutes(to router: Router<ControlRequestContext>) {
        let fleet = emulator.devices
        router.get("/events") { request, _ in
            let query = request.uri.queryParameters
            let after = try nonNegative(query, "after") ?? 0
            let limit = try nonNegative(query, "limit") ?? 1000
            let wait = try nonNegative(query, "wait") ?? 0
            let matches = try eventFilter(query)
            let events = await fleet.events.wait(after: after, limit: limit, timeout: .seconds(min(wait, 60)), where: matches)
            return JSONResponse(
                .object([
                    ("events", .array(events.map(PresentationJSON.json))),
                    ("last", .integer(events.last?.sequence ?? max(after, 0))),
                ]))
        }
        router.get("/events/stream") { request, _ in
            let query = request.uri.queryParameters
            let after = try request.headers[.lastEventID].flatMap { Int($0) } ?? nonNegative(query, "after")
            let limit = try nonNegative(query, "limit")
            let matches = try eventFilter(query)
            let stream = fleet.events.subscribe(after: after)
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
                body: ResponseBody { writer in
                    var sent = 0
                    for await event in stream where matches(event) {
                        let data = PresentationJSON.json(event).serializedString
                        try await writer.write(
                            ByteBuffer(string: "id: \(event.sequence)\nevent: \(PresentationJSON.eventType(event.event))\ndata: \(data)\n\n"))
                        sent += 1
                        if let limit, sent >= limit { break }
                    }
                    try await writer.finish(nil)
                })
        }
    }

    /// `/clock`: the devices' time.
    private func addClockRoutes(to router: Router<ControlRequestContext>) {
        let fleet = emulator.devices
        router.get("/clock") { _, _ in ClockView(now: fleet.clock.now) }
        router.post("/clock/advance") { request, context in
            let seconds = try await request.decodeJSON(ClockAdvanceBody.self, context: context).seconds
            fleet.clock.advance(by: seconds)
            fleet.advanceAll()
            return ClockView(now: fleet.clock.now)
        }
    }

    // MARK: Reading requests

    private func deviceID(_ context: ControlRequestContext) throws -> String {
        let id = try context.parameters.require("id")
        guard emulator.devices.contains(id) else { throw APIError.notFound("id", "no device with id \(id)") }
        return id
    }

    private func appPath(_ context: ControlRequestContext) throws -> (String, String) {
        let id = try deviceID(context)
        let bundleID = try context.parameters.require("bundleID")
        guard try emulator.devices.device(id).apps[bundleID] != nil else {
            throw APIError.notFound("bundleID", "\(bundleID) is not installed on \(id)")
        }
        return (id, bundleID)
    }

    private func activityPath(_ context: ControlRequestContext) throws -> (String, String) {
        let id = try deviceID(context)
        let activityID = try context.parameters.require("activityID")
        guard try emulator.devices.device(id).activity(activityID) != nil else {
            throw APIError.notFound("activityID", "\(id) has no activity \(activityID) (dismissed activities are forgotten)")
        }
        return (id, activityID)
    }

    private func nonNegative(_ query: Parameters, _ name: String) throws -> Int? {
        guard let text = query[Substring(name)] else { return nil }
        guard let number = Int(text), number >= 0 else { throw APIError.invalid(name, "must be a whole number ≥ 0, got \"\(text)\"") }
        return number
    }

    private func eventFilter(_ query: Parameters) throws -> @Sendable (FleetEvent) -> Bool {
        let device = query["device"].map(String.init)
        let bundleID = query["bundleID"].map(String.init)
        let activityID = query["activityID"].map(String.init)
        return { event in
            (device == nil || event.deviceID == device) && (bundleID == nil || event.bundleID == bundleID)
                && (activityID == nil || event.activityID == activityID)
        }
    }

    private func contentState(_ body: JSONBodyReader, required: Bool) throws -> ActivityContentState? {
        guard let state = required ? try body.require("contentState") : body.value("contentState") else { return nil }
        return ActivityContentState(state: state, staleDate: try body.date("staleDate"), relevanceScore: try body.number("relevanceScore") ?? 0)
    }

    /// `{"title", "body"?, "sound"?}`.
    private func shownAlert(_ alert: JSONBodyReader, at date: Date) throws -> ShownAlert {
        ShownAlert(title: try alert.requireString("title"), body: try alert.string("body") ?? "", sound: try alert.string("sound"), at: date)
    }

    /// The build installed (`"2.0 (7)"`), as the app's bundle says it.
    private func appVersion(_ body: JSONBodyReader) throws -> String? {
        guard let version = try body.string("appVersion") else { return nil }
        guard !version.isEmpty, version.unicodeScalars.count <= 64, !version.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
            throw APIError.invalid("appVersion", "must be 1 to 64 characters without control characters, such as \"2.0 (7)\"")
        }
        return version
    }

    private func reporting(_ body: JSONBodyReader) throws -> AppReporting? {
        guard let target = try body.object("reportTo", fields: ["url", "clientKey", "activityKeyAttribute"]) else { return nil }
        let url = try target.requireString("url")
        guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
            throw APIError.invalid("reportTo.url", "must be an http(s) URL such as http://127.0.0.1:8080, got \"\(url)\"")
        }
        return AppReporting(
            url: url, clientKey: try target.string("clientKey"), activityKeyAttribute: try target.string("activityKeyAttribute") ?? "activityKey")
    }

    // MARK: Views

    private func deviceView(_ id: String) throws -> JSONResponse {
        let device = try emulator.devices.device(id)
        return JSONResponse(
            .object([
                ("id", .string(device.id)), ("model", .string(device.model.rawValue)), ("iOS", .string(device.systemVersion.description)),
                ("pairedWatch", .bool(device.hasPairedWatch)), ("pairedMac", .bool(device.surroundings.hasPairedMac)),
                ("carPlay", .bool(device.surroundings.isInCarPlay)), ("landscape", .bool(device.surroundings.isLandscape)),
                ("online", .bool(device.isOnline)), ("locked", .bool(device.isLocked)),
                ("apps", .array(device.apps.keys.sorted().map { appJSON(device, $0) })),
                ("activities", .array(device.activities.map(PresentationJSON.json))),
            ]))
    }

    private func appView(_ id: String, _ bundleID: String) throws -> JSONResponse {
        JSONResponse(appJSON(try emulator.devices.device(id), bundleID))
    }

    private func appJSON(_ device: SimulatedDevice, _ bundleID: String) -> JSONValue {
        guard let app = device.apps[bundleID] else { return .null }
        var members: JSONValue.Members = [
            ("bundleID", .string(app.bundleID)), ("supportsLiveActivities", .bool(app.supportsLiveActivities)),
            ("supportsFrequentUpdates", .bool(app.supportsFrequentUpdates)), ("liveActivitiesEnabled", .bool(app.liveActivitiesEnabled)),
            ("frequentUpdatesEnabled", .bool(app.frequentUpdatesEnabled)), ("inForeground", .bool(app.isInForeground)),
            ("environment", .string(app.environment.rawValue)), ("appVersion", .string(app.version)),
            (
                "attributeTypes",
                .array(
                    app.attributeTypes.values.sorted { $0.name < $1.name }.map { type in
                        type.contract?.json ?? .object([("name", .string(type.name))])
                    })
            ),
            ("pushToStartTokens", .object(app.pushToStartTokens.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
        ]
        if let surfaces = device.surfaces[bundleID] { members += PresentationJSON.members(surfaces) }
        if let target = emulator.reporter.target(deviceID: device.id, bundleID: bundleID) {
            members.append(("reportTo", .object([("url", .string(target.url)), ("activityKeyAttribute", .string(target.activityKeyAttribute))])))
        }
        let reports = emulator.reporter.reports.filter { $0.deviceID == device.id && $0.bundleID == bundleID }.suffix(20)
        if !reports.isEmpty {
            members.append(
                (
                    "reports",
                    .array(
                        reports.map { report in
                            .object([
                                ("path", .string(report.path)), ("status", report.status.map { .integer($0) } ?? .null),
                                ("error", report.error.map(JSONValue.string) ?? .null),
                            ])
                        })
                ))
        }
        return .object(members)
    }

    private func activityView(_ id: String, _ activityID: String) throws -> JSONResponse {
        guard let activity = try emulator.devices.device(id).activity(activityID) else {
            throw APIError.notFound("activityID", "\(id) has no activity \(activityID)")
        }
        return JSONResponse(PresentationJSON.json(activity))
    }
}

/// A response whose body is a `JSONValue` as it stands: key order kept, numbers as written.
struct JSONResponse: ResponseGenerator {
    var json: JSONValue
    init(_ json: JSONValue) { self.json = json }

    /// The activity after the person dismissed it (it is then forgotten by the device).
    var dismissed: JSONResponse {
        guard var members = json.objectMembers else { return self }
        if let index = members.firstIndex(where: { $0.key == "state" }) { members[index].value = .string(ActivityState.dismissed.rawValue) }
        return JSONResponse(.object(members.map { ($0.key, $0.value) }))
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: json.serialized)))
    }
}

struct ClockView: ResponseEncodable { var now: Date }
