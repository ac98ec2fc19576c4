import APNs
import APNsEmulator
import ArgumentParser
import Crypto
import Foundation
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SimulatedDevices
import UnixSignals
import WebPages

/// Apple's side for the demo: the emulator (both environments), a signing key it trusts, and one
/// iPhone whose app (a development build: sandbox) reports its tokens to the server once the
/// server's port is known.
enum DemoApple {
    static let bundleID = try! BundleID("com.example.liverelay.demo")
    static let deviceID = "demo-iphone"
    static let attributesType = ActivityAttributesType(
        name: "DeliveryAttributes",
        attributes: SwiftStruct("DeliveryAttributes", [.init("activityKey", .string), .init("orderNumber", .string)]),
        contentState: SwiftStruct("ContentState", [.init("status", .string), .init("etaMinutes", .int)]))

    static func start(
        caFile: String, stateFile: String, maximumConnections: Int
    ) async throws -> (emulator: APNsEmulator, apns: APNsRoutes, app: AppRegistration) {
        let emulator = try await APNsEmulator.start(APNsEmulator.Configuration(stateFile: stateFile))
        try emulator.certificates.writeCertificateAuthority(to: caFile)
        let key = P256.Signing.PrivateKey()
        let app = AppRegistration(bundleID: bundleID, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", signingKey: key.pemRepresentation)
        emulator.registry.register(EmulatorKey(keyID: app.keyID, teamID: app.teamID, publicKey: key.publicKey))
        let apns = APNsRoutes(
            endpoints: emulator.clientEnvironments(caFile: caFile), now: emulator.clock.function, maximumConnections: maximumConnections)
        return (emulator, apns, app)
    }

    /// What draws the demo's attributes type on the simulated iPhones, and the templates of
    /// `folder` (whose own DeliveryAttributes, if any, win).
    static func templates(adding folder: ActivityTemplates?) throws -> ActivityTemplates {
        var templates = folder ?? ActivityTemplates()
        guard !templates.attributesTypes.contains(attributesType.name) else { return templates }
        for (region, text) in demoTemplates { try templates.add(text, for: region, of: attributesType.name) }
        return templates
    }

    /// The demo delivery's regions: the order, its status and how many minutes until it arrives.
    static let demoTemplates: [(TemplateRegion, String)] = [
        (
            .lockScreen,
            """
            <div class="tpl-row"><span class="tpl-small">Order {{attributes.orderNumber}}</span><span class="app-icon">D</span></div>
            <div class="tpl-row"><span class="tpl-big">{{state.status}}</span>{{^isEnded}}<span class="tpl-big">{{state.etaMinutes}} min</span>{{/isEnded}}</div>
            <div class="tpl-small">{{#isEnded}}This order is over.{{/isEnded}}{{^isEnded}}{{#isStale}}Waiting for news of the courier{{/isStale}}{{^isStale}}Estimated arrival{{/isStale}}{{/isEnded}}</div>
            """
        ),
        (.compactLeading, "<span class=\"app-icon\">D</span>"),
        (.compactTrailing, "{{state.etaMinutes}} min"),
        (.minimal, "{{state.etaMinutes}}′"),
        (.expandedLeading, "<span class=\"app-icon\">D</span> Order {{attributes.orderNumber}}"),
        (.expandedCenter, "{{state.status}}"),
        (.expandedTrailing, "<span class=\"tpl-big\">{{state.etaMinutes}} min</span>"),
        (
            .expandedBottom,
            "<div class=\"tpl-small\">Order {{attributes.orderNumber}}: {{state.status}}, arriving in {{state.etaMinutes}} minutes</div>"
        ),
        // The small family: the Watch's Smart Stack and CarPlay.
        (
            .small,
            "<div class=\"tpl-row\"><span class=\"app-icon\">D</span><span class=\"tpl-big\">{{state.etaMinutes}} min</span></div><div class=\"tpl-small\">{{state.status}}</div>"
        ),
    ]

    /// Installs the demo app, reporting to `url` with `clientKey`: its push-to-start token goes to
    /// the server at once. On a later start the iPhone kept in the data directory has it already,
    /// with its tokens and activities: it is launched, and reports what it has.
    static func installApp(on emulator: APNsEmulator, reportingTo url: String, clientKey: String) throws {
        if !emulator.devices.contains(deviceID) { try emulator.devices.addDevice(id: deviceID) }
        try emulator.reporter.setTarget(AppReporting(url: url, clientKey: clientKey), deviceID: deviceID, bundleID: bundleID.value)
        if try emulator.devices.device(deviceID).apps[bundleID.value]?.attributeTypes[attributesType.name] != attributesType {
            try emulator.devices.install(SimulatedApp(bundleID: bundleID.value, attributeTypes: [attributesType]), on: deviceID)
        }
    }
}
