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

/// Closes the APNs clients' connections when the group shuts down.
struct APNsClientService: Service {
    let routes: APNsRoutes

    func run() async throws {
        try? await gracefulShutdown()
        await routes.shutdown()
    }
}
