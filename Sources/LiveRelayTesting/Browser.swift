import AsyncHTTPClient
import Foundation
import LiveActivityKit
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
    import Glibc
#endif

/// A real browser for the tests: headless Chromium driven by `chromedriver` over the W3C WebDriver
/// protocol (JSON over HTTP), as Selenium drives it. Debian's `chromium` and `chromium-driver`;
/// where they are missing, `availability` says so, and CI fails on it (as with `TestPostgres`).
package final class Browser: Sendable {
    package static let driverPath = ProcessInfo.processInfo.environment["LIVERELAY_CHROMEDRIVER"] ?? "/usr/bin/chromedriver"
    package static let chromiumPath = ProcessInfo.processInfo.environment["LIVERELAY_CHROMIUM"] ?? "/usr/bin/chromium"

    /// Whether there is a browser to drive, or why not.
    package static var availability: Result<Void, Unavailable> {
        for path in [driverPath, chromiumPath] where !FileManager.default.isExecutableFile(atPath: path) {
            return .failure(Unavailable(description: "\(path) is missing (Debian: apt-get install chromium chromium-driver)"))
        }
        return .success(())
    }

    package static var isAvailable: Bool { availability.isMet }

    package static var skipNote: String { availability.skipNote("the dashboard was NOT tested in a browser") }

    package typealias Unavailable = TestRequirement.Unavailable

    /// What the browser answered with an error.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    private let driver: ChildProcess
    /// The process group of chromedriver and the Chromium it started.
    package var processGroup: pid_t { driver.pid }
    private let base: String
    private let session: String
    /// The viewport's size in CSS pixels.
    private let width: Int, height: Int

    private init(driver: ChildProcess, base: String, session: String, width: Int, height: Int) {
        self.driver = driver
        self.base = base
        self.session = session
        (self.width, self.height) = (width, height)
    }

    /// Starts `chromedriver` and a headless Chromium of `width` × `height` CSS pixels, runs `body`
    /// with it, and closes both whatever happens.
    package static func with<Value: Sendable>(
        width: Int = 1280, height: Int = 900, _ body: (Browser) async throws -> Value
    ) async throws -> Value {
        try availability.get()
        let port = try freeLoopbackPort()
        // Chromium's profile and scratch files go with the tests' own. Its singleton socket is in
        // TMPDIR, and a socket's path must fit in 107 bytes: the short root, not a folder in it.
        let driver = try ChildProcess.start(
            driverPath, ["--port=\(port)"], environment: ["HOME": try TestFiles.folder("chromium"), "TMPDIR": TestFiles.root], output: .null,
            ownGroup: true)
        let base = "http://127.0.0.1:\(port)"
        let client = HTTPClient.shared
        do {
            // chromedriver listens a moment after it starts.
            try await eventually(every: .milliseconds(50)) {
                (try? await client.execute(HTTPClientRequest(url: base + "/status"), timeout: .seconds(2)).status) == .ok
            }
            let capabilities = JSONValue.object([
                (
                    "capabilities",
                    .object([
                        (
                            "alwaysMatch",
                            .object([
                                ("browserName", .string("chrome")),
                                (
                                    "goog:chromeOptions",
                                    .object([
                                        ("binary", .string(chromiumPath)),
                                        (
                                            "args",
                                            .array(
                                                [
                                                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                                    "--window-size=\(width),\(height)",
                                                    "--force-device-scale-factor=1", "--hide-scrollbars", "--lang=en-US",
                                                ].map(JSONValue.string))
                                        ),
                                    ])
                                ),
                            ])
                        )
                    ])
                )
            ])
            let created = try await call(client, .POST, base + "/session", capabilities)
            guard let session = created["sessionId"]?.stringValue else { throw Failure(description: "no session in \(created.serializedString)") }
            let browser = Browser(driver: driver, base: base, session: session, width: width, height: height)
            do {
                // A window is at least 500 px wide: the viewport's size is set as a device's.
                try await browser.setViewport(height: height)
                let value = try await body(browser)
                await browser.quit()
                return value
            } catch {
                await browser.quit()
                throw error
            }
        } catch {
            driver.sendToGroup(SIGKILL)
            _ = await driver.exitCode()
            throw error
        }
    }

    /// Ends the session, then chromedriver and whatever of Chromium is left: a test past its
    /// deadline is cancelled, and a session ended only by a request (which cancellation stops)
    /// left ten Chromium processes running after the tests.
    private func quit() async {
        // Asked even when the test is cancelled: a task of its own is not.
        _ = await Task { try? await withDeadline(.seconds(10)) { [self] in try await command(.DELETE, "") } }.value
        // chromedriver itself does not exit on SIGTERM; Chromium is in its process group.
        driver.sendToGroup(SIGKILL)
        _ = await driver.exitCode()
    }

    // MARK: Commands

    package func open(_ url: String) async throws { _ = try await command(.POST, "/url", .object([("url", .string(url))])) }

    package func currentURL() async throws -> String { try await command(.GET, "/url").stringValue ?? "" }

    /// The first element `selector` (CSS) finds, or nil.
    package func element(_ selector: String) async throws -> Element? {
        do {
            let found = try await command(.POST, "/element", .object([("using", .string("css selector")), ("value", .string(selector))]))
            return found.objectMembers?.first.flatMap { $0.value.stringValue }.map { Element(browser: self, id: $0) }
        } catch let failure as Failure where failure.description.hasPrefix("no such element") {
            return nil
        }
    }

    /// The element `selector` finds, once it exists (within the deadline of `eventually`).
    package func waitFor(_ selector: String, timeout: Duration = .seconds(10)) async throws -> Element {
        let start = ContinuousClock.now
        while true {
            if let found = try await element(selector) { return found }
            guard ContinuousClock.now - start < timeout else { throw Failure(description: "nothing matched \(selector) within \(timeout)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The visible text of what `selector` finds, once it exists: read in one step, so that a live
    /// section swapped in the meantime cannot leave a stale element behind. `innerText` applies
    /// `text-transform` (an *Ended* tag reads `ENDED`).
    package func text(_ selector: String = "body", timeout: Duration = .seconds(10)) async throws -> String {
        let start = ContinuousClock.now
        let script = "const found = document.querySelector(arguments[0]); return found === null ? null : found.innerText;"
        while true {
            let read = try await command(.POST, "/execute/sync", .object([("script", .string(script)), ("args", .array([.string(selector)]))]))
            if let text = read.stringValue { return text }
            guard ContinuousClock.now - start < timeout else { throw Failure(description: "nothing matched \(selector) within \(timeout)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Runs `script` in the page and gives its result.
    @discardableResult
    package func run(_ script: String) async throws -> JSONValue {
        try await command(.POST, "/execute/sync", .object([("script", .string(script)), ("args", .array([]))]))
    }

    /// The viewport as a device of this browser's width and `height` (Chrome DevTools' emulation).
    private func setViewport(height: Int) async throws {
        _ = try await command(
            .POST, "/goog/cdp/execute",
            .object([
                ("cmd", .string("Emulation.setDeviceMetricsOverride")),
                (
                    "params",
                    .object([
                        ("width", .integer(width)), ("height", .integer(height)), ("deviceScaleFactor", .integer(1)), ("mobile", .bool(width < 600)),
                    ])
                ),
            ]))
    }

    /// A PNG of the viewport, written to `path` (folders made as needed). `fullPage`: the whole
    /// page's height, not only the viewport's (which grows for it, then goes back).
    package func screenshot(to path: String, fullPage: Bool = false) async throws {
        if fullPage, let pageHeight = try await run("return document.documentElement.scrollHeight").doubleValue {
            try await setViewport(height: max(height, Int(pageHeight)))
        }
        let shot = try await command(.GET, "/screenshot").stringValue
        if fullPage { try await setViewport(height: height) }
        guard let encoded = shot, let png = Data(base64Encoded: encoded) else {
            throw Failure(description: "the screenshot was not base64")
        }
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try png.write(to: URL(fileURLWithPath: path))
    }

    package struct Element: Sendable {
        let browser: Browser
        let id: String

        package func click() async throws { _ = try await browser.command(.POST, "/element/\(id)/click", .object([])) }
        package func type(_ text: String) async throws {
            _ = try await browser.command(.POST, "/element/\(id)/value", .object([("text", .string(text))]))
        }
        package func clear() async throws { _ = try await browser.command(.POST, "/element/\(id)/clear", .object([])) }
        package func text() async throws -> String { try await browser.command(.GET, "/element/\(id)/text").stringValue ?? "" }
    }

    // MARK: The protocol

    fileprivate func command(_ method: HTTPMethod, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        try await Self.call(HTTPClient.shared, method, base + "/session/\(session)" + path, body)
    }

    private static func call(_ client: HTTPClient, _ method: HTTPMethod, _ url: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let body {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body.serialized))
        }
        let response = try await client.execute(request, timeout: .seconds(30))
        let answer = try JSONValue(parsing: Array(buffer: try await response.body.collect(upTo: 32 * 1024 * 1024)))
        let value = answer["value"] ?? .null
        guard response.status == .ok else {
            throw Failure(description: "\(value["error"]?.stringValue ?? "error"): \(value["message"]?.stringValue ?? value.serializedString)")
        }
        return value
    }
}
