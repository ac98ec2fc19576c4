import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import Testing

/// What the dashboard reads and keeps: pages of activities, and who is signed in.
@Suite struct DashboardStoreTests {
    @Test(arguments: StoreKind.allCases) func activitiesComeNewestFirstInPagesThatMeetExactly(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            // Two keys started in the same second, so that the order needs the key too.
            for (key, at) in [("order-1", t0), ("order-2", t0 + 10), ("order-3", t0 + 10), ("Match-Final", t0 + 20)] {
                try await store.start(key, at: at)
            }
            try await store.start("order-9", at: t0 + 5, app: "com.example.other")
            try await store.change("order-1", event: .end, body: "done", at: t0 + 30)

            let all = try await store.activities(ActivityQuery())
            #expect(all.map(\.key) == ["Match-Final", "order-3", "order-2", "order-9", "order-1"])
            var pages: [[String]] = []
            var query = ActivityQuery(limit: 2)
            while true {
                let page = try await store.activities(query)
                if page.isEmpty { break }
                pages.append(page.map(\.key))
                query.after = ActivityCursor(after: page.last!)
            }
            #expect(pages == [["Match-Final", "order-3"], ["order-2", "order-9"], ["order-1"]])

            #expect(try await store.activities(ActivityQuery(bundleID: "com.example.other")).map(\.key) == ["order-9"])
            #expect(try await store.activities(ActivityQuery(state: .ended)).map(\.key) == ["order-1"])
            #expect(try await store.activities(ActivityQuery(bundleID: testApp, state: .active)).count == 3)
            #expect(try await store.activities(ActivityQuery(attributesType: "Other")).isEmpty)
            #expect(try await store.activities(ActivityQuery(attributesType: deliveryType)).count == 5)
        }
    }

    @Test(arguments: StoreKind.allCases) func keySearchIgnoresASCIICaseAndTakesLikesCharactersLiterally(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for key in ["Match-Final", "match_semi", "matchXsemi", "100%-done", "order-1"] { try await store.start(key) }
            func keys(_ text: String) async throws -> Set<String> { Set(try await store.activities(ActivityQuery(keyContains: text)).map(\.key)) }
            #expect(try await keys("MATCH") == ["Match-Final", "match_semi", "matchXsemi"])
            #expect(try await keys("h_s") == ["match_semi"])
            #expect(try await keys("%") == ["100%-done"])
            #expect(try await keys("\\") == [])
            #expect(try await keys("").count == 5)
        }
    }

    @Test(arguments: StoreKind.allCases) func aSessionLastsUntilItRunsOutOrItsKeyIsRevoked(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for (id, scope) in [("key-viewer", APIKeyScope.viewer), ("key-admin", .admin), ("key-admin-2", .admin)] {
                try await store.insertAPIKey(APIKeyRecord(id: id, name: id, scope: scope, secretHash: Data(id.utf8), createdAt: t0))
            }
            let viewer = Data(repeating: 1, count: 32)
            let admin = Data(repeating: 2, count: 32)
            try await store.insertDashboardSession(
                DashboardSessionRecord(idHash: viewer, apiKeyID: "key-viewer", formToken: "form-1", signedInAt: t0, expiresAt: t0 + 3600))
            try await store.insertDashboardSession(
                DashboardSessionRecord(idHash: admin, apiKeyID: "key-admin", formToken: "form-2", signedInAt: t0, expiresAt: t0 + 3600))

            let found = try #require(try await store.dashboardSession(idHash: viewer, at: t0 + 10))
            #expect(
                found.session
                    == DashboardSessionRecord(idHash: viewer, apiKeyID: "key-viewer", formToken: "form-1", signedInAt: t0, expiresAt: t0 + 3600)
            )
            #expect(found.key.id == "key-viewer" && found.key.scope == .viewer)
            #expect(try await store.dashboardSession(idHash: Data(repeating: 3, count: 32), at: t0) == nil)
            // Run out.
            #expect(try await store.dashboardSession(idHash: viewer, at: t0 + 3600) == nil)
            // Signed out.
            try await store.deleteDashboardSession(idHash: viewer)
            #expect(try await store.dashboardSession(idHash: viewer, at: t0 + 10) == nil)
            // Its key revoked.
            #expect(try await store.dashboardSession(idHash: admin, at: t0 + 10)?.key.id == "key-admin")
            #expect(try await store.revokeAPIKey(id: "key-admin", at: t0 + 20) == .revoked)
            #expect(try await store.dashboardSession(idHash: admin, at: t0 + 21) == nil)
        }
    }

    @Test(arguments: StoreKind.allCases) func aNewSessionForgetsThoseThatRanOut(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.insertAPIKey(APIKeyRecord(id: "key-admin", name: "a", scope: .admin, secretHash: Data("a".utf8), createdAt: t0))
            let old = Data(repeating: 1, count: 32)
            try await store.insertDashboardSession(
                DashboardSessionRecord(idHash: old, apiKeyID: "key-admin", formToken: "f", signedInAt: t0, expiresAt: t0 + 60))
            try await store.insertDashboardSession(
                DashboardSessionRecord(
                    idHash: Data(repeating: 2, count: 32), apiKeyID: "key-admin", formToken: "g", signedInAt: t0 + 61, expiresAt: t0 + 120))
            // Even a clock that went back finds the old one gone.
            #expect(try await store.dashboardSession(idHash: old, at: t0) == nil)
        }
    }
}
