// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
public import Foundation
import SwiftASN1
import X509

/// A certificate authority made at run time for HTTPS test origins (no key is committed):
/// a self-signed P-256 CA that issues server certificates for any names and validity.
public struct TestCertificateAuthority: Sendable {
    /// A server's certificate chain (leaf first) and private key, both in PEM.
    public struct Identity: Sendable {
        public var certificateChainPEM: [String]
        public var privateKeyPEM: String
    }

    /// The CA's certificate in PEM: what a client adds as a trust root.
    public let certificatePEM: String
    private let name: DistinguishedName
    /// The CA's private key, raw (the key type itself is not `Sendable`).
    private let rawKey: Data
    private var key: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: rawKey) }

    /// The CA every test of a process shares (made once, about a millisecond).
    public static let shared = try! TestCertificateAuthority(commonName: "MediaCache Test CA")

    /// Makes a new self-signed CA valid from an hour ago for ten years.
    public init(commonName: String) throws {
        let key = P256.Signing.PrivateKey()
        rawKey = key.rawRepresentation
        name = try DistinguishedName { CommonName(commonName) }
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: now - 3600, notValidAfter: now + 10 * 365 * 86400, issuer: name, subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: .init(key.publicKey))
            },
            issuerPrivateKey: .init(key))
        certificatePEM = try certificate.serializeAsPEM().pemString
    }

    /// A server certificate for `names` (host names, or IPv4/IPv6 literals), valid from
    /// `notValidBefore` to `notValidAfter` (by default an hour ago to a day from now).
    public func issue(
        for names: [String] = ["localhost", "127.0.0.1", "::1"],
        notValidBefore: Date = Date() - 3600, notValidAfter: Date = Date() + 86400
    ) throws -> Identity {
        try Self.serverIdentity(
            for: names, subject: try DistinguishedName { CommonName(names.first ?? "server") },
            issuer: (name, key), notValidBefore: notValidBefore, notValidAfter: notValidAfter)
    }

    /// A self-signed server certificate for `names` (its own issuer, trusted by nobody).
    public static func selfSigned(for names: [String] = ["localhost", "127.0.0.1", "::1"]) throws -> Identity {
        try serverIdentity(
            for: names, subject: try DistinguishedName { CommonName("Self-Signed Media Server") },
            issuer: nil, notValidBefore: Date() - 3600, notValidAfter: Date() + 86400)
    }

    /// A new key and a server certificate for it, signed by `issuer` (`nil`: by itself).
    private static func serverIdentity(
        for names: [String], subject: DistinguishedName,
        issuer: (name: DistinguishedName, key: P256.Signing.PrivateKey)?,
        notValidBefore: Date, notValidAfter: Date
    ) throws -> Identity {
        let serverKey = P256.Signing.PrivateKey()
        let alternativeNames = names.map { name -> GeneralName in
            addressBytes(name).map { .ipAddress(ASN1OctetString(contentBytes: $0[...])) } ?? .dnsName(name)
        }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(serverKey.publicKey),
            notValidBefore: notValidBefore, notValidAfter: notValidAfter, issuer: issuer?.name ?? subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(alternativeNames)
            },
            issuerPrivateKey: .init(issuer?.key ?? serverKey))
        return Identity(
            certificateChainPEM: [try certificate.serializeAsPEM().pemString],
            privateKeyPEM: serverKey.pemRepresentation)
    }
}

/// The bytes of an IPv4 or IPv6 address literal, or `nil` for a host name.
private func addressBytes(_ text: String) -> [UInt8]? {
    var v4 = in_addr()
    if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
    var v6 = in6_addr()
    if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
    return nil
}
