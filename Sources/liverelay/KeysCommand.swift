import ArgumentParser
import Crypto
import Foundation

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Signing keys for provider tokens.", subcommands: [Generate.self])

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new P-256 .p8 key (PKCS#8 PEM, like Apple's) for the emulator and tests, and print a key id.")

        @Option(help: ArgumentHelp("Where to write the key. Default: AuthKey_<key id>.p8 here.", valueName: "path"))
        var output: String?

        func run() throws {
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
            let keyID = String((0..<10).map { _ in alphabet.randomElement()! })
            let path = output ?? "AuthKey_\(keyID).p8"
            guard !FileManager.default.fileExists(atPath: path) else {
                throw ValidationError("output: \(path) exists; not overwriting a key")
            }
            let key = P256.Signing.PrivateKey()
            guard FileManager.default.createFile(
                atPath: path, contents: Data((key.pemRepresentation + "\n").utf8), attributes: [.posixPermissions: 0o600])
            else {
                throw ValidationError("output: cannot write \(path)")
            }
            print("key file: \(path)")
            print("key id: \(keyID)")
        }
    }
}
