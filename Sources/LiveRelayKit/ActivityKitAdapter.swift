#if canImport(ActivityKit)
    import ActivityKit
    import Foundation

    // LiveRelayKit's adapter over ActivityKit: each of ActivityKit's sequences, turned into the
    // observations the platform-free core decides from. Every call is one Apple documents, with the
    // page it is documented on; the simulated iPhones run the same core through their own adapter
    // (APNsEmulator's AppReporters), over the same sequences.

    extension LiveRelayClient {
        /// Reports everything about one attributes type, from now until the client goes: its
        /// contract (read from the Swift types), its push-to-start tokens, and every activity of the
        /// type, those the app requests and those started by a push.
        public func track<Attributes: ActivityAttributes>(_ type: Attributes.Type) {
            start()
            let name = String(describing: Attributes.self)
            let relay = relay
            do {
                let contract = try ActivityContractShape(
                    attributesType: name, attributes: Attributes.self, contentState: Attributes.ContentState.self)
                keep(Task { [weak self] in await self?.include(contract) })
            } catch {
                print("LiveRelayKit: no contract for \(name): \(error)")
            }
            trackAuthorization()
            if #available(iOS 17.2, *) {
                // https://developer.apple.com/documentation/activitykit/activity/pushtostarttokenupdates
                keep(
                    Task {
                        for await token in Activity<Attributes>.pushToStartTokenUpdates {
                            await relay.observe(.pushToStartToken(attributesType: name, token: token))
                        }
                    })
            }
            // Those already there at launch (https://developer.apple.com/documentation/activitykit/activity/activities),
            // then each new one (https://developer.apple.com/documentation/activitykit/activity/activityupdates-swift.type.property).
            for activity in Activity<Attributes>.activities { follow(activity, type: name) }
            keep(
                Task { [weak self] in
                    for await activity in Activity<Attributes>.activityUpdates {
                        guard let self else { return }
                        self.follow(activity, type: name)
                    }
                })
        }

        /// One activity: registered under its key, then its tokens and its states.
        private func follow<Attributes: ActivityAttributes>(_ activity: Activity<Attributes>, type: String) {
            let relay = relay
            let id = activity.id
            // `attributes` does not throw (https://developer.apple.com/documentation/activitykit/activity/attributes).
            let key = activityKey(of: activity.attributes, activityID: id)
            // https://developer.apple.com/documentation/activitykit/activity/pushtokenupdates-swift.property
            let tokens = activity.pushTokenUpdates
            // https://developer.apple.com/documentation/activitykit/activity/activitystateupdates-swift.property
            let states = activity.activityStateUpdates
            keep(
                Task {
                    await relay.observe(.activity(id: id, attributesType: type, key: key, pushType: .token))
                    await withTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await token in tokens { await relay.observe(.activityToken(activityID: id, token: token)) }
                        }
                        group.addTask {
                            for await state in states {
                                guard let observed = ObservedState(state) else { continue }
                                await relay.observe(.activityState(activityID: id, state: observed))
                            }
                        }
                    }
                })
        }

        /// Live Activities switched on or off, frequent updates allowed or not
        /// (https://developer.apple.com/documentation/activitykit/activityauthorizationinfo).
        private func trackAuthorization() {
            guard claimAuthorization() else { return }
            let relay = relay
            keep(
                Task {
                    let info = ActivityAuthorizationInfo()
                    await relay.observe(
                        .authorization(activitiesEnabled: info.areActivitiesEnabled, frequentPushesEnabled: info.frequentPushesEnabled))
                    await withTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await enabled in info.activityEnablementUpdates {
                                await relay.observe(
                                    .authorization(
                                        activitiesEnabled: enabled, frequentPushesEnabled: ActivityAuthorizationInfo().frequentPushesEnabled))
                            }
                        }
                        group.addTask {
                            for await frequent in info.frequentPushEnablementUpdates {
                                await relay.observe(
                                    .authorization(
                                        activitiesEnabled: ActivityAuthorizationInfo().areActivitiesEnabled, frequentPushesEnabled: frequent))
                            }
                        }
                    }
                })
        }
    }

    extension ObservedState {
        /// `ActivityState` (https://developer.apple.com/documentation/activitykit/activitystate): an
        /// enumeration Apple may add cases to, so unknown ones are skipped.
        init?(_ state: ActivityState) {
            switch state {
            case .active: self = .active
            case .stale: self = .stale
            case .ended: self = .ended
            case .dismissed: self = .dismissed
            @unknown default:
                // `.pending` (iOS 26) among them: it becomes `.active` when its start date comes.
                return nil
            }
        }
    }
#endif
