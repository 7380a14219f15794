// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import MediaCache
import NIOCore
import Synchronization

/// An origin without a network for engine tests: an ``OriginFetcher`` whose every request
/// the test sees as an ``Exchange`` and whose body bytes arrive only when the test sends them.
/// Nothing in a test built on it depends on time: it waits for the exchange to be asked, for
/// the reader to take what was sent, for the request to be cancelled.
public final class ScriptedOrigin: OriginFetcher {
    /// One `GET` the read path made, and its body as the test feeds it.
    public final class Exchange: Sendable {
        public let url: URL
        /// The bytes asked for (`nil`: the whole body).
        public let range: ByteRange?
        public let ifRange: String?
        private let content: DeterministicContent
        /// Where the body starts and ends in the resource.
        public let bodyRange: ByteRange
        private let continuation: AsyncThrowingStream<ByteBuffer, any Error>.Continuation
        private struct Progress {
            var sent: Int64
            var taken: Int64
            var ended = false
            var cancelled = false
            /// With ``ScriptedOrigin/holdsHeads``: the fetch waiting for ``sendHead()``.
            var headWaiter: CheckedContinuation<Void, any Error>?
            var headSent = false
        }
        private let progress: Mutex<Progress>

        init(
            url: URL, range: ByteRange?, ifRange: String?, content: DeterministicContent, bodyRange: ByteRange,
            continuation: AsyncThrowingStream<ByteBuffer, any Error>.Continuation
        ) {
            self.url = url
            self.range = range
            self.ifRange = ifRange
            self.content = content
            self.bodyRange = bodyRange
            self.continuation = continuation
            progress = Mutex(Progress(sent: bodyRange.lowerBound, taken: bodyRange.lowerBound))
        }

        /// The resource offset up to which the read path has taken body bytes out of the
        /// response (sent bytes beyond it are still in the body's buffer).
        public var takenUpTo: Int64 { progress.withLock { $0.taken } }

        fileprivate func took(_ chunk: ByteBuffer) {
            progress.withLock { $0.taken += Int64(chunk.readableBytes) }
        }

        /// The resource offset up to which body bytes were sent.
        public var sentUpTo: Int64 { progress.withLock { $0.sent } }
        /// Whether the body ended: sent whole, failed, or let go of by the read path.
        public var isEnded: Bool { progress.withLock { $0.ended } }
        /// Whether the read path let go of the body before its end (the request was cancelled).
        public var isCancelled: Bool { progress.withLock { $0.cancelled } }

        /// Lets the fetch return the answer's head (with ``ScriptedOrigin/holdsHeads``).
        public func sendHead() {
            progress.withLock { progress in
                progress.headSent = true
                defer { progress.headWaiter = nil }
                return progress.headWaiter
            }?.resume()
        }

        /// Waits until the test sends the head; throws when the fetch is cancelled first.
        func waitForHead() async throws {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let now = progress.withLock { progress -> Bool in
                        if progress.headSent || Task.isCancelled { return true }
                        progress.headWaiter = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
                try Task.checkCancellation()
            } onCancel: {
                progress.withLock { progress in
                    progress.cancelled = true
                    defer { progress.headWaiter = nil }
                    return progress.headWaiter
                }?.resume(throwing: CancellationError())
            }
        }

        /// Sends the body's next `count` bytes (fewer at its end), in chunks of at most 64 KiB.
        public func send(_ count: Int64) {
            var (start, end) = progress.withLock { progress -> (Int64, Int64) in
                let start = progress.sent
                let end = progress.ended ? start : min(bodyRange.upperBound, start + count)
                progress.sent = end
                return (start, end)
            }
            while start < end {
                let length = Int(min(64 << 10, end - start))
                continuation.yield(content.buffer(offset: start, length: length))
                start += Int64(length)
            }
        }

        /// Sends the rest of the body and ends it.
        public func finish() {
            send(bodyRange.upperBound)
            end(nil)
        }

        /// Ends the body with `error` (a dropped connection) where it is.
        public func fail(
            _ error: any Error = CacheError(.originUnavailable, "The scripted origin dropped the connection.")
        ) {
            end(error)
        }

        private func end(_ error: (any Error)?) {
            let first = progress.withLock { progress in
                defer { progress.ended = true }
                return !progress.ended
            }
            guard first else { return }
            if let error { continuation.finish(throwing: error) } else { continuation.finish() }
        }

        fileprivate func terminated() {
            progress.withLock { progress in
                if !progress.ended { progress.cancelled = true }
                progress.ended = true
            }
        }
    }

