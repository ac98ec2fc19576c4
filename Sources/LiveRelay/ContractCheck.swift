import LiveActivityKit

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

/// An app's contracts by attributes type, as the store holds them. A stored contract that no
/// longer reads (kept by a release that accepted what is refused now) is never left out silently:
/// requests of its type are refused, naming why, until the app registers the contract again, so
/// nothing is sent unchecked.
struct AppContracts: Sendable {
    var readable: [String: ActivityContract] = [:]
    /// Why each unreadable contract does not read, by attributes type.
    var unreadable: [String: String] = [:]

    /// The contract `attributesType`'s requests are checked against; nil when none is registered.
    func contract(for attributesType: String) throws(RelayError) -> ActivityContract? {
        if let reason = unreadable[attributesType] {
            throw RelayError(
                .conflict, .contractUnreadable,
                message:
                    "the stored contract of \(attributesType) cannot be read (\(reason)): register it again with PUT /v1/contracts/\(attributesType)",
                field: "attributesType")
        }
        return readable[attributesType]
    }
}
