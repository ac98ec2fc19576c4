#if canImport(ActivityKit) || LIVERELAYKIT_ON_SIMULATED_DEVICES
    #if canImport(ActivityKit)
        import ActivityKit
    #else
        // The simulated iPhones' ActivityKit, in ActivityKit's shapes (LiveRelayKitOnSimulatedDevices).
        import LiveActivityKit
        @_spi(Adapter) import LiveRelayKit
        import SimulatedDevices
    #endif
    import Foundation

    // LiveRelayKit's adapter over ActivityKit: each of ActivityKit's sequences, turned into the
    // observations the platform-free core decides from. Every call is one Apple documents, with the
    // page it is documented on. On Linux this file is compiled against the simulated iPhones'
    // ActivityKit, which has ActivityKit's shapes (the target LiveRelayKitOnSimulatedDevices), and
    // tests run it against a real server; the emulator's apps, whose types are JSON rather than
    // Swift, report through AppReporters over the same devices.

    extension LiveRelayClient {
        /// Reports everything about one attributes type, from now until the client goes: its
        /// contract (read from the Swift types), its push-to-start tokens, and every activity of the
        /// type, those the app requests and those started by a push.
        ///
        /// `channelBound`: the type's activities receive their updates on their key's broadcast
        /// channel (iOS 18: requested with `.channel`, or started by a push that names one), so
        /// each is reported as listening rather than waited on for a token. ActivityKit documents
        /// no property that tells an activity's push type, so the app says it.
        public func track<Attributes: ActivityAttributes>(_ type: Attributes.Type, channelBound: Bool = false) {
            start()
            let name = String(describing: Attributes.self)
            let relay = relay
            var contract: ActivityContractShape?
            do {
                contract = try ActivityContractShape(
                    attributesType: name, attributes: Attributes.self, contentState: Attributes.ContentState.self)
            } catch {
                self.log("LiveRelayKit: no contract for \(name): \(error)")
            }
            trackAuthorization()
            // The contract first, in the same task: it goes to the server before the first token.
            let known = contract
            if #available(iOS 17.2, *) {
                // https://developer.apple.com/documentation/activitykit/activity/pushtostarttokenupdates
                let tokens = Handed(Activity<Attributes>.pushToStartTokenUpdates)
                // The token now, too: the sequence may have given its first before this listens.
                // https://developer.apple.com/documentation/activitykit/activity/pushtostarttoken
                let current = Activity<Attributes>.pushToStartToken
                keepRunning {
                    if let known { await relay.include(known) }
                    if let current { await relay.observe(.pushToStartToken(attributesType: name, token: current)) }
                    for await token in tokens.value {
                        await relay.observe(.pushToStartToken(attributesType: name, token: token))
                    }
                }
            } else if let known {
                keep(Task { await relay.include(known) })
            }
            // Those already there at launch (https://developer.apple.com/documentation/activitykit/activity/activities),
            // then each new one (https://developer.apple.com/documentation/activitykit/activity/activityupdates-swift.type.property).
            let pushType: PushTarget = channelBound ? .channel(nil) : .token
            for activity in Activity<Attributes>.activities { follow(activity, type: name, pushType: pushType) }
            let activities = Handed(Activity<Attributes>.activityUpdates)
            keepRunning { [weak self] in
                for await activity in activities.value { self?.follow(activity, type: name, pushType: pushType) }
            }
        }

        /// Ends `activity` (https://developer.apple.com/documentation/activitykit/activity/end(_:dismissalpolicy:))
        /// and reports the end as the app's: ActivityKit tells only that an activity ended, so
        /// an end the app does not announce is taken as the system's (an `end` push, the 8-hour limit).
        @available(iOS 16.2, *)
        public func end<Attributes: ActivityAttributes>(
            _ activity: Activity<Attributes>, content: ActivityContent<Attributes.ContentState>?,
            dismissalPolicy: ActivityUIDismissalPolicy = .default
        ) async {
            await relay.observe(.endedByApp(activityID: activity.id))
            await activity.end(content, dismissalPolicy: dismissalPolicy)
        }

        /// One activity: registered under its key, then its tokens and its states, each sequence
        /// read by a task of its own; each task first says the activity exists (the core hears it
        /// once), so neither depends on the other having started.
        private func follow<Attributes: ActivityAttributes>(_ activity: Activity<Attributes>, type: String, pushType: PushTarget) {
            let relay = relay
            let id = activity.id
            // `attributes` does not throw (https://developer.apple.com/documentation/activitykit/activity/attributes).
            // https://developer.apple.com/documentation/activitykit/activity/activitystate
            let appeared = ActivityObservation.activity(
                id: id, attributesType: type, key: activityKey(of: activity.attributes, activityID: id), pushType: pushType,
                scheduled: ObservedState.isPending(activity.activityState))
            // https://developer.apple.com/documentation/activitykit/activity/pushtokenupdates-swift.property
            let tokens = Handed(activity.pushTokenUpdates)
            // https://developer.apple.com/documentation/activitykit/activity/activitystateupdates-swift.property
            let states = Handed(activity.activityStateUpdates)
            // Read at once too, token first: a sequence may have given its first value before its
            // task listens, and an activity that ended while the app was not running changes no
            // more (https://developer.apple.com/documentation/activitykit/activity/pushtoken).
            let token = activity.pushToken
            let over = ObservedState(activity.activityState).flatMap { $0 == .ended || $0 == .dismissed ? $0 : nil }
            keep(
                Task {
                    await relay.observe(appeared)
                    if let token { await relay.observe(.activityToken(activityID: id, token: token)) }
                    if let over { await relay.observe(.activityState(activityID: id, state: over)) }
                })
            keepRunning {
                await relay.observe(appeared)
                for await token in tokens.value { await relay.observe(.activityToken(activityID: id, token: token)) }
            }
            keepRunning {
                await relay.observe(appeared)
                for await state in states.value {
                    guard let observed = ObservedState(state) else { continue }
                    await relay.observe(.activityState(activityID: id, state: observed))
                }
            }
        }

        /// Runs `body` in a task kept until the client goes. The closure is made where an
        /// attributes type is known, and the task runs it as a closure of no generic type: a task
        /// whose own closure captured the type's metatype is a warning from Swift 6.2 on
        /// (`SendableMetatype`, which would mark the capture safe, came after Swift 6.0, which
        /// builds this package). `body` runs once, in that task only.
        private func keepRunning(_ body: @escaping () async -> Void) {
            let body = Handed(body)
            keep(Task { await body.value() })
        }

        /// Live Activities switched on or off, frequent updates allowed or not, once whatever the
        /// types (https://developer.apple.com/documentation/activitykit/activityauthorizationinfo:
        /// `areActivitiesEnabled`, `frequentPushesEnabled` and their update sequences). Each task
        /// makes its own `ActivityAuthorizationInfo`, which is not `Sendable`.
        private func trackAuthorization() {
            guard claimAuthorization() else { return }
            let relay = relay
            @Sendable func now() -> ActivityObservation {
                let info = ActivityAuthorizationInfo()
                return .authorization(activitiesEnabled: info.areActivitiesEnabled, frequentPushesEnabled: info.frequentPushesEnabled)
            }
            keep(
                Task {
                    await relay.observe(now())
                    for await _ in ActivityAuthorizationInfo().activityEnablementUpdates { await relay.observe(now()) }
                })
            keep(
                Task {
                    for await _ in ActivityAuthorizationInfo().frequentPushEnablementUpdates { await relay.observe(now()) }
                })
        }
    }

    /// One of ActivityKit's sequences, which do not say they are `Sendable`, handed to the one task
    /// that reads it and used nowhere else. (A `nonisolated(unsafe)` local is not enough: Swift 6.3
    /// refuses to send a closure that captures it, as compiling against the simulated iPhones'
    /// ActivityKit showed.)
    private struct Handed<Value>: @unchecked Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    extension ObservedState {
        /// `ActivityState` (https://developer.apple.com/documentation/activitykit/activitystate): an
        /// enumeration Apple adds cases to, so it is compared rather than switched over (an SDK
        /// with a case this file does not name would make a switch incomplete); unknown ones are skipped.
        init?(_ state: ActivityState) {
            let known: [(ActivityState, ObservedState)] = [(.active, .active), (.stale, .stale), (.ended, .ended), (.dismissed, .dismissed)]
            if let match = known.first(where: { $0.0 == state }) {
                self = match.1
            } else if Self.isPending(state) {
                // Scheduled (iOS 26): it becomes `.active` when its start date comes.
                self = .pending
            } else {
                return nil
            }
        }

        /// `ActivityState.pending` (iOS 26), compared as a value where the SDK has it (Swift 6.2
        /// comes with the iOS 26 SDK); an older SDK's states never are.
        static func isPending(_ state: ActivityState) -> Bool {
            #if compiler(>=6.2)
                if #available(iOS 26.0, macOS 26.0, *) { return state == .pending }
            #endif
            return false
        }
    }
#endif
