import Foundation
import SimulatedDevices

/// The simulated devices a page draws, and the templates that fill their regions: the dashboard
/// of `serve` with its built-in emulator, and `liverelay emulator`'s control port, draw the same.
package struct DeviceGallery: Sendable {
    package let fleet: DeviceFleet
    package let templates: ActivityTemplates
    /// A page draws at most this many devices; `?device=` draws one of any number.
    package static let pageLimit = 24

    package init(fleet: DeviceFleet, templates: ActivityTemplates = .init()) {
        (self.fleet, self.templates) = (fleet, templates)
    }

    /// The devices part of a page (every device, or those of `only`), and a token of what it
    /// shows (for `LivePage.events`).
    package func draw(only: [String]?, controls: PersonControls?) -> (html: HTML, shows: String) {
        let (devices, total) = fleet.drawn(limit: Self.pageLimit, only: only)
        let note: HTML =
            if total == 0 {
                only == nil
                    ? "<p class=\"empty\">No simulated devices.</p>" : "<p class=\"empty\">No device \((only ?? []).joined(separator: ", ")).</p>"
            } else if total > devices.count {
                "<p class=\"muted\">The first \(devices.count) of \(total) devices, by id; add <code>?device=&lt;id&gt;</code> to draw another.</p>"
            } else { .empty }
        let drawn = devices.html { DeviceDrawing.device($0, templates: templates, controls: controls) }
        return ("\(note)\(drawn)", Self.token(devices))
    }

    /// The phones of `only` alone, as an activity's page shows those holding it, and a token of what they show.
    package func phones(only: [String]) -> (html: HTML, shows: String) {
        let devices = fleet.drawn(limit: Self.pageLimit, only: only).devices
        return (devices.html { DeviceDrawing.phoneAlone($0, templates: templates) }, Self.token(devices))
    }

    /// What a page drawing every device, or those of `only`, shows now, as a short token: equal
    /// when the page would be the same.
    package func shows(only: [String]?) -> String {
        Self.token(fleet.drawn(limit: Self.pageLimit, only: only).devices)
    }

    private static func token(_ devices: [DrawnDevice]) -> String {
        var hasher = Hasher()
        hasher.combine(devices)
        return String(UInt(bitPattern: hasher.finalize()), radix: 36)
    }

    /// Carries out a drawn device's button: the device it names, and what the person did.
    package func perform(_ form: FormFields) throws -> String {
        let (deviceID, action) = try form.personAction()
        try fleet.perform(action, on: deviceID)
        return deviceID
    }
}
