import Foundation
import SimulatedDevices

/// The simulated devices a page draws, and the templates that fill their regions: the dashboard
/// of `serve` with its built-in emulator, and `liverelay emulator`'s control port, draw the same.
public struct DeviceGallery: Sendable {
    public let fleet: DeviceFleet
    public let templates: ActivityTemplates
    /// A page draws at most this many devices; `?device=` draws one of any number.
    public static let pageLimit = 24

    public init(fleet: DeviceFleet, templates: ActivityTemplates = .init()) {
        (self.fleet, self.templates) = (fleet, templates)
    }

    /// The devices part of a page, and a token of what it shows (for `LivePage.events`).
    public func draw(only deviceID: String?, controls: PersonControls?) -> (html: HTML, shows: String) {
        let (devices, total) = fleet.drawn(limit: Self.pageLimit, only: deviceID)
        let note: HTML =
            if total == 0 {
                deviceID == nil ? "<p class=\"empty\">No simulated devices.</p>" : "<p class=\"empty\">No device \(deviceID ?? "").</p>"
            } else if total > devices.count {
                "<p class=\"muted\">The first \(devices.count) of \(total) devices, by id; add <code>?device=&lt;id&gt;</code> to draw another.</p>"
            } else { .empty }
        let drawn = devices.html { DeviceDrawing.device($0, templates: templates, controls: controls) }
        return ("\(note)\(drawn)", Self.token(devices))
    }

    /// What the devices part shows now, as a short token: equal when the page would be the same.
    public func shows(only deviceID: String?) -> String {
        Self.token(fleet.drawn(limit: Self.pageLimit, only: deviceID).devices)
    }

    private static func token(_ devices: [DrawnDevice]) -> String {
        var hasher = Hasher()
        hasher.combine(devices)
        return String(UInt(bitPattern: hasher.finalize()), radix: 36)
    }

    /// Carries out a drawn device's button: the device it names, and what the person did.
    public func perform(_ form: FormFields) throws -> String {
        let (deviceID, action) = try form.personAction()
        try fleet.perform(action, on: deviceID)
        return deviceID
    }
}
