#if canImport(WidgetKit)
    import Foundation
    import WidgetKit

    // LiveRelayKit's adapter over WidgetKit's push handlers: the system makes one of each type
    // the widget extension names and calls it when a token or the widgets change; each call
    // becomes an observation for every client set up in the process (`LiveRelayClient.setUp`, in
    // the widget bundle's `init`, with the app's bundle id and the app group's folder).

    /// Name it in each widget configuration that reloads by push:
    /// `.pushHandler(LiveRelayWidgetPushHandler.self)`. The app's widget token and the widgets
    /// placed reach the server (`POST /v1/widget-tokens`); with the last widget removed, the token
    /// is withdrawn there.
    /// https://developer.apple.com/documentation/widgetkit/widgetpushhandler
    @available(iOS 26.0, macOS 26.0, watchOS 26.0, visionOS 26.0, *)
    public struct LiveRelayWidgetPushHandler: WidgetPushHandler {
        public init() {}

        public func pushTokenDidChange(_ pushInfo: WidgetPushInfo, widgets: [WidgetInfo]) {
            let placed = widgets.map { Report.Widget(kind: $0.kind, family: String(describing: $0.family)) }
            LiveRelayClient.observeInEveryClient(.widgetPushInfo(token: pushInfo.token, widgets: placed))
        }
    }

    /// Name it in each control configuration that reloads by push:
    /// `.pushHandler(LiveRelayControlPushHandler.self)`. Every control's token reaches the server
    /// (`POST /v1/control-tokens`); WidgetKit always passes all of them.
    /// https://developer.apple.com/documentation/widgetkit/controlpushhandler
    @available(iOS 18.0, macOS 26.0, watchOS 26.0, *)
    public struct LiveRelayControlPushHandler: ControlPushHandler {
        public init() {}

        public func pushTokensDidChange(controls: [ControlInfo]) {
            let tokens = controls.compactMap { control in control.pushInfo.map { ObservedControl(kind: control.kind, token: $0.token) } }
            LiveRelayClient.observeInEveryClient(.controlPushInfo(tokens))
        }
    }
#endif
