import LiveActivityKit
import LiveRelayStore

/// A request's JSON against the app's contract: what the widget would not decode is refused
/// (`422`, naming the API field and the decoder's reason, as the iPhone logs when it drops such a
/// push); a date that decodes but was probably meant in another unit comes back as a warning.
enum ContractCheck {
    static func attributes(_ json: JSONValue, _ contract: ActivityContract) throws(RelayError) -> [String] {
        do {
            try contract.checkAttributes(json)
        } catch {
            throw RelayError(error, in: "attributes")
        }
        return warnings(SwiftType.structure(contract.attributes).dateWarnings(json), in: "attributes")
    }

    static func contentState(_ json: JSONValue, _ contract: ActivityContract) throws(RelayError) -> [String] {
        do {
            try contract.checkContentState(json)
        } catch {
            throw RelayError(error, in: "contentState")
        }
        return warnings(SwiftType.structure(contract.contentState).dateWarnings(json), in: "contentState")
    }

    private static func warnings(_ found: [(path: String, hint: String)], in field: String) -> [String] {
        found.map { "\(field).\($0.path): \($0.hint)" }
    }
}

/// An app's contracts by attributes type and app version, as the store holds them. A stored
/// contract that no longer reads (kept by a release that accepted what is refused now) is never
/// left out silently: requests of its type are refused, naming why, until the app registers the
/// contract again, so nothing is sent unchecked.
struct AppContracts: Sendable {
    /// By attributes type, then app version (`ContractRecord.anyVersion`: for any version).
    var readable: [String: TypeContracts] = [:]
    /// Why each unreadable contract does not read, by attributes type.
    var unreadable: [String: String] = [:]

    /// The contracts `attributesType`'s requests are checked against; none when none is registered.
    func contracts(for attributesType: String) throws(RelayError) -> TypeContracts {
        if let reason = unreadable[attributesType] {
            throw RelayError(
                .conflict, .contractUnreadable,
                message:
                    "the stored contract of \(attributesType) cannot be read (\(reason)): register it again with PUT /v1/contracts/\(attributesType)",
                field: "attributesType")
        }
        return readable[attributesType] ?? TypeContracts()
    }

    /// Whether a type of the app has contracts of several versions: its changes are then checked
    /// against the version of each device, which the store reads for them.
    var hasSeveralVersions: Bool { readable.values.contains { $0.byVersion.count > 1 } }
}

/// One attributes type's contracts by app version, and which decodes a device's push.
struct TypeContracts: Sendable {
    /// By app version; `ContractRecord.anyVersion` holds the one for any version.
    var byVersion: [String: ActivityContract] = [:]
    /// The version registered last, whose contract a device that never said its version is held to.
    var latest: String?

    /// The contract a device on `version` decodes with: its version's, else the one for any
    /// version; a device that did not say its version is held to the one for any version, else
    /// the latest registered. Nil: nothing is known, and nothing is checked.
    func contract(forDevicesOn version: String?) -> ActivityContract? {
        if let version, let own = byVersion[version] { return own }
        if let any = byVersion[ContractRecord.anyVersion] { return any }
        return version == nil ? latest.flatMap { byVersion[$0] } : nil
    }

    /// Checks a request's JSON (`check`: `ContractCheck`'s) against the contract of each app
    /// version in its audience (devices by version; nil or empty when unknown yet: every version
    /// registered). Refused (`422`, the first version's reason) when no version decodes it;
    /// otherwise the warnings, one naming each version that cannot decode it and how many of its
    /// devices drop it, and those versions (`VersionCheck.refused`), which `versions: decodable`
    /// leaves out.
    func check(
        audience: [String?: Int]?, versions choice: VersionsChoice, _ check: (ActivityContract) throws(RelayError) -> [String]
    ) throws(RelayError) -> VersionCheck {
        let counted: [(version: String?, devices: Int?)] =
            if let audience, !audience.isEmpty {
                audience.sorted { ($0.key ?? "") < ($1.key ?? "") }.map { ($0.key, $0.value) }
            } else {
                byVersion.keys.sorted().map { ($0, nil) }
            }
        var result = VersionCheck()
        var failures: [(version: String?, devices: Int?, error: RelayError)] = []
        var decodes = false
        for (version, devices) in counted {
            guard let contract = contract(forDevicesOn: version) else {
                decodes = true
                continue
            }
            do throws(RelayError) {
                let warnings = try check(contract)
                decodes = true
                for warning in warnings where !result.warnings.contains(warning) { result.warnings.append(warning) }
            } catch {
                failures.append((version, devices, error))
            }
        }
        guard let first = failures.first else { return result }
        func named(_ failure: (version: String?, devices: Int?, error: RelayError)) -> String {
            let version =
                switch failure.version {
                case nil: "devices that did not say their app version"
                case ContractRecord.anyVersion: "the contract for any app version"
                case let version?: "app version \(version)"
                }
            return version + (failure.devices.map { " (\($0) device\($0 == 1 ? "" : "s"))" } ?? "")
        }
        guard decodes else {
            // One contract, one reason: as the check says it. Several: which versions refused.
            guard counted.count > 1 else { throw first.error }
            throw RelayError(
                first.error.kind, first.error.code,
                message: first.error.message + "; no app version decodes it: " + failures.map(named).joined(separator: ", "),
                field: first.error.field)
        }
        for failure in failures {
            result.refused.insert(failure.version)
            let fate = choice == .decodable ? "not sent to them (versions: decodable)" : "their devices drop it"
            result.warnings.append(
                "\(named(failure)) cannot decode it: \(failure.error.field.map { "\($0): " } ?? "")\(failure.error.message); \(fate)")
        }
        return result
    }
}

/// What `TypeContracts.check` found: the warnings, and the app versions that cannot decode the
/// request (nil: devices that did not say theirs).
struct VersionCheck: Sendable {
    var warnings: [String] = []
    var refused: Set<String?> = []

    /// Whether a device on `version` is sent the request, as `choice` says.
    func sends(to version: String?, _ choice: VersionsChoice) -> Bool { choice == .all || !refused.contains(version) }
}
