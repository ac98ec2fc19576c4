import Foundation
import LiveRelayStore
import Testing

@testable import LiveRelay

@Suite struct WebhookRulesTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func anyTwoHundredDeliversAndNothingElseDoes() {
        let rules = WebhookRules()
        #expect(WebhookAttempt(at: t0, status: 200).delivered)
        #expect(WebhookAttempt(at: t0, status: 299).delivered)
        for status in [199, 301, 308, 400, 410, 500] { #expect(!WebhookAttempt(at: t0, status: status, error: "HTTP \(status)").delivered) }
        #expect(!WebhookAttempt(at: t0, error: "connection refused").delivered)
        guard case .delivered = rules.outcome(of: WebhookAttempt(at: t0, status: 204), attemptsBefore: 7, random: 0.5) else {
            Issue.record("a 204 after seven failures is delivered")
            return
        }
    }

    /// About a day of retries: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, each moved by up to 10%.
    @Test func aFailureIsRetriedForAboutADayWithJitterThenGivenUp() {
        let rules = WebhookRules()
        let failed = WebhookAttempt(at: t0, status: 503, error: "HTTP 503")
        var total: TimeInterval = 0
        for (attempts, expected) in [5.0, 300, 1800, 7200, 18_000, 36_000, 36_000].enumerated() {
            guard case .retry(_, let at) = rules.outcome(of: failed, attemptsBefore: attempts, random: 0.5) else {
                Issue.record("attempt \(attempts + 1) is retried")
                return
            }
            #expect(at == t0 + expected)
            guard case .retry(_, let early) = rules.outcome(of: failed, attemptsBefore: attempts, random: 0),
                case .retry(_, let late) = rules.outcome(of: failed, attemptsBefore: attempts, random: 0.999_999)
            else { return }
            #expect(abs(early.timeIntervalSince(t0) - expected * 0.9) < 0.001)
            #expect(abs(late.timeIntervalSince(t0) - expected * 1.1) < 0.01)
            total += expected
        }
        #expect((86_400...108_000).contains(total), "about a day: \(total / 3600) h")
        guard case .gaveUp = rules.outcome(of: failed, attemptsBefore: 7, random: 0.5) else {
            Issue.record("the eighth failure is the last")
            return
        }
        #expect(rules.disableFailingSince(at: t0) == t0 - 5 * 86_400)
    }

    /// The Standard Webhooks specification's example, as its Python library signs it.
    @Test func aSignatureIsTheSpecificationsHMACOverIdTimestampAndBody() throws {
        let secret = try #require(WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        let signature = secret.signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8))
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        #expect(secret.text == "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let made = WebhookSecret.generate()
        #expect(made.text.hasPrefix("whsec_") && WebhookSecret(made.text) == made && made != WebhookSecret.generate())
        #expect(WebhookSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") == nil && WebhookSecret("whsec_") == nil)
    }

