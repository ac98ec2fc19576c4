import Foundation
import Hummingbird
import LiveActivityKit

extension Request {
    /// The body as a checked JSON object.
    package func jsonObject(fields: [String], context: some RequestContext) async throws -> JSONBodyReader {
        let buffer = try await body.collect(upTo: context.maxUploadSize)
        return try JSONBodyReader(buffer.readableBytes == 0 ? .object([]) : JSONBodyReader.parse(buffer.readableBytesView), fields: fields)
    }
}
