import HTTPTypes
import HummingbirdTesting
import LiveActivityKit
import NIOCore

extension TestClientProtocol {
    /// A request with a JSON body (given as text), answered with the status and the body parsed.
    func sendJSON(_ method: HTTPRequest.Method, _ uri: String, _ json: String? = nil) async throws -> (status: Int, body: JSONValue?) {
        try await execute(uri: uri, method: method, body: json.map { ByteBuffer(string: $0) }) { response in
            (Int(response.status.code), response.body.readableBytes == 0 ? nil : try JSONValue(parsing: response.body.readableBytesView))
        }
    }
}
