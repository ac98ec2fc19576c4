import APNsEmulator
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import SimulatedDevices
import Testing

/// The control port's page: the simulated iPhones drawn, and the person's buttons behind a form
/// token of the emulator's own.
@Suite struct DevicesPageTests {
    func page(_ client: any TestClientProtocol, _ uri: String = "/") async throws -> (status: Int, text: String, headers: HTTPFields) {
        try await client.execute(uri: uri, method: .get) { response in
            (Int(response.status.code), String(buffer: response.body), response.headers)
        }
    }

    func press(_ client: any TestClientProtocol, _ form: String) async throws -> (status: Int, location: String?, text: String) {
        try await client.execute(
            uri: "/person", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"], body: ByteBuffer(string: form)
        ) { response in (Int(response.status.code), response.headers[.location], String(buffer: response.body)) }
    }

    @Test func theControlPortDrawsEachDeviceAndItsButtonsActWithThePagesToken() async throws {
        try await withEmulatorAndClient { emulator, _ in
            try emulator.devices.addDevice(id: "iphone-1")
            try emulator.devices.addDevice(id: "iphone-2", model: .iPhone, hasPairedWatch: true)
            try await Application(router: EmulatorControlAPI(emulator: emulator).router()).test(.router) { client in
                let drawn = try await page(client)
                #expect(drawn.status == 200)
                #expect(drawn.headers[.contentType] == "text/html; charset=utf-8")
                #expect(drawn.headers[.contentSecurityPolicy]?.contains("default-src 'self'") == true)
                #expect(drawn.text.contains("id=\"device-iphone-1\" data-live") && drawn.text.contains("id=\"device-iphone-2\" data-live"))
                #expect(drawn.text.contains("data-region=\"watch\""), "iphone-2 has a Watch")
                #expect(drawn.text.contains("data-events=\"/page/events?since="))
                let one = try await page(client, "/?device=iphone-2")
                #expect(!one.text.contains("device-iphone-1") && one.text.contains("data-events=\"/page/events?device=iphone-2&amp;since="))

                let token = try #require(drawn.text.firstMatch(of: /name="form" value="([0-9a-f]+)"/)?.1)
                let forged = try await press(client, "device=iphone-1&action=unlock&form=0123")
                #expect(forged.status == 403)
                #expect(forged.text.contains("\"field\":\"form\""))
                #expect(try emulator.devices.device("iphone-1").isLocked)
                let unlocked = try await press(client, "device=iphone-1&action=unlock&form=\(token)")
                #expect(unlocked.status == 303)
                #expect(unlocked.location == "/?device=iphone-1")
                #expect(try !emulator.devices.device("iphone-1").isLocked)
                let unknown = try await press(client, "device=ipad-9&action=lock&form=\(token)")
                #expect(unknown.status == 404)
                let wrong = try await press(client, "device=iphone-1&action=advance-clock&seconds=soon&form=\(token)")
                #expect(wrong.status == 400)
                #expect(wrong.text.contains("\"field\":\"seconds\""))
            }
        }
    }
}
