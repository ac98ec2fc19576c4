// swift-tools-version:6.0
// LiveRelayKit: what an iOS app adds to hand its Live Activities' tokens to a LiveRelay server.
// A package of its own, with no dependencies, so that an app resolves nothing else: the server's
// package uses it by path, and releases publish this folder as its own repository
// (Documentation/your-app.md, "Releases").
import PackageDescription

let package = Package(
    name: "LiveRelayKit",
    // ActivityKit from iOS 16.1; push-to-start tokens need 17.2, which it checks per call. macOS
    // for its tests and previews.
    platforms: [.iOS("16.1"), .macOS(.v15)],
    products: [.library(name: "LiveRelayKit", targets: ["LiveRelayKit"])],
    targets: [
        // Its privacy manifest goes with it into the app (App Store review reads it).
        .target(name: "LiveRelayKit", resources: [.copy("PrivacyInfo.xcprivacy")])
    ]
)
