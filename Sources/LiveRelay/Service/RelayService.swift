import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// The service core: the apps it sends for, registrations from them, starts, updates and ends
/// from the backend, written with their pushes to the outbox in one transaction; schedules,
/// expiry and channel cleanup. Every key, token, channel and push belongs to one app. The
/// dispatcher sends what this accepts.
package final class RelayService: Sendable {
    /// Internal: everything above the core reaches the store through the service.
    let store: any RelayStore
    package let configuration: RelayConfiguration
    /// The API's format of scheduled requests and kept answers.
    package let metrics: RelayMetrics
    /// Sends, and creates and deletes broadcast channels, in each environment served; nil when no
    /// APNs is configured (tests of the API alone, which take tokens of both environments).
    let apns: APNsRoutes?
    /// Seals the apps' signing keys in the store, and opens them to sign.
    let masterKey: MasterKey
    /// Signs and checks activity grants (`ActivityGrant`).
    let grantSecret: SymmetricKey
    /// Each device's reports (`DeviceReportLimits`), by app and device.
    let deviceReports: RequestLimiter
    /// When a device was last logged for reporting too fast: once a minute at most.
    let deviceThrottleLogged = Mutex<Date?>(nil)
    let now: @Sendable () -> Date
    let logger: Logger
    /// Wakes the dispatcher when pushes are queued (here, or by another instance on the same store).
    let outboxSignal = OutboxSignal()
    /// This process among the instances sharing a store: the holder of the leases it takes.
    package let instanceID = randomHex(bytes: 8)
    /// Takes the pushes of small requests straight to the running dispatcher.
    let handOver = DispatchHandOver()
    let governor: PriorityGovernor
    /// The apps by bundle ID, with the credentials their pushes are signed with.
    let appBook = StoreCache<[String: AppRecord]> { store in
        Dictionary(try await store.apps().map { ($0.bundleID, $0) }, uniquingKeysWith: { _, last in last })
    }
    /// What each app's widget decodes, by bundle ID: requests are checked against it.
    let contractBook: StoreCache<[String: AppContracts]>
    /// Live keys recently looked up, by secret hash: most requests then skip a read. A revocation
    /// here clears it; one made by another process sharing the store takes effect within the TTL.
    let keyCache = Mutex<[Data: (key: APIKeyRecord, until: ContinuousClock.Instant)]>([:])
    static let keyCacheTTL = Duration.seconds(5)
    let failures = Mutex(AuthenticationFailures())
    /// Whether any webhook endpoint is enabled: the webhook sender rests while none is.
    let webhookBook = StoreCache<Bool> { store in try await store.webhookEndpoints(app: nil).contains(where: \.enabled) }
    /// Wakes the webhook sender when something changed that may have written an event.
    let webhookSignal = OutboxSignal()
    /// Ports this process listens on at loopback without a key (the built-in emulator's control
    /// API): never an endpoint's, whatever `--webhook-addresses` allows.
    let ownLoopbackPorts = Mutex<Set<Int>>([])

    /// Marks a port this process listens on at loopback without a key as never a webhook's.
    package func keepWebhooksOff(loopbackPort port: Int) {
        ownLoopbackPorts.withLock { _ = $0.insert(port) }
    }
    /// Up to when the ticker has looked for push-to-starts no device confirmed (nil: not yet).
    let startsCheckedUntil = Mutex<Date?>(nil)
    /// When retention runs next on this instance (nil: at its first tick as the ticker's holder).
    let pruneDue = Mutex<Date?>(nil)
    private let changes = Atomic<UInt64>(0)

    /// The service over `store`, migrated first, its signing keys sealed by `masterKey` (which
    /// must open those sealed already).
    package static func open(
        store: any RelayStore, configuration: RelayConfiguration, apns: APNsRoutes?, masterKey: MasterKey,
        now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "liverelay")
    ) async throws -> RelayService {
        let applied = try await store.migrate()
        if !applied.isEmpty { logger.info("migrations applied", metadata: ["names": "\(applied.joined(separator: ", "))"]) }
        let relay = RelayService(
            store: store, configuration: configuration, apns: apns, masterKey: masterKey, now: now, logger: logger)
        try await relay.sealSigningKeys()
        return relay
    }

    /// The service over a store already migrated.
    package init(
        store: any RelayStore, configuration: RelayConfiguration, apns: APNsRoutes?, masterKey: MasterKey,
        now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "liverelay")
    ) {
        self.store = store
        self.masterKey = masterKey
        grantSecret = masterKey.derivedKey(for: ActivityGrant.purpose)
        deviceReports = RequestLimiter(rate: configuration.deviceReports.perSecond, burst: configuration.deviceReports.burst, store: store)
        self.configuration = configuration
        self.apns = apns
        self.now = now
        self.logger = logger
        self.metrics = RelayMetrics()
        self.governor = PriorityGovernor(policy: configuration.budget)
        self.contractBook = StoreCache { [logger] store in
            var contracts: [String: AppContracts] = [:]
            var latest: [String: Date] = [:]
            for record in try await store.contracts() {
                do throws(LiveActivityValidationError) {
                    let contract = try ActivityContract(json: record.contract, name: record.attributesType)
                    contracts[record.bundleID, default: AppContracts()].readable[record.attributesType, default: TypeContracts()]
                        .byVersion[record.appVersion] = contract
                    let type = "\(record.bundleID) \(record.attributesType)"
                    if latest[type].map({ record.updatedAt > $0 }) ?? true {
                        latest[type] = record.updatedAt
                        contracts[record.bundleID]?.readable[record.attributesType]?.latest = record.appVersion
                    }
                } catch {
                    contracts[record.bundleID, default: AppContracts()].unreadable[record.attributesType] = error.description
                    logger.error(
                        "a stored contract cannot be read: its type's requests are refused until it is registered again",
                        metadata: ["app": "\(record.bundleID)", "attributes.type": "\(record.attributesType)", "reason": "\(error)"])
                }
            }
            return contracts
        }
    }

    package var currentDate: Date { now() }

    /// Grows with every change this process makes to what the store holds, so that a watcher (the
    /// dashboard's live pages) knows when to look again. Changes made by other instances sharing
    /// the store are not counted.
    package var revision: UInt64 { changes.load(ordering: .relaxed) }

    func noteChange() {
        changes.add(1, ordering: .relaxed)
        webhookSignal.signal()
    }

    /// The APNs environments whose tokens this server takes and sends to.
    package var environments: Set<PushEnvironment> { apns?.environments ?? Set(PushEnvironment.allCases) }
}

func randomHex(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
}
