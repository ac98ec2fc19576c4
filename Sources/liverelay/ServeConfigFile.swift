import APNs
import APNsEmulator
import ArgumentParser
import Crypto
import Foundation
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SimulatedDevices
import UnixSignals
import WebPages

/// `--config`: the same settings as the options, in a file. Options and environment variables win.
///
///     {"apns": {"keyFile": "…", "keyID": "…", …}, "budget": {"priority10PerHour": 12, "frequentPriority10PerHour": 120},
///      "apps": [{"bundleID": "…", "keyFile": "…", "keyID": "…", "teamID": "…", "contracts": [{…}]}],
///      "contracts": [{"name": "DeliveryAttributes", "attributes": {…}, "contentState": {…}}]}
///
/// The top-level contracts are the first app's (the one the flags name, else the first listed).
struct ServeConfigFile: APIRequestBody {
    static let fields = ["database", "apns", "apps", "budget", "contracts"]
    /// Where the data lives (`--database` and `LIVERELAY_DATABASE` win).
    var database: String?
    static let appFields = ["bundleID", "keyFile", "keyID", "teamID", "contracts"]
    var apns: [String: String] = [:]
    /// More apps, each with its key file (read now).
    var apps: [AppRegistration] = []
    var budget: BudgetPolicy?
    /// Contracts registered on every start: the first app's, and each listed app's by bundle ID.
    var contracts: [ActivityContract] = []
    var appContracts: [String: [ActivityContract]] = [:]

