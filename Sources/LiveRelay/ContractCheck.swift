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
