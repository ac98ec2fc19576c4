import HTTPTypes
import HummingbirdTesting
import LiveActivityKit
import NIOCore

extension TestClientProtocol {
    /// A request with a JSON body (given as text), answered with the status and the body parsed.
    func sendJSON(
        _ method: HTTPRequest.Method, _ uri: String, _ json: String? = nil, headers: HTTPFields = [:]
    ) async throws -> (status: Int, body: JSONValue?) {
        var headers = headers
        if json != nil, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        return try await execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) }) { response in
            (Int(response.status.code), response.body.readableBytes == 0 ? nil : try JSONValue(parsing: response.body.readableBytesView))
        }
    }
}
