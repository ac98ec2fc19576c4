import Foundation
import Hummingbird
import JSONAPI
import SimulatedDevices
import WebPages

/// The control port's page for people: every simulated device drawn as a phone, live, with the
/// person's buttons.
///
///     GET  /                  the devices page (?device= draws one)
///     POST /person            a button: {device, action, activity?, app?, enabled?, seconds?, form}
///     GET  /page/events       server-sent `changed` when what the page draws changes
///
/// The control port asks for no key (it is the emulator's, on loopback); the page's forms carry a
/// token of this process, so that another site cannot press the buttons.
extension EmulatorControlAPI {
    func addDevicesPage(to router: Router<ControlRequestContext>) {
        let gallery = DeviceGallery(fleet: emulator.devices, templates: templates)
        let formToken = self.formToken
        router.get("/assets/page.css") { _, _ in LivePage.asset(PageStyle.sheet, type: "text/css; charset=utf-8") }
        router.get("/assets/page.js") { _, _ in LivePage.asset(LivePage.script, type: "text/javascript; charset=utf-8") }
        for path in ["/assets/icon.svg", "/favicon.ico"] {
            router.get(RouterPath(path)) { _, _ in LivePage.asset(LivePage.icon, type: "image/svg+xml") }
        }
        router.get("/") { request, _ in
            let only = request.uri.queryParameters["device"].map(String.init)
            let (drawn, shows) = gallery.draw(
                only: only.map { [$0] }, controls: PersonControls(action: "/person", hiddenFields: [("form", formToken)]))
            let events = "/page/events?" + [only.map { "device=\(Self.queryEscaped($0))&" } ?? "", "since=\(shows)"].joined()
            return LivePage.html(Self.page(drawn, events: events))
        }
        router.get("/page/events") { request, _ in
            let only = request.uri.queryParameters["device"].map(String.init)
            return LivePage.events(shown: LivePage.shown(request)) { gallery.shows(only: only.map { [$0] }) }
        }
        router.post("/person") { request, context in
            var request = request
            let form = try await FormFields.read(&request, context)
            guard form.has("form", equalTo: formToken) else {
                throw APIError(
                    .forbidden, code: "form_token", message: "the form's token is missing or not this emulator's: load the page again", field: "form")
            }
            do {
                let device = try gallery.perform(form)
                return LivePage.redirect("/?device=\(Self.queryEscaped(device))")
            } catch let error as DeviceFleet.FleetError {
                throw APIError.notFound("device", error.description)
            }
        }
    }

    private static func queryEscaped(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
    }

    static func page(_ drawn: HTML, events: String) -> HTML {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Simulated devices · LiveRelay emulator</title>
        <link rel="icon" href="/assets/icon.svg" type="image/svg+xml"><link rel="stylesheet" href="/assets/page.css"><script src="/assets/page.js" defer></script>
        </head><body data-events="\(events)">
        <header class="bar"><a class="brand" href="/">LiveRelay emulator</a><nav><a href="/" aria-current="page">Devices</a><a href="/emulator">Status (JSON)</a><a href="/journal">Journal (JSON)</a></nav></header>
        <main>
        <h1>Simulated devices</h1>
        <p class="muted devices-note">Each simulated iPhone as the person holding it sees it now: the Lock Screen when locked, the Dynamic Island (or a banner) when not, StandBy, the Watch when one is paired, CarPlay in a car and a paired Mac's menu bar, each as the iPhone's iOS allows. A template per attributes type fills each region (<code>--templates</code>); without one, the fields are listed. The buttons do what the person would.</p>
        \(drawn)
        </main>
        </body></html>
        """
    }
}