    @Test func addressesOfLoopbackPrivateAndLinkLocalNetworksAreKnown() {
        let cases: [(String, WebhookAddresses.Kind?)] = [
            ("127.0.0.1", .loopback), ("127.1.2.3", .loopback), ("::1", .loopback), ("[::1]", .loopback), ("localhost", .loopback),
            ("api.localhost", .loopback), ("10.0.0.8", .private), ("172.16.0.1", .private), ("172.31.255.255", .private),
            ("192.168.1.1", .private), ("169.254.169.254", .private), ("100.64.0.1", .private), ("0.0.0.0", .private),
            ("224.0.0.1", .private), ("::", .private), ("fd00::1", .private), ("fe80::1", .private), ("::ffff:10.0.0.1", .private),
            ("::ffff:127.0.0.1", .loopback), ("8.8.8.8", .public), ("172.32.0.1", .public), ("2606:4700::1111", .public),
            ("hooks.example.com", nil),
        ]
        for (host, kind) in cases { #expect(WebhookAddresses.kind(ofHost: host) == kind, "\(host)") }
    }

    @Test func anEndpointsAddressIsRefusedUnlessAllowed() async throws {
        #expect(WebhookAddresses.public.refusal(ofURL: "https://hooks.example.com/liverelay") == nil)
        #expect(WebhookAddresses.public.refusal(ofURL: "http://127.0.0.1:9000/hooks")?.contains("loopback") == true)
        #expect(WebhookAddresses.public.refusal(ofURL: "http://169.254.169.254/latest/meta-data")?.contains("private") == true)
        #expect(WebhookAddresses.loopback.refusal(ofURL: "http://127.0.0.1:9000/hooks") == nil)
        #expect(WebhookAddresses.loopback.refusal(ofURL: "http://10.1.2.3/hooks") != nil)
        #expect(WebhookAddresses.any.refusal(ofURL: "http://10.1.2.3/hooks") == nil)
        for bad in ["ftp://hooks.example.com", "hooks.example.com/x", "https://", "https://user:pw@hooks.example.com/"] {
            #expect(WebhookAddresses.any.refusal(ofURL: bad) != nil, "\(bad)")
        }
        #expect(WebhookAddresses.any.refusal(ofURL: "https://hooks.example.com/" + String(repeating: "a", count: 2100)) != nil)
        // A name is checked as it resolves, before each attempt (every system resolves localhost).
        let localhost = try #require(try? WebhookTarget.parse("http://localhost:9000/hooks").get())
        #expect(await WebhookAddresses.public.address(of: localhost).failure?.reason.contains("loopback") == true)
        let resolved = try #require(await WebhookAddresses.loopback.address(of: localhost).success)
        #expect(WebhookAddresses.kind(ofIP: resolved) == .loopback)
    }

    /// A URL that the network code cannot take is refused when it is saved, and again before
    /// each attempt: a port out of range once trapped in it, at every restart.
    @Test(arguments: [
        "http://127.0.0.1:99999/", "http://[::1]:70000/", "https://8.8.8.8:65536/hooks", "http://hooks.example.com:0/",
        "https://hooks.example.com:99999999999999999999/",
    ])
    func aPortOutsideOneTo65535IsRefused(url: String) {
        for addresses in WebhookAddresses.allCases { #expect(addresses.refusal(ofURL: url) != nil, "\(url)") }
        #expect(WebhookTarget.parse(url).failure != nil)
        #expect(WebhookTarget.parse("http://hooks.example.com:65535/").success?.port == 65535)
        #expect(WebhookTarget.parse("https://hooks.example.com/").success?.port == 443)
    }

    @Test(arguments: [
        "https://hooks.example.com/a\u{0}b", "https://hooks.example.com/a\r\nX-Injected: 1", "https://hooks.example.com/a b",
        "https://hooks.example.com/\t", "https://hooks.example.com/\u{7F}", "https://hooks.example.com/\u{85}",
    ])
    func controlCharactersAndSpacesAreRefused(url: String) {
        #expect(WebhookAddresses.any.refusal(ofURL: url)?.contains("control characters") == true, "\(url.debugDescription)")
    }

    /// What the system's resolver reads as an address is judged as one, when it is saved.
    @Test func looseIPv4FormsAndTheRootsDotAreJudgedAtSave() {
        for loose in ["http://2130706433/", "http://0x7f000001/", "http://127.1/", "http://0/", "http://017700000001/"] {
            #expect(WebhookAddresses.any.refusal(ofURL: loose)?.contains("four decimal numbers") == true, "\(loose)")
        }
        #expect(WebhookAddresses.public.refusal(ofURL: "http://localhost./hooks")?.contains("loopback") == true)
        #expect(WebhookAddresses.public.refusal(ofURL: "http://LOCALHOST.:8080/")?.contains("loopback") == true)
        #expect(WebhookAddresses.public.refusal(ofURL: "https://hooks.example.com./x") == nil)
        #expect(WebhookAddresses.public.refusal(ofURL: "https://1st.example.com/x") == nil)
    }

    /// IPv6's transition and reserved ranges, and 6to4's IPv4 relays, are not public hosts.
    @Test(arguments: [
        "::7f00:1", "::a00:1", "::ffff:0:7f00:1", "2002:7f00:1::1", "2002:808:808::1", "64:ff9b:1::a00:1", "fec0::1", "100::1",
        "2001::1", "2001:0:4136:e378::1", "2001:1ff::1", "192.88.99.1",
    ])
    func transitionAndReservedRangesAreNotPublic(host: String) {
        #expect(WebhookAddresses.kind(ofHost: host) == .private, "\(host)")
    }

    @Test func publicIPv6AddressesNearTheReservedRangesStayPublic() {
        for host in ["2606:4700::1111", "2001:4860:4860::8888", "2001:200::1", "2003::1", "64:ff9b::808:808", "101::1", "192.88.98.1"] {
            #expect(WebhookAddresses.kind(ofHost: host) == .public, "\(host)")
        }
    }

    /// The built-in emulator's control API takes no key on loopback: never an endpoint.
    @Test func thisServersOwnLoopbackListenersAreNeverEndpoints() async throws {
        #expect(WebhookAddresses.any.refusal(ofURL: "http://127.0.0.1:5000/devices", ownPorts: [5000])?.contains("own") == true)
        #expect(WebhookAddresses.loopback.refusal(ofURL: "http://localhost:5000/", ownPorts: [5000])?.contains("own") == true)
        #expect(WebhookAddresses.loopback.refusal(ofURL: "http://127.0.0.1:5001/", ownPorts: [5000]) == nil)
        let named = try #require(try? WebhookTarget.parse("http://localhost:5000/").get())
        #expect(await WebhookAddresses.any.address(of: named, ownPorts: [5000]).failure?.reason.contains("own") == true)
    }
}

extension Result {
    var success: Success? { if case .success(let value) = self { value } else { nil } }
    var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}
