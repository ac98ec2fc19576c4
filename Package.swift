// swift-tools-version: 6.1
import PackageDescription

/// What the APNs client and the emulator both stand on.
let http2OverTLS: [Target.Dependency] = [
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "NIOSSL", package: "swift-nio-ssl"),
    .product(name: "NIOHTTP2", package: "swift-nio-http2"),
    .product(name: "NIOHPACK", package: "swift-nio-http2"),
    .product(name: "Crypto", package: "swift-crypto"),
    .product(name: "Logging", package: "swift-log"),
]

let package = Package(
    name: "LiveRelay",
    // iOS for LiveRelayKit (and LiveActivityKit): push-to-start tokens need iOS 17.2, which it checks per call.
    platforms: [.macOS(.v15), .iOS(.v17)],
    products: [
        .library(name: "LiveActivityKit", targets: ["LiveActivityKit"]),
        .library(name: "APNs", targets: ["APNs"]),
        .library(name: "SimulatedDevices", targets: ["SimulatedDevices"]),
        .library(name: "APNsEmulator", targets: ["APNsEmulator"]),
        .executable(name: "liverelay", targets: ["liverelay"]),
    ],
    dependencies: [
        // What an iOS app adds, a package of its own (no dependencies); every simulated iPhone runs it.
        .package(path: "LiveRelayKit"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.30.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // The drawn iPhones' regions, from a template per attributes type.
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        // Hummingbird's request and response types, which our middleware names.
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // `/metrics`: swift-metrics' API (already here through Hummingbird) rendered by swift-prometheus.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Spans of requests, store transactions and APNs exchanges (already here through Hummingbird).
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // `serve --otlp-endpoint`: the spans exported as OTLP over HTTP (not gRPC, which would double its build).
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        // The contract checks' differential test against JSONDecoder: seeded generation and counts.
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        // The vocabulary of Live Activities and the APNs payload. Foundation only, so an iOS app
        // can share its attribute types with the server.
        .target(name: "LiveActivityKit"),
        // LiveRelayKit's ActivityKit adapter (the same file, linked) compiled against the simulated
        // iPhones' ActivityKit API, which has ActivityKit's shapes: it type-checks the adapter on
        // Linux, and the tests run it, with app types of Swift, against a real server.
        .target(
            name: "LiveRelayKitOnSimulatedDevices",
            dependencies: [.product(name: "LiveRelayKit", package: "LiveRelayKit"), "SimulatedDevices", "LiveActivityKit"],
            swiftSettings: [.define("LIVERELAYKIT_ON_SIMULATED_DEVICES")]),
        // The APNs provider client: ES256 provider tokens, HTTP/2 over TLS, typed answers.
        .target(
            name: "APNs",
            dependencies: [
                "LiveActivityKit",
                .product(name: "NIOTLS", package: "swift-nio"),
            ] + http2OverTLS
        ),
        // The iPhone's side: ActivityKit's runtime on simulated devices. Pure logic over an injected
        // clock, no I/O, so every rule is tested without a network.
        .target(name: "SimulatedDevices", dependencies: ["LiveActivityKit"]),
        // What every JSON API of ours shares: one error shape, field-path-aware body reading.
        .target(
            name: "JSONAPI",
            dependencies: [
                "LiveActivityKit", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // What the dashboard and the emulator's devices page share: escaped markup, the live-page
        // script and events, the style sheet, and the simulated iPhones drawn.
        .target(
            name: "WebPages",
            dependencies: [
                "LiveActivityKit", "SimulatedDevices", "JSONAPI", .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Apple's side on loopback: an HTTP/2 + TLS server speaking the APNs provider API.
        .target(
            name: "APNsEmulator",
            dependencies: [
                "LiveActivityKit", "APNs", "SimulatedDevices", "JSONAPI", "WebPages",
                // Simulated apps report to a LiveRelay server through the package real apps add.
                .product(name: "LiveRelayKit", package: "LiveRelayKit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ] + http2OverTLS
        ),
        // The server's storage: one protocol, SQLite (embedded default) and PostgreSQL behind it, the
        // same named migrations, the outbox's rules in Swift once for both.
        .target(
            name: "LiveRelayStore",
            dependencies: [
                "LiveActivityKit", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // The service core: registry, lifecycle, fan-out, durable outbox, dispatcher, scheduler,
        // budget governor. Logic over the store and the APNs client.
        .target(
            name: "LiveRelay",
            dependencies: [
                "LiveActivityKit", "APNs", "LiveRelayStore",
                // The webhooks' posts.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The HTTP API under /v1, its auth and limits, and its OpenAPI document.
        .target(
            name: "LiveRelayHTTP",
            dependencies: [
                "LiveRelay", "LiveRelayStore", "JSONAPI", "LiveActivityKit", "APNs", "WebPages", "SimulatedDevices",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            resources: [.copy("openapi.json")]
        ),
        // Helpers shared by the test targets: deadlines, fixtures, a scriptable APNs endpoint.
        .target(
            name: "LiveRelayTesting",
            dependencies: [
                "LiveActivityKit", "APNs", "APNsEmulator", "LiveRelay", "LiveRelayHTTP", "LiveRelayStore", "SimulatedDevices", "WebPages",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The real Swift types a contract's schema stands for (so JSONDecoder can be asked what
        // decodes), and JSON texts generated for them: the contract checks' differential test and
        // the fuzzer compare our verdict with JSONDecoder's.
        .target(name: "JSONDecoderDifferential", dependencies: ["LiveActivityKit"]),
        // libFuzzer over everything that reads untrusted JSON; without it, a replayer of the corpus
        // in Fuzz/corpus (Documentation/development.md, "Fuzzing").
        .executableTarget(
            name: "LiveRelayFuzz",
            dependencies: [
                "LiveActivityKit", "LiveRelay", "LiveRelayHTTP", "JSONAPI", "APNs", "JSONDecoderDifferential",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
            ]),
        // `liverelay bench`: the benchmarks, run by the command line in child processes of it.
        .target(
            name: "LiveRelayBenchmarks",
            dependencies: [
                "LiveActivityKit", "APNs", "APNsEmulator", "SimulatedDevices", "LiveRelay", "LiveRelayHTTP", "LiveRelayStore", "WebPages",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `bench server` loads the API over HTTP.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The command line: serve, push, channels, emulator, keys, and bench from its own target.
        .executableTarget(
            name: "liverelay",
            dependencies: [
                "LiveActivityKit", "APNs", "APNsEmulator", "SimulatedDevices", "LiveRelay", "LiveRelayHTTP", "LiveRelayStore", "JSONAPI",
                "LiveRelayBenchmarks", "WebPages",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "LiveActivityKitTests",
            dependencies: [
                "LiveActivityKit", "LiveRelayTesting", "JSONDecoderDifferential",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]),
        // LiveRelayKit's decisions as values, its backlog on a real file, without a network.
        .testTarget(
            name: "LiveRelayKitTests", dependencies: [.product(name: "LiveRelayKit", package: "LiveRelayKit"), "LiveActivityKit", "LiveRelayTesting"]),
        .testTarget(name: "SimulatedDevicesTests", dependencies: ["SimulatedDevices", "LiveActivityKit"]),
        // The drawn devices and their templates, without a server.
        .testTarget(name: "WebPagesTests", dependencies: ["WebPages", "SimulatedDevices", "LiveActivityKit", "LiveRelayTesting"]),
        .testTarget(
            name: "APNsTests",
            dependencies: [
                "APNs", "APNsEmulator", "LiveRelayTesting", "LiveActivityKit",
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ]
        ),
        .testTarget(
            name: "APNsEmulatorTests",
            dependencies: [
                "APNs", "APNsEmulator", "LiveActivityKit", "LiveRelayTesting", "SimulatedDevices",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // Body reading and the error shape, without a server.
        .testTarget(name: "JSONAPITests", dependencies: ["JSONAPI", "LiveActivityKit"]),
        // The core alone, without HTTP or a database: the planners, the dispatcher's loop, the governor.
        .testTarget(name: "LiveRelayTests", dependencies: ["LiveRelay", "LiveRelayStore", "LiveActivityKit", "APNs", "LiveRelayTesting"]),
        // The contract every store implementation must pass.
        .testTarget(
            name: "LiveRelayStoreTests",
            dependencies: [
                "LiveRelayStore", "LiveActivityKit", "LiveRelayTesting", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]),
        // The server through its HTTP API, with the emulator and simulated devices on loopback.
        .testTarget(
            name: "LiveRelayHTTPTests",
            dependencies: [
                "LiveRelay", "LiveRelayHTTP", "LiveRelayStore", "APNs", "APNsEmulator", "SimulatedDevices",
                "LiveActivityKit", "LiveRelayTesting", "JSONAPI", .product(name: "LiveRelayKit", package: "LiveRelayKit"),
                "LiveRelayKitOnSimulatedDevices", "WebPages",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // Runs the built `liverelay` executable as a user would.
        .testTarget(
            name: "LiveRelayCLITests",
            dependencies: [
                "liverelay", "LiveActivityKit", "APNsEmulator", "LiveRelay", "LiveRelayStore", "LiveRelayTesting", "SimulatedDevices",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
    ]
)

// One place for the language mode and strictness of every target.
for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.swiftLanguageMode(.v6))
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    // A file uses only what it imports, and a module only what it declares.
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}
