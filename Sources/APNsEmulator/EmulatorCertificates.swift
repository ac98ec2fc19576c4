import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A certificate authority made at start, and a server certificate it signed for the loopback
/// names (`localhost`, `127.0.0.1`, `::1`, and any extra names asked for). Clients trust the
/// emulator through the CA's PEM, which `writeCertificateAuthority(to:)` puts on disk.
public struct EmulatorCertificates: Sendable {
    /// The CA certificate, PEM.
    public let certificateAuthorityPEM: String
    let serverCertificateDER: [UInt8]
    let serverKeyPEM: String

    /// Makes a new CA (valid ten years) and a server certificate (valid one year), both P-256.
    public static func generate(extraHostNames: [String] = [], now: Date = Date()) throws -> EmulatorCertificates {
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            OrganizationName("LiveRelay")
            CommonName("LiveRelay APNs emulator CA \(UUID().uuidString.prefix(8))")
        }
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(10 * 365 * 86400),
            issuer: caName, subject: caName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(caKey))

        let serverKey = P256.Signing.PrivateKey()
        var names: [GeneralName] = [
            .dnsName("localhost"),
            .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
            .ipAddress(ASN1OctetString(contentBytes: ArraySlice([UInt8](repeating: 0, count: 15) + [1]))),
        ]
        for name in extraHostNames where name != "localhost" {
            if let bytes = ipAddressBytes(name) {
                names.append(.ipAddress(ASN1OctetString(contentBytes: ArraySlice(bytes))))
            } else {
                names.append(.dnsName(name))
            }
        }
        let server = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(365 * 86400),
            issuer: caName, subject: try DistinguishedName { CommonName("localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
            },
            issuerPrivateKey: .init(caKey))

        var serializer = DER.Serializer()
        try serializer.serialize(server)
        return EmulatorCertificates(
            certificateAuthorityPEM: try ca.serializeAsPEM().pemString,
            serverCertificateDER: serializer.serializedBytes,
            serverKeyPEM: serverKey.pemRepresentation)
    }

    /// Writes the CA certificate as PEM, for clients to trust (`--ca-file`, `curl --cacert`).
    public func writeCertificateAuthority(to path: String) throws {
        try Data(certificateAuthorityPEM.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// Writes the server's certificate and key as PEM, for another server to present them (the
    /// client's tests against nghttpd).
    package func writeServerIdentity(certificateTo certificatePath: String, keyTo keyPath: String) throws {
        let base64 = Data(serverCertificateDER).base64EncodedString(options: .lineLength64Characters)
            .replacingOccurrences(of: "\r\n", with: "\n")
        let certificate = "-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n"
        try Data(certificate.utf8).write(to: URL(fileURLWithPath: certificatePath), options: .atomic)
        try Data(serverKeyPEM.utf8).write(to: URL(fileURLWithPath: keyPath), options: .atomic)
    }

    /// A server TLS configuration presenting this certificate and offering HTTP/2 by ALPN.
    func serverTLSConfiguration() throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: serverCertificateDER, format: .der))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(serverKeyPEM.utf8), format: .pem)))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        return tls
    }
}

private func ipAddressBytes(_ text: String) -> [UInt8]? {
    var v4 = in_addr()
    if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
    var v6 = in6_addr()
    if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
    return nil
}
