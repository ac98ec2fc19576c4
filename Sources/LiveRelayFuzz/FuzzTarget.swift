import Foundation
import JSONAPI
import JSONDecoderDifferential
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP

/// One fuzz input through everything that reads untrusted JSON: the JSON value parser, the APNs
/// payload reader and its validation for both destinations, and every request body the API reads.
/// An input whose first byte has its high bit set (never JSON) goes instead, as an APNs server's
/// bytes, through the client's HTTP/2 (`fuzzServerBytes`, slower an input). Refusals
/// are the expected outcome; a finding is a crash, a sanitizer report, or a contract check that
/// decides otherwise than `JSONDecoder` (a failed precondition).
func fuzzOneInput(_ bytes: UnsafeRawBufferPointer) {
    let input = Array(bytes)
    if let first = input.first, first >= 0x80 {
        fuzzServerBytes(input)
        return
    }
    decideAsJSONDecoder(input)
    if let payload = try? LiveActivityPayload(parsing: input) {
        _ = try? payload.encoded(for: .device)
        _ = try? payload.encoded(for: .broadcast)
        _ = payload.event
        _ = payload.json.serialized
    }
    guard let json = try? JSONValue(parsing: input) else { return }
    // A round trip keeps every literal.
    precondition((try? JSONValue(parsing: json.serialized)) == json, "a JSON value does not survive its own serialization")
    // The API's start, update and end bodies.
    _ = try? StartRequest(json: json)
    for event in [LiveActivityPayload.Event.update, .end] { _ = try? ChangeRequest(event: event, json: json) }
    // A contract as apps register it, and JSON checked against one: both come from outside.
    if let contract = try? ActivityContract(json: json, name: "Fuzzed") {
        precondition((try? ActivityContract(json: contract.json)) == contract, "a contract does not survive its own JSON")
        try? contract.checkContentState(json)
    }
    let every = contractOfEveryType()
    try? every.checkContentState(json)
    _ = SwiftType.structure(every.contentState).dateWarnings(json)
    _ = try? PushToStartBody.decode(json: input)
    _ = try? ActivityTokenBody.decode(json: input)
    _ = try? EndedBody.decode(json: input)
    _ = try? WebhookPatchBody.decode(json: input)
    _ = try? RedeliverBody.decode(json: input)
    // An endpoint's address, as a key holder gives it: checked before anything is posted to it.
    if let body = try? WebhookBody.decode(json: input) {
        for addresses in WebhookAddresses.allCases { _ = addresses.refusal(ofURL: body.registration.url) }
        _ = WebhookAddresses.kind(ofHost: body.registration.url)
    }
    // The input itself as an endpoint's URL: what is accepted can be connected to (a port out of
    // range trapped in the network code).
    if case .success(let target) = WebhookTarget.parse(String(decoding: input, as: UTF8.self)) {
        precondition((1...65_535).contains(target.port) && !target.host.isEmpty, "an endpoint's URL accepted that cannot be posted to")
        _ = WebhookAddresses.kind(ofHost: target.host)
    }
}

/// The contract checks decide as `JSONDecoder` (`DecoderVerdicts`): the input as a text for each
/// sample schema, and a schema and text generated from the input's hash, so that replaying the
/// corpus also replays as many generated cases.
func decideAsJSONDecoder(_ input: [UInt8]) {
    for schema in SwiftType.twinSamples {
        let verdicts = try! DecoderVerdicts(input, as: schema)
        precondition(verdicts.agree, "the contract check and JSONDecoder disagree for \(schema.contractJSON): \(verdicts)")
    }
    let generated = DifferentialCase(seed: input.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 })
    let verdicts = try! DecoderVerdicts(generated.text, as: generated.schema)
    precondition(verdicts.agree && generated.readerIsRight(verdicts), "\(generated): \(verdicts)")
}

/// A contract with every kind of type, to check fuzzed JSON against. Made for each input: a global
/// holding indirect enums reads as a leak to LeakSanitizer at exit.
func contractOfEveryType() -> ActivityContract {
    ActivityContract(
        attributesType: "Fuzz", attributes: SwiftStruct("Fuzz", []),
        contentState: SwiftStruct(
            "ContentState",
            [
                .init("s", .optional(.string)), .init("i", .optional(.int)), .init("d", .optional(.double)), .init("b", .optional(.bool)),
                .init("t", .optional(.date)), .init("r", .optional(.closedRangeOfDate)), .init("u", .optional(.url)),
                .init("e", .optional(.stringEnum(["a", "b"]))), .init("n", .optional(.intEnum([1, 2]))), .init("a", .optional(.array(.int))),
                .init("o", .optional(.structure(SwiftStruct("Nested", [.init("x", .string)])))),
            ]))
}

#if FUZZING
    /// libFuzzer's entry point, which its runtime refers to.
    @_cdecl("LLVMFuzzerTestOneInput")
    package func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOneInput(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }

    /// libFuzzer's driver (in the runtime `-sanitize=fuzzer` links): SwiftPM gives the program its
    /// own `main`, which hands over to it.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt
#endif

@main
enum LiveRelayFuzz {
    /// With `-D FUZZING` (and `-sanitize=fuzzer,address`): libFuzzer, with its own arguments.
    /// Otherwise: replays the files or folders given (a kept corpus, a crash to reproduce)
    /// through the same function, so CI can run the corpus on every build.
    static func main() throws {
        #if FUZZING
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(runFuzzerDriver(&argc, &argv, fuzzerTestOneInput))
        #else
            var replayed = 0
            for path in CommandLine.arguments.dropFirst() {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                    FileHandle.standardError.write(Data("no such file: \(path)\n".utf8))
                    exit(64)
                }
                let files =
                    isDirectory.boolValue
                    ? try FileManager.default.contentsOfDirectory(atPath: path).sorted().map { path + "/" + $0 } : [path]
                for file in files {
                    let data = try Data(contentsOf: URL(fileURLWithPath: file))
                    data.withUnsafeBytes { fuzzOneInput($0) }
                    replayed += 1
                }
            }
            print("replayed \(replayed) inputs")
        #endif
    }
}