    private struct Resource {
        var content: DeterministicContent
        var metadata: ContentMetadata
    }

    private let resources = Mutex<[String: Resource]>([:])
    private let asked = Mutex<[Exchange]>([])
    private let clock: any WallClock

    /// Whether each request's whole body is sent at once (else only what the test sends).
    private let answersWhole: Bool
    /// Whether a fetch returns only once the test calls ``Exchange/sendHead()``.
    private let holdsHeads: Bool

    /// An origin whose answers are fresh for a day by `clock`; with `answersWhole` every body
    /// is sent whole as soon as it is asked for; with `holdsHeads` no answer's head comes
    /// before the test sends it.
    package init(clock: any WallClock = SystemClock(), answersWhole: Bool = false, holdsHeads: Bool = false) {
        self.clock = clock
        self.answersWhole = answersWhole
        self.holdsHeads = holdsHeads
    }

    /// Serves `length` deterministic bytes seeded by `seed` at `url` as `mimeType`, with `etag`
    /// (none when `nil`), fresh for `lifetime` seconds from now by the origin's clock.
    public func serve(
        _ url: URL, length: Int64, seed: UInt64, etag: String? = "\"v1\"", lifetime: TimeInterval = 86_400,
        mimeType: String = "video/mp4"
    ) {
        var metadata = ContentMetadata(length: length, mimeType: mimeType, acceptsRanges: true, etag: etag)
        metadata.freshUntil = clock.now.addingTimeInterval(lifetime)
        metadata.generatedAt = clock.now
        resources.withLock {
            $0[url.absoluteString] = Resource(content: DeterministicContent(seed: seed), metadata: metadata)
        }
    }

    /// Every `GET` so far, in order.
    public var exchanges: [Exchange] { asked.withLock { $0 } }

    public func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        try resource(url).metadata
    }

    public func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws
        -> OriginResponse
    {
        let resource = try resource(url)
        let length = resource.metadata.length ?? 0
        let bodyRange = ByteRange(range?.lowerBound ?? 0, min(range?.upperBound ?? length, length))
        let (body, continuation) = AsyncThrowingStream.makeStream(of: ByteBuffer.self)
        let exchange = Exchange(
            url: url, range: range, ifRange: ifRange, content: resource.content, bodyRange: bodyRange,
            continuation: continuation)
        continuation.onTermination = { [weak exchange] _ in exchange?.terminated() }
        asked.withLock { $0.append(exchange) }
        if holdsHeads { try await exchange.waitForHead() }
        if answersWhole { exchange.finish() }
        let counted = body.map { @Sendable chunk in
            exchange.took(chunk)
            return chunk
        }
        var response = OriginResponse(metadata: resource.metadata, bodyOffset: bodyRange.lowerBound, body: counted)
        // A ranged request is answered as a `206` of the bytes asked (its `Content-Range`).
        if range != nil { response.bodyEnd = bodyRange.upperBound }
        return response
    }

    private func resource(_ url: URL) throws -> Resource {
        guard let resource = resources.withLock({ $0[url.absoluteString] }) else {
            throw CacheError(
                answer: OriginAnswer(status: 404, reason: "Not Found", headers: [], body: []), url: url.absoluteString)
        }
        return resource
    }
}

/// A ``ScriptedOrigin``, a store in a temporary folder and a read path over them.
public struct ScriptedHarness: Sendable {
    public let origin: ScriptedOrigin
    public let store: CacheStore
    public let reader: CachingReader

    /// Runs `body` with a fresh harness and closes the store afterwards.
    /// With `clock`, the origin's answers and the store's freshness are timed by it.
    package static func with<T>(
        answersWhole: Bool = false, holdsHeads: Bool = false, clock: ManualClock? = nil,
        reader configuration: CachingReader.Configuration = CachingReader.Configuration(),
        _ body: (ScriptedHarness) async throws -> T
    ) async throws -> T {
        try await withTemporaryDirectory { directory in
            let origin = ScriptedOrigin(
                clock: clock ?? SystemClock(), answersWhole: answersWhole, holdsHeads: holdsHeads)
            var storeConfiguration = CacheStore.Configuration()
            if let clock { storeConfiguration.clock = clock }
            let store = try await CacheStore.open(
                directory: directory.appendingPathComponent("store"), configuration: storeConfiguration)
            let harness = ScriptedHarness(
                origin: origin, store: store,
                reader: CachingReader(store: store, fetcher: origin, configuration: configuration))
            return try await runThenTearDown(harness, body) { harness in
                await harness.reader.shutDown()
                try await harness.store.close()
            }
        }
    }
}
