// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// The digests an origin sends for a representation, against the test origin: kept with the
/// version, checked once the entry is whole; a match marks it verified, a mismatch drops what
/// was stored (logged with both digests), and the next read asks the origin again.
@Suite(.stallLimit, .endToEnd) struct OriginDigestCheckTests {
    static let length: Int64 = 700_000

    /// How the origin says what its bytes hash to.
    enum Field: String, CaseIterable, Sendable, CustomStringConvertible {
        case reprDigestSHA256, reprDigestSHA512, wholeContentDigest, s3Checksums, googleHashes

        var description: String { rawValue }

        /// The fields for `bytes`, and the algorithms a check then matches.
        func fields(for bytes: [UInt8]) -> ([(name: String, value: String)], [String]) {
            func base64<D: Sequence<UInt8>>(_ digest: D) -> String { Data(digest).base64EncodedString() }
            let crc = bytes.withUnsafeBytes { CRC32C.checksum($0) }
            let crcText = withUnsafeBytes(of: crc.bigEndian) { Data($0).base64EncodedString() }
            switch self {
            case .reprDigestSHA256:
                return ([("Repr-Digest", "sha-256=:\(base64(SHA256.hash(data: bytes))):, unixsum=1")], ["sha-256"])
            case .reprDigestSHA512:
                return ([("Repr-Digest", "sha-512=:\(base64(SHA512.hash(data: bytes))):")], ["sha-512"])
            case .wholeContentDigest:
                return ([("Content-Digest", "sha-256=:\(base64(SHA256.hash(data: bytes))):")], ["sha-256"])
            case .s3Checksums:
                return (
                    [
                        ("x-amz-checksum-sha256", base64(SHA256.hash(data: bytes))),
                        ("x-amz-checksum-crc32c", crcText),
                    ], ["sha-256", "crc32c"]
                )
            case .googleHashes:
                return (
                    [("x-goog-hash", "crc32c=\(crcText),md5=\(base64(Insecure.MD5.hash(data: bytes)))")],
                    ["md5", "crc32c"]
                )
            }
        }
    }

    static func resource(seed: UInt64, field: Field, wrong: Bool = false) -> TestOrigin.Resource {
        var resource = TestOrigin.Resource.generated(length: length, seed: seed)
        var bytes = Array(resource.bytes(0..<length).readableBytesView)
        if wrong { bytes[123_456] ^= 0x20 }
        resource.extraHeaders = field.fields(for: bytes).0
        // `Content-Digest` describes a whole answer: the origin sends the whole file.
        if field == .wholeContentDigest { resource.faults.ignoresRanges = true }
        return resource
    }

    static func readAll(_ h: Harness, _ url: URL) async throws -> ByteBuffer {
        var bytes = ByteBuffer()
        for try await chunk in try await h.reader.read(url) { bytes.writeImmutableBuffer(chunk) }
        return bytes
    }

    /// Waits until `key` is whole in the store and its digest check (started by the write that
    /// made it whole) has ended.
    static func settled(_ store: CacheStore, _ key: CacheKey) async throws {
        try await waitUntil { store.entrySummary(for: key)?.isComplete == true }
        await store.wholeEntryWorkSettled()
    }

    @Test(arguments: Field.allCases)
    func aMatchingDigestMarksTheWholeEntryVerified(field: Field) async throws {
        try await Harness.with { h in
            let resource = Self.resource(seed: 21, field: field)
            h.origin.serve(resource, at: "/a.mp3")
            let url = h.origin.url("/a.mp3")
            let key = h.store.key(for: url)
            #expect(resource.firstMismatch(in: try await Self.readAll(h, url), at: 0) == nil)
            try await Self.settled(h.store, key)
            let expected = field.fields(for: Array(resource.bytes(0..<Self.length).readableBytesView)).1
            let summary = try #require(h.store.entrySummary(for: key))
            #expect(summary.digestsMatched == expected, "\(summary)")
            #expect(summary.originDigests?.count == expected.count, "\(summary)")
            // Kept with the version: the store opened again knows it was verified.
            await h.reader.shutDown()
            try await h.store.close()
            let again = try await CacheStore.open(directory: h.directory.appendingPathComponent("store"))
            #expect(again.entrySummary(for: key)?.digestsMatched == expected)
            try await again.close()
        }
    }

    @Test func aMismatchDropsTheRepresentationAndTheNextReadAsksAgain() async throws {
        let logs = LogRecorder()
        var storeConfiguration = CacheStore.Configuration()
        storeConfiguration.logger = logs.logger()
        try await Harness.with(store: storeConfiguration) { h in
            h.origin.serve(Self.resource(seed: 22, field: .reprDigestSHA256, wrong: true), at: "/b.mp3")
            let url = h.origin.url("/b.mp3")
            let key = h.store.key(for: url)
            _ = try await Self.readAll(h, url)
            try await waitUntil {
                logs.all.contains { $0.level == .warning && $0.message.contains("do not match the origin's digest") }
            }
            await h.store.wholeEntryWorkSettled()
            let warning = try #require(logs.all.first { $0.message.contains("do not match the origin's digest") })
            let stored = Array(
                TestOrigin.Resource.generated(length: Self.length, seed: 22).bytes(0..<Self.length).readableBytesView)
            var wrong = stored
            wrong[123_456] ^= 0x20
            let sent = Field.reprDigestSHA256.fields(for: wrong).0[0].value
            let ours = Data(SHA256.hash(data: stored))
            #expect(warning.metadata["url"] == url.absoluteString)
            #expect(sent.hasPrefix(warning.metadata["origin"] ?? "-"), "\(warning)")
            #expect(warning.metadata["stored"] == "sha-256=:\(ours.base64EncodedString()):")
            #expect(warning.metadata["field"] == "Repr-Digest")
            // Nothing of it is served again: the next read goes to the origin for all of it.
            #expect(h.store.spans(for: key).isEmpty)
            h.origin.resetCounters()
            let replay = try await Self.readAll(h, url)
            #expect(Self.resource(seed: 22, field: .reprDigestSHA256).firstMismatch(in: replay, at: 0) == nil)
            // Asked as a new representation: no validator of the dropped one.
            #expect(h.origin.requests("/b.mp3").first?.ifRange == nil, "\(h.origin.requests("/b.mp3"))")
        }
    }

    /// A new version brings its own digest, which replaces the old one with it.
    @Test func aNewVersionsDigestReplacesTheOld() async throws {
        try await Harness.with { h in
            var first = Self.resource(seed: 23, field: .reprDigestSHA256)
            first.etag = "\"one\""
            first.cacheControl = "no-cache"
            h.origin.serve(first, at: "/c.mp3")
            let url = h.origin.url("/c.mp3")
            let key = h.store.key(for: url)
            _ = try await Self.readAll(h, url)
            try await Self.settled(h.store, key)
            #expect(h.store.entrySummary(for: key)?.digestsMatched == ["sha-256"])
            var second = Self.resource(seed: 24, field: .reprDigestSHA512)
            second.etag = "\"two\""
            h.origin.serve(second, at: "/c.mp3")
            #expect(second.firstMismatch(in: try await Self.readAll(h, url), at: 0) == nil)
            try await Self.settled(h.store, key)
            let summary = try #require(h.store.entrySummary(for: key))
            #expect(summary.etag == "\"two\"" && summary.digestsMatched == ["sha-512"], "\(summary)")
            #expect(summary.originDigests == ["sha-512 (Repr-Digest)"])
        }
    }
}
