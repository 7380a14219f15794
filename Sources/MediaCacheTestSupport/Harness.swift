// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import MediaCache
public import MediaCacheHTTP
import MediaCacheHTTPFields
public import NIOCore

/// A test origin, a store in a temporary folder, an HTTP fetcher and a read path over them.
public struct Harness: Sendable {
    public let origin: TestOrigin
    public let store: CacheStore
    public let fetcher: any OriginFetcher
    private let shutDownFetcher: @Sendable () async throws -> Void
    public let reader: CachingReader
    public let directory: URL

    /// Runs `body` with a fresh harness and tears everything down afterwards; the origin
    /// speaks `setup`'s scheme, the fetcher is `setup`'s and trusts the test CA.
    public static func with<T>(
        setup: FetcherSetup,
        store storeConfiguration: CacheStore.Configuration = CacheStore.Configuration(),
        reader readerConfiguration: CachingReader.Configuration = CachingReader.Configuration(),
        fetcher fetcherConfiguration: HTTPOriginFetcher.Configuration = HTTPOriginFetcher.Configuration(),
        _ body: (Harness) async throws -> T
    ) async throws -> T {
        try await with(
            scheme: setup.scheme, fetcherKind: setup.fetcher, store: storeConfiguration, reader: readerConfiguration,
            fetcher: fetcherConfiguration, body)
    }

    /// Runs `body` with a fresh harness and tears everything down afterwards; the origin
    /// speaks `scheme`, and the fetcher trusts the test CA.
    public static func with<T>(
        scheme: OriginScheme = .http,
        fetcherKind: FetcherKind = .asyncHTTPClient,
        store storeConfiguration: CacheStore.Configuration = CacheStore.Configuration(),
        reader readerConfiguration: CachingReader.Configuration = CachingReader.Configuration(),
        fetcher fetcherConfiguration: HTTPOriginFetcher.Configuration = HTTPOriginFetcher.Configuration(),
        _ body: (Harness) async throws -> T
    ) async throws -> T {
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start(tls: try scheme.tlsOptions())
            let store = try await CacheStore.open(
                directory: directory.appendingPathComponent("store"), configuration: storeConfiguration)
            var fetcherConfiguration = fetcherConfiguration
            fetcherConfiguration.trustRoots.append(try TrustRoots(pem: TestCertificateAuthority.shared.certificatePEM))
            let fetcher: any OriginFetcher
            let shutDown: @Sendable () async throws -> Void
            switch fetcherKind {
            case .asyncHTTPClient:
                let client = HTTPOriginFetcher(configuration: fetcherConfiguration)
                (fetcher, shutDown) = (client, { try await client.shutdown() })
            case .urlSession:
                let session = URLSessionOriginFetcher(configuration: fetcherConfiguration)
                (fetcher, shutDown) = (session, { try await session.shutdown() })
            }
            let reader = CachingReader(store: store, fetcher: fetcher, configuration: readerConfiguration)
            let harness = Harness(
                origin: origin, store: store, fetcher: fetcher, shutDownFetcher: shutDown, reader: reader,
                directory: directory)
            return try await runThenTearDown(harness, body) { try await $0.tearDown() }
        }
    }

    func tearDown() async throws {
        await reader.shutDown()
        try? await store.close()
        try await shutDownFetcher()
        try await origin.shutdown()
    }
}

/// Runs `body` with `harness`, then `tearDown`, also when `body` throws (then a failing tear-down
/// does not hide the body's error).
public func runThenTearDown<H, T>(_ harness: H, _ body: (H) async throws -> T, tearDown: (H) async throws -> Void)
    async throws -> T
{
    let result: T
    do {
        result = try await body(harness)
    } catch {
        try? await tearDown(harness)
        throw error
    }
    try await tearDown(harness)
    return result
}

/// Reads a whole stream into one buffer.
public func collect(_ stream: ReadStream) async throws -> ByteBuffer {
    var all = ByteBuffer()
    for try await chunk in stream {
        var chunk = chunk
        all.writeBuffer(&chunk)
    }
    return all
}

extension TestOrigin.Resource {
    /// The offset of the first byte of `buffer` that differs from this resource at
    /// `offset`, or `nil` when all match (and the buffer does not run past the end).
    public func firstMismatch(in buffer: ByteBuffer, at offset: Int64) -> Int64? {
        guard offset + Int64(buffer.readableBytes) <= length else { return length }
        let expected = bytes(offset..<(offset + Int64(buffer.readableBytes)))
        if expected == buffer { return nil }
        let got = Array(buffer.readableBytesView)
        let want = Array(expected.readableBytesView)
        return Int64(zip(got, want).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? 0) + offset
    }
}

extension Harness {
    /// Waits until the read path runs no download and no probe, then until the origin has
    /// received no request for `path` for 100 ms, so counters reset afterwards start clean.
    /// The quiet window is the one wait of the suite that is not an event: a request its
    /// download cancelled may still be on its way to the origin after the download ended, and
    /// nothing on this side can see it arrive. Throws if the origin is not quiet within 30 s.
    public func waitUntilQuiet(_ path: String) async throws {
        try await waitUntil { reader.activeDownloads == 0 && reader.contentInfoWaiters == 0 }
        let deadline = ContinuousClock.now + .seconds(30)
        var count = origin.requests(path).count
        var stableSince = ContinuousClock.now
        while ContinuousClock.now - stableSince < .milliseconds(100) {
            guard ContinuousClock.now < deadline else {
                throw CacheError(.originTimedOut, "waitUntilQuiet: \(path) kept getting requests for 30 s.")
            }
            try await Task.sleep(for: .milliseconds(10))
            let now = origin.requests(path).count
            if now != count || reader.activeDownloads > 0 {
                count = now
                stableSince = ContinuousClock.now
            }
        }
    }
}

/// Waits until `condition` holds, looking again every millisecond: for a state another task
/// reaches (a number of requests waiting), never for a duration. Throws after a minute of its
/// own polling, which only a broken condition reaches: each look counts at most
/// ``pollCountsAtMost``, so time the waiting task spent queued for a thread does not count.
public func waitUntil(_ condition: () -> Bool, sourceDescription: String = #function) async throws {
    try await waitUntil({ () async throws -> Bool in condition() }, sourceDescription: sourceDescription)
}

/// Waits until `condition` holds (see the other `waitUntil`), when finding out takes a
/// request: a server that has to notice closed connections, an answer not yet in the log.
public func waitUntil(_ condition: () async throws -> Bool, sourceDescription: String = #function) async throws {
    var waited: Duration = .zero
    var lookedAt = ContinuousClock.now
    while try await !condition() {
        guard waited < .seconds(60) else {
            throw CacheError(.originTimedOut, "waitUntil in \(sourceDescription): the condition never held.")
        }
        try await Task.sleep(for: .milliseconds(1))
        let now = ContinuousClock.now
        waited += min(now - lookedAt, pollCountsAtMost)
        lookedAt = now
    }
}

/// The most one look of ``waitUntil(_:sourceDescription:)`` counts against its minute: the
/// whole suite on one core left a waiting test's task queued for the cooperative pool's one
/// thread for 25 s between two looks (`ChildProcessTests` ran out of its minute in three
/// looks), which is a queue, not a stall.
let pollCountsAtMost: Duration = .milliseconds(100)
