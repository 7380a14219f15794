// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import SwiftASN1
import Synchronization
import X509

/// Certificates an origin's chain may end at besides the system's roots: a private CA, as a
/// self-hosted media server has.
public struct TrustRoots: Sendable {
    let certificates: [NIOSSLCertificate]

    /// How many certificates there are.
    public var count: Int { certificates.count }

    /// No certificates: the system's roots alone.
    public init() {
        certificates = []
    }

    /// The certificates in PEM text: each block from a line `-----BEGIN CERTIFICATE-----` to
    /// a line `-----END CERTIFICATE-----`; text outside blocks (comments, a key's block) is
    /// ignored.
    /// - Parameter pem: the PEM text.
    /// - Parameter source: names the text in an error (a file's path).
    /// - Throws: ``TrustRootsError`` when there is no certificate, a block has no end, or a
    ///   block is not a certificate.
    public init(pem: String, source: String = "the PEM text") throws {
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        var certificates: [NIOSSLCertificate] = []
        var block: [String]?
        for line in pem.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text == begin {
                guard block == nil else {
                    throw TrustRootsError(
                        "Certificate \(certificates.count + 1) in \(source) has no \(end) line before the next \(begin) line."
                    )
                }
                block = [text]
            } else if text == end, let lines = block {
                do {
                    certificates.append(
                        try NIOSSLCertificate(
                            bytes: Array((lines + [text, ""]).joined(separator: "\n").utf8), format: .pem))
                } catch {
                    throw TrustRootsError(
                        "Certificate \(certificates.count + 1) in \(source) is not a valid X.509 certificate.")
                }
                block = nil
            } else if block != nil {
                block!.append(text)
            }
        }
        if block != nil {
            throw TrustRootsError("Certificate \(certificates.count + 1) in \(source) has no \(end) line.")
        }
        guard !certificates.isEmpty else {
            throw TrustRootsError("\(source) holds no certificate: expected PEM text with \(begin) blocks.")
        }
        self.certificates = certificates
    }

    /// The certificates of a PEM file (at most 4 MiB).
    /// - Throws: ``TrustRootsError`` saying what is wrong with the file.
    public static func load(pemFile path: String) throws -> TrustRoots {
        let url = URL(fileURLWithPath: path)
        let size = (try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0
        guard size <= 4 << 20 else {
            throw TrustRootsError("\(path) is larger than 4 MiB; a CA file holds a few certificates.")
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw TrustRootsError("Cannot read the CA file \(path): \((error as NSError).localizedDescription)")
        }
        guard let text = String(data: data, encoding: .utf8) ?? String(data: data, encoding: .isoLatin1) else {
            throw TrustRootsError("\(path) is not PEM text.")
        }
        return try TrustRoots(pem: text, source: path)
    }

    /// Adds the certificates of `other`.
    public mutating func append(_ other: TrustRoots) {
        self = TrustRoots(certificates: certificates + other.certificates)
    }

    private init(certificates: [NIOSSLCertificate]) {
        self.certificates = certificates
    }
}

/// A CA file or PEM text that cannot be used as trust roots.
public struct TrustRootsError: Error, CustomStringConvertible, Sendable {
    public var message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Why a TLS connection to an origin failed, in words a user can act on.
///
/// The TLS library reports an untrusted chain, an expired certificate and an unknown issuer
/// alike (`CERTIFICATE_VERIFY_FAILED`) and a wrong name without the names the certificate
/// holds; for those, the explanation opens a second connection that only fetches the
/// origin's certificate chain (no verification, no request), and reads the cause from it.
enum OriginTLSFailure {
    /// The kinds of TLS failure.
    enum Kind: Equatable {
        /// The chain did not verify: untrusted, expired, not yet valid.
        case certificateNotTrusted
        /// The certificate does not name the host.
        case wrongName
        /// The server's first bytes were not TLS (an http port asked for with https).
        case notTLS
        /// The handshake failed otherwise: an alert from the server, no common protocol.
        case handshakeFailed(String)
    }

    /// The kind of TLS failure `error` is, or `nil` when it is no TLS failure.
    static func kind(of error: any Error) -> Kind? {
        if let error = error as? NIOSSLExtraError,
            error == .failedToValidateHostname || error == .serverHostnameImpossibleToMatch
        {
            return .wrongName
        }
        // Only a failed handshake: other TLS errors (an unclean shutdown, a connection cut
        // after the handshake) are a connection failing, retried as any other.
        guard let error = error as? NIOSSLError, case .handshakeFailed(let underlying) = error else { return nil }
        let reason = libraryReason(in: "\(underlying)") ?? "\(underlying)"
        switch reason {
        case "CERTIFICATE_VERIFY_FAILED": return .certificateNotTrusted
        case "WRONG_VERSION_NUMBER", "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG": return .notTLS
        default: return .handshakeFailed(reason)
        }
    }

