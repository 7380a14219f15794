// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCacheHTTPFields

/// The digests origins send (RFC 9530's `Repr-Digest` and `Content-Digest`, S3's and GCS's
/// fields): known values read, unknown algorithms and malformed values left out, and any
/// input, however mangled, giving only digests of their algorithm's length.
@Suite(.stallLimit, .cpuBound) struct OriginDigestTests {
    /// RFC 9530 §B's content, `{"hello": "world"}`, and its digests worked out here.
    static let content = Array(#"{"hello": "world"}"#.utf8)
    static let sha256 = Array(SHA256.hash(data: content))
    static let sha512 = Array(SHA512.hash(data: content))
    static let md5 = Array(Insecure.MD5.hash(data: content))

    static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    @Test func reprDigestMembersOfKnownAlgorithmsAreRead() {
        let value = "sha-256=:\(Self.base64(Self.sha256)):, unixsum=30637, sha-512=:\(Self.base64(Self.sha512)):"
        let found = OriginDigest.digests(in: [("Repr-Digest", value)], wholeContent: false)
        #expect(
            Set(found) == [
                OriginDigest(algorithm: .sha256, value: Self.sha256, field: "Repr-Digest"),
                OriginDigest(algorithm: .sha512, value: Self.sha512, field: "Repr-Digest"),
            ])
        #expect(found.first?.text == "sha-512=:\(Self.base64(Self.sha512)):")
        // A member that is not a byte sequence, or of the wrong length, is left out alone.
        let odd = OriginDigest.digests(
            in: [("repr-digest", "sha-256=abc, sha-512=:\(Self.base64(Self.sha512)):")], wholeContent: false)
        #expect(odd.map(\.algorithm) == [.sha512])
        #expect(OriginDigest.digests(in: [("Repr-Digest", "sha-256=:AAAA:")], wholeContent: false).isEmpty)
        // Not a dictionary at all: nothing.
        #expect(
            OriginDigest.digests(in: [("Repr-Digest", "sha-256=:\(Self.base64(Self.sha256))")], wholeContent: false)
                .isEmpty)
        // Two lines read as one list.
        let lines = OriginDigest.digests(
            in: [("Repr-Digest", "sha-256=:\(Self.base64(Self.sha256)):"), ("Repr-Digest", "md5=:AA==:")],
            wholeContent: false)
        #expect(lines.map(\.algorithm) == [.sha256])
    }

    @Test func contentDigestCountsOnlyForAWholeAnswer() {
        let fields = [("Content-Digest", "sha-256=:\(Self.base64(Self.sha256)):")]
        #expect(OriginDigest.digests(in: fields, wholeContent: false).isEmpty)
        #expect(OriginDigest.digests(in: fields, wholeContent: true).map(\.field) == ["Content-Digest"])
    }

    @Test func s3ChecksumsOfOnePartUploadsAreRead() {
        let crc = "4waSgw=="  // CRC-32C of "123456789", 0xE3069283, big-endian
        let found = OriginDigest.digests(
            in: [("x-amz-checksum-sha256", Self.base64(Self.sha256)), ("x-amz-checksum-crc32c", crc)],
            wholeContent: false)
        #expect(found.map(\.algorithm) == [.sha256, .crc32c] && found[1].value == [0xE3, 0x06, 0x92, 0x83])
        // A multipart upload's checksum of checksums is not one of the bytes.
        #expect(OriginDigest.digests(in: [("x-amz-checksum-crc32c", crc + "-3")], wholeContent: false).isEmpty)
        #expect(
            OriginDigest.digests(
                in: [("x-amz-checksum-crc32c", crc), ("x-amz-checksum-type", "COMPOSITE")], wholeContent: false
            ).isEmpty)
    }

    @Test func googleHashesAreRead() {
        let found = OriginDigest.digests(
            in: [("x-goog-hash", "crc32c=4waSgw=="), ("x-goog-hash", "md5=\(Self.base64(Self.md5))")],
            wholeContent: false)
        #expect(found.map(\.algorithm) == [.crc32c, .md5] && found[1].value == Self.md5)
        #expect(OriginDigest.digests(in: [("x-goog-hash", "sha1=abc, crc32c=AAAA")], wholeContent: false).isEmpty)
    }

    /// Random digests written as RFC 9530 writes them read back the same, in any order and
    /// with members of other algorithms among them.
    @Test func writtenDigestsReadBack() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let algorithms = [OriginDigest.Algorithm.sha256, .sha512].filter { _ in Bool.random(using: &random) }
            let digests = algorithms.map { algorithm in
                OriginDigest(
                    algorithm: algorithm,
                    value: (0..<algorithm.length).map { _ in UInt8.random(in: 0...255, using: &random) },
                    field: "Repr-Digest")
            }
            var members =
                digests.map(\.text) + ["unixsum=\(Int.random(in: 0...99999, using: &random))", "id-sha-256=:AA==:"]
            members.shuffle(using: &random)
            let found = OriginDigest.digests(
                in: [("Repr-Digest", members.joined(separator: ", "))], wholeContent: false)
            #expect(Set(found) == Set(digests), "\(members)")
        }
    }

    /// Mangled digest fields of every kind: no trap, and every digest read has its algorithm's
    /// length and names its field.
    @Test func mangledFieldsGiveOnlyWellFormedDigests() throws {
        let names = [
            "Repr-Digest", "Content-Digest", "x-amz-checksum-sha256", "x-amz-checksum-crc32c", "x-goog-hash",
        ]
        let outcomes = try Mutator.run("digest") { input in
            let found = OriginDigest.digests(in: names.map { ($0, input) }, wholeContent: true)
            if let wrong = found.first(where: { $0.value.count != $0.algorithm.length || !names.contains($0.field) }) {
                return ("malformed", "\(wrong)")
            }
            if Set(found).count != found.count { return ("repeated", "\(found)") }
            return (found.isEmpty ? "none" : "read", nil)
        }
        try Mutator.expectVaried(outcomes, ["none", "read"])
    }
}
