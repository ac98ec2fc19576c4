// A stand-in of the WidgetKit declarations LiveRelayKit's widget adapter uses, in the shapes of
// the iOS 26 SDK as Apple documents them (https://developer.apple.com/documentation/widgetkit):
// `WidgetPushHandler` (iOS 26) and `ControlPushHandler` (iOS 18) protocols the system
// instantiates, `WidgetInfo.family` a `WidgetFamily`, `ControlInfo.pushInfo` optional. It only
// declares: `.ci/typecheck-adapter` compiles LiveRelayKit against it on Linux, as Xcode compiles it
// against WidgetKit. Nothing here runs.
import Foundation

public enum WidgetFamily: Equatable, Hashable, Sendable, CustomStringConvertible {
    case systemSmall, systemMedium, systemLarge, systemExtraLarge
    case accessoryCircular, accessoryRectangular, accessoryInline
    public var description: String { fatalError("a stand-in") }
}

public struct WidgetInfo: Sendable {
    public let kind: String
    public let family: WidgetFamily
}

@available(iOS 26.0, macOS 26.0, watchOS 26.0, visionOS 26.0, *)
public struct WidgetPushInfo: Sendable {
    public let token: Data
}

@available(iOS 26.0, macOS 26.0, watchOS 26.0, visionOS 26.0, *)
public protocol WidgetPushHandler {
    init()
    func pushTokenDidChange(_ pushInfo: WidgetPushInfo, widgets: [WidgetInfo])
}

@available(iOS 18.0, macOS 26.0, watchOS 26.0, *)
public struct ControlPushInfo: Sendable {
    public let token: Data
}

@available(iOS 18.0, macOS 26.0, watchOS 26.0, *)
public struct ControlInfo {
    public let kind: String
    public var pushInfo: ControlPushInfo?
}

@available(iOS 18.0, macOS 26.0, watchOS 26.0, *)
public protocol ControlPushHandler {
    init()
    func pushTokensDidChange(controls: [ControlInfo])
}