    init(path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("config: cannot read \(path)") }
        do {
            self = try Self.decode(json: [UInt8](data))
            // Schemas keep their field order, so they are read from the JSON as written rather than decoded.
            let json = try JSONValue(parsing: [UInt8](data))
            contracts = try Self.contracts(json["contracts"], path: "contracts")
            for (index, entry) in (json["apps"]?.arrayElements ?? []).enumerated() {
                guard let bundleID = entry["bundleID"]?.stringValue else { continue }
                appContracts[bundleID, default: []] += try Self.contracts(entry["contracts"], path: "apps[\(index)].contracts")
            }
        } catch {
            throw ValidationError("config \(path): \(error)")
        }
    }

    private static func contracts(_ given: JSONValue?, path: String) throws -> [ActivityContract] {
        guard let given, given != .null else { return [] }
        guard let items = given.arrayElements else { throw JSONFieldError(code: "wrong_type", message: "must be an array of contracts", field: path) }
        var contracts: [ActivityContract] = []
        for (index, item) in items.enumerated() {
            do { contracts.append(try ActivityContract(json: item, path: "\(path)[\(index)]")) } catch { throw JSONFieldError(error) }
        }
        return contracts
    }

    init(from decoder: any Decoder) throws {
        let root = try decoder.container(keyedBy: JSONKey.self)
        if root.contains(JSONKey("apns")), try !root.decodeNil(forKey: JSONKey("apns")) {
            let apnsBody = try root.superDecoder(forKey: JSONKey("apns"))
            try apnsBody.refuseUnknownKeys(Self.apnsFields.map(\.key))
            let settings = try apnsBody.container(keyedBy: JSONKey.self)
            for (key, _) in Self.apnsFields {
                if let value = try settings.decodeIfPresent(String.self, forKey: JSONKey(key)) { apns[key] = value }
            }
        }
        if root.contains(JSONKey("apps")), try !root.decodeNil(forKey: JSONKey("apps")) {
            var entries = try root.nestedUnkeyedContainer(forKey: JSONKey("apps"))
            while !entries.isAtEnd {
                let entry = try entries.superDecoder()
                try entry.refuseUnknownKeys(Self.appFields)
                let fields = try entry.container(keyedBy: JSONKey.self)
                let keyFile = try fields.requireNonEmptyString(JSONKey("keyFile"))
                guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
                    throw DecodingError.dataCorruptedError(forKey: JSONKey("keyFile"), in: fields, debugDescription: "cannot be read at \(keyFile)")
                }
                let bundle = try fields.requireNonEmptyString(JSONKey("bundleID"))
                do {
                    apps.append(
                        AppRegistration(
                            bundleID: try BundleID(bundle), teamID: try fields.requireNonEmptyString(JSONKey("teamID")),
                            keyID: try fields.requireNonEmptyString(JSONKey("keyID")), signingKey: pem))
                } catch let error as LiveActivityValidationError {
                    throw DecodingError.dataCorruptedError(forKey: JSONKey("bundleID"), in: fields, debugDescription: error.message)
                }
            }
        }
        database = try root.decodeIfPresent(String.self, forKey: JSONKey("database"))
        if root.contains(JSONKey("budget")), try !root.decodeNil(forKey: JSONKey("budget")) {
            let budgetBody = try root.superDecoder(forKey: JSONKey("budget"))
            try budgetBody.refuseUnknownKeys(["priority10PerHour", "frequentPriority10PerHour"])
            let numbers = try budgetBody.container(keyedBy: JSONKey.self)
            var policy = BudgetPolicy()
            if let value = try numbers.integer(JSONKey("priority10PerHour"), in: BudgetPolicy.allowed) { policy.priority10PerHour = value }
            if let value = try numbers.integer(JSONKey("frequentPriority10PerHour"), in: BudgetPolicy.allowed) {
                policy.frequentPriority10PerHour = value
            }
            budget = policy
        }
    }

    /// Config keys and the environment variables that take precedence over them.
    static let apnsFields: [(key: String, variable: String)] = [
        ("keyFile", "LIVERELAY_APNS_KEY_FILE"), ("keyID", "LIVERELAY_APNS_KEY_ID"), ("teamID", "LIVERELAY_APNS_TEAM_ID"),
        ("bundleID", "LIVERELAY_APNS_BUNDLE_ID"), ("environment", "LIVERELAY_APNS_ENVIRONMENT"), ("host", "LIVERELAY_APNS_HOST"),
        ("caFile", "LIVERELAY_APNS_CA_FILE"),
    ]

    func fill(_ connection: inout ConnectionOptions) {
        func pick(_ key: String, _ variable: String) -> String? {
            ProcessInfo.processInfo.environment[variable].flatMap { $0.isEmpty ? nil : $0 } == nil ? apns[key] : nil
        }
        connection.keyFile = connection.keyFile ?? pick("keyFile", "LIVERELAY_APNS_KEY_FILE")
        connection.keyID = connection.keyID ?? pick("keyID", "LIVERELAY_APNS_KEY_ID")
        connection.teamID = connection.teamID ?? pick("teamID", "LIVERELAY_APNS_TEAM_ID")
        connection.bundleID = connection.bundleID ?? pick("bundleID", "LIVERELAY_APNS_BUNDLE_ID")
        connection.environment = connection.environment ?? pick("environment", "LIVERELAY_APNS_ENVIRONMENT")
        connection.host = connection.host ?? pick("host", "LIVERELAY_APNS_HOST")
        connection.caFile = connection.caFile ?? pick("caFile", "LIVERELAY_APNS_CA_FILE")
    }
}

extension ConnectionOptions {
    /// Whether a signing key was given, by option or environment variable.
    var hasCredentials: Bool {
        keyFile != nil || ProcessInfo.processInfo.environment["LIVERELAY_APNS_KEY_FILE"].map { !$0.isEmpty } == true
    }

    /// The one app the flags (or `LIVERELAY_APNS_*`) name, with their key.
    func appRegistration() throws -> AppRegistration {
        let key = try clientConfiguration().signingKey
        let path = keyFile ?? ProcessInfo.processInfo.environment["LIVERELAY_APNS_KEY_FILE"] ?? ""
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else { throw ValidationError("key-file: cannot read \(path)") }
        return AppRegistration(bundleID: try resolvedBundleID(), teamID: key.teamID, keyID: key.keyID, signingKey: pem)
    }
}