    /// The reason code of a BoringSSL error text (`…:OPENSSL_internal:WRONG_VERSION_NUMBER at …`).
    static func libraryReason(in text: String) -> String? {
        guard let marker = text.range(of: "OPENSSL_internal:", options: .backwards) else { return nil }
        let reason = text[marker.upperBound...].prefix { $0.isUppercase || $0.isNumber || $0 == "_" }
        return reason.isEmpty ? nil : String(reason)
    }

    /// A sentence saying why the TLS connection to `url` failed, starting with what failed
    /// (`certificate not trusted: …`) and saying what to do.
    static func explain(_ kind: Kind, url: URL, trustRoots: TrustRoots, timeout: Duration) async -> String {
        let host = url.host ?? "the origin"
        let port = url.port ?? 443
        let authority = "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        switch kind {
        case .notTLS:
            return "TLS handshake failed: \(authority) did not answer in TLS (is it an http:// port?)."
        case .handshakeFailed(let reason):
            return "TLS handshake failed: \(authority) refused it (\(reason))."
        case .certificateNotTrusted, .wrongName:
            let chain = try? await peerChain(host: host, port: port, timeout: timeout)
            guard let leaf = chain?.first else {
                return kind == .wrongName
                    ? "certificate not valid for \(host): it names another host."
                    : "certificate not trusted: the certificate of \(authority) does not verify (not issued by a trusted CA, expired or not yet valid)."
            }
            let now = Date()
            let dates = Date.ISO8601FormatStyle(dateSeparator: .dash, dateTimeSeparator: .space, timeZone: .gmt)
            if kind == .wrongName {
                return
                    "certificate not valid for \(host): the certificate of \(authority) names \(names(in: leaf).joined(separator: ", ").prefix(300))."
            }
            if now > leaf.notValidAfter {
                return
                    "certificate not trusted: the certificate of \(authority) expired on \(leaf.notValidAfter.formatted(dates))."
            }
            if now < leaf.notValidBefore {
                return
                    "certificate not trusted: the certificate of \(authority) is not valid before \(leaf.notValidBefore.formatted(dates)) (is this machine's clock right?)."
            }
            let issuer = "\(leaf.issuer)".prefix(200)
            let advice =
                "add its CA's certificate to the fetcher's trust roots (HTTPOriginFetcher.Configuration.trustRoots)"
            if leaf.issuer == leaf.subject {
                return "certificate not trusted: the certificate of \(authority) is self-signed (\(issuer)); \(advice)."
            }
            let extra =
                trustRoots.count > 0
                ? "neither a system root nor one of the \(trustRoots.count) added" : "not a system root"
            return
                "certificate not trusted: the certificate of \(authority) is issued by \(issuer), which is \(extra); \(advice)."
        }
    }

    /// The host names and addresses a certificate is for.
    static func names(in certificate: Certificate) -> [String] {
        var names: [String] = []
        if let alternatives = try? certificate.extensions.subjectAlternativeNames {
            for name in alternatives {
                switch name {
                case .dnsName(let dns): names.append(dns)
                case .ipAddress(let octets): names.append(addressText(Array(octets.bytes)))
                default: break
                }
            }
        }
        return names.isEmpty ? ["\(certificate.subject)"] : names
    }

    private static func addressText(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        var groups: [String] = []
        var index = 0
        while index + 1 < bytes.count {
            groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
            index += 2
        }
        return groups.joined(separator: ":")
    }

    /// The certificate chain `host:port` presents, fetched by a handshake that verifies
    /// nothing and sends nothing after it.
    static func peerChain(host: String, port: Int, timeout: Duration) async throws -> [Certificate] {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .noHostnameVerification
        let context = try NIOSSLContext(configuration: configuration)
        let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
        let group = MultiThreadedEventLoopGroup.singleton
        let promise = group.next().makePromise(of: [NIOSSLCertificate].self)
        let settled = Settled()
        let channel = try await ClientBootstrap(group: group)
            .connectTimeout(TimeAmount(timeout))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = try NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host) {
                        (chain: [NIOSSLCertificate], verified: EventLoopPromise<NIOSSLVerificationResult>) in
                        if settled.first() { promise.succeed(chain) }
                        // The chain is all that is wanted: end the handshake here.
                        verified.succeed(NIOSSLVerificationResult.failed)
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: host, port: port).get()
        channel.closeFuture.whenComplete { _ in
            if settled.first() {
                promise.fail(TrustRootsError("The origin closed the connection before sending a certificate."))
            }
        }
        let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            if settled.first() { promise.fail(TrustRootsError("No certificate within the timeout.")) }
        }
        defer {
            deadline.cancel()
            channel.close(mode: .all, promise: nil)
        }
        let chain = try await promise.futureResult.get()
        return try chain.map { try Certificate(derEncoded: try $0.toDERBytes()) }
    }

    /// Lets the first of several completions through.
    private final class Settled: Sendable {
        private let done = Mutex(false)
        func first() -> Bool {
            done.withLock { done in
                defer { done = true }
                return !done
            }
        }
    }
}
