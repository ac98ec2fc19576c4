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

/// Prints where everything is once both listeners are up, and installs the demo app then.
actor Announcement {
    let host: String
    let directory: DataDirectory
    let database: StoreLocation
    /// The secrets of keys made on this start: shown now and never again.
    let madeKeys: [APIKeyScope: String]
    /// The apps served, the first one's the initial client key.
    let apps: [String]
    /// Each served app as stored: where its devices' reports need a grant.
    let grants: [AppRecord]
    let emulator: APNsEmulator?
    let demoClientKey: String?
    private var apiPort: Int?
    private var controlPort: Int?

    init(
        host: String, directory: DataDirectory, database: StoreLocation, madeKeys: [APIKeyScope: String], apps: [String],
        emulator: APNsEmulator?, demoClientKey: String?, grants: [AppRecord]
    ) {
        (self.host, self.directory, self.database, self.madeKeys, self.apps, self.emulator, self.demoClientKey, self.grants) =
            (host, directory, database, madeKeys, apps, emulator, demoClientKey, grants)
    }

    /// Which of an app's reports need the backend's grant (`AppRecord.ungrantedReports`).
    static func grantMode(_ app: AppRecord) -> String {
        let open = PushEnvironment.allCases.filter(app.ungrantedReports.contains).map(\.rawValue)
        let granted = PushEnvironment.allCases.filter { !app.ungrantedReports.contains($0) }.map(\.rawValue)
        let needs =
            granted.isEmpty
            ? "no report needs a grant (development only)"
            : "\(granted.joined(separator: " and ")) reports need the key's start or a grant (POST /v1/grants)"
        return "\(app.bundleID): " + (open.isEmpty ? needs : "\(open.joined(separator: " and ")) reports need no grant; \(needs)")
    }

    func apiRunning(port: Int) {
        apiPort = port
        printIfReady()
    }
    func controlRunning(port: Int) {
        controlPort = port
        printIfReady()
    }

    private func printIfReady() {
        guard let apiPort, emulator == nil || controlPort != nil else { return }
        Task { await announce(apiPort: apiPort) }
    }

    /// How long the announcement waits for the demo app's push-to-start token to reach the server:
    /// a tour pasted at once then finds the iPhone (the app reports within milliseconds).
    static let demoReportWait = Duration.seconds(10)

    private func announce(apiPort: Int) async {
        let api = "http://\(host):\(apiPort)"
        let keys =
            madeKeys.isEmpty
            ? "made on the first start and kept in \(directory.initialKeys); `liverelay keys create` makes more"
            : "admin \(madeKeys[.admin] ?? "-")  server \(madeKeys[.server] ?? "-")  client \(madeKeys[.client] ?? "-")  (shown once; kept in \(directory.initialKeys))"
        var text = """
            LiveRelay server:   \(api)  (OpenAPI document: \(api)/openapi.json)
            dashboard:          \(api)/dashboard  (sign in with the admin key)
            data:               \(database)
            API keys:           \(keys)
            reports:            \(grants.map(Self.grantMode).joined(separator: "\n                    "))

            """
        if let emulator, let controlPort, let client = demoClientKey {
            // The control API asks for no key: it listens on the emulator's loopback host, whatever --http-host says.
            let control = "http://\(emulator.configuration.host):\(controlPort)"
            do {
                try DemoApple.installApp(on: emulator, reportingTo: api, clientKey: client)
                let reported =
                    await Self.demoAppReported(to: emulator)
                    ? "its push-to-start token is reported to the server"
                    : "its push-to-start token has not reached the server yet: a start may find no device"
                text += """
                    APNs:               built-in emulator (sandbox and production); control API \(control)
                    demo device:        \(DemoApple.deviceID), app \(DemoApple.bundleID.value) (a development build: sandbox tokens), attributes type \(DemoApple.attributesType.name); \(reported)
                    watch it:           \(api)/dashboard/devices (drawn), or curl -s \(control)/devices/\(DemoApple.deviceID)/presentation

                    """
            } catch {
                text += "demo device:        could not be installed: \(error)\n"
            }
        } else {
            text += "apps:               \(apps.joined(separator: ", ")) (the server and client keys are \(apps[0])'s)\n"
        }
        // The names the README's tours use, ready to paste; the secrets only when made now (later,
        // read from the keys file).
        var names = ["API=\(api)"]
        if let emulator, let controlPort { names.append("E=http://\(emulator.configuration.host):\(controlPort)") }
        let kept = directory.keptInitialKeys()
        var missing: [String] = []
        for (name, scope) in [("S", APIKeyScope.server), ("C", .client), ("A", .admin)] {
            if madeKeys[scope] != nil || kept[scope] != nil {
                names.append("\(name)=" + (madeKeys[scope] ?? "$(jq -r .\(scope.rawValue) \(directory.initialKeys))"))
            } else {
                missing.append(scope.rawValue)
            }
        }
        if !missing.isEmpty {
            // A restored database: its keys are the old server's; the data directory keeps none of them.
            text += """
                keys not kept here: \(missing.joined(separator: ", ")) (a restored database keeps the keys of the server it came from; \
                `liverelay keys create --scope \(missing[0])` makes one)

                """
        }
        // A key of its own on each start (from the time: no two starts share a second), since a
        // key, once started, cannot be started again.
        let key = "order-\(Int(Date().timeIntervalSince1970) % 100_000)"
        text += """
            shell:              export \(names.joined(separator: " "))
            try:
              curl -s -X POST $API/v1/activities/\(key)/start -H "Authorization: Bearer $S" -H 'content-type: application/json' \\
                -d '{"attributesType": "DeliveryAttributes", "attributes": {"activityKey": "\(key)", "orderNumber": "\(key.dropFirst(6))"},
                     "contentState": {"status": "preparing", "etaMinutes": 30}, "alert": {"title": "Order \(key.dropFirst(6))", "body": "Preparing your order"},
                     "audience": {"everyone": true}}'

            """
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Whether the demo app's push-to-start token reached the server within `demoReportWait`.
    private static func demoAppReported(to emulator: APNsEmulator) async -> Bool {
        let deadline = ContinuousClock.now + demoReportWait
        while ContinuousClock.now < deadline {
            let reported = emulator.reporter.reports.contains { report in
                report.deviceID == DemoApple.deviceID && report.path == "/v1/push-to-start-tokens" && (200..<300).contains(report.status ?? 0)
            }
            if reported { return true }
            do { try await Task.sleep(for: .milliseconds(20)) } catch { return false }
        }
        return false
    }
}
