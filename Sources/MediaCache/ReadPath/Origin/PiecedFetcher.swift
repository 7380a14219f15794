// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import NIOCore

/// Asks hosts that slow long requests down in pieces (``CachingReader/Configuration/originPieces``,
/// `serve --origin-piece`): no request to such a host asks for more than its piece size. A read
/// longer than a piece is one answer to the layer above, its body the pieces' bodies one after
/// another, each piece asked with `If-Range` (the first piece's strong validator), the next one
/// asked as soon as the current one's head is in, so the body does not pause between pieces.
/// A piece that is not the first's version (a `200`, another validator or length, another
/// offset) ends the body with `.resourceChanged`: one version across pieces. Where the first
/// answer is not a `206` of the piece (the origin ignores ranges, refuses, or has no strong
/// validator), it is passed on as it is.
///
/// Each piece is a request of its own on a connection of its own from the budget
/// (``MeteredFetcher/further``): the piece asked ahead waits for one as any request does, and
/// each piece's connection goes when its body ends, so one connection is never two requests.
struct PiecedFetcher: OriginFetcher {
    let base: any OriginFetcher
    /// The piece size of each host (lower-cased).
    let pieces: [String: Int64]
    let logger: Logger

    /// The smallest piece a host may be given (a smaller one would cost a request per few
    /// chunks).
    static let minimumPiece: Int64 = 64 << 10

    func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        try await base.contentInfo(for: url, headers: headers)
    }

    func checkOrigin(_ url: URL) throws { try base.checkOrigin(url) }
    var securityWarning: String? { base.securityWarning }
    var cookieJar: CookieJar? { base.cookieJar }
    var connectionsPerHost: Int? { base.connectionsPerHost }

    /// The piece size for `url`'s host, if it is asked in pieces.
    func pieceSize(for url: URL) -> Int64? {
        url.host.flatMap { pieces[$0.lowercased()] }.map { max(Self.minimumPiece, $0) }
    }

    func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws -> OriginResponse
    {
        let start = range?.lowerBound ?? 0
        let asked = range?.upperBound ?? ByteRange.maximumOffset
        guard let size = pieceSize(for: url), asked - start > size else {
            return try await base.fetch(url, range: range, ifRange: ifRange, headers: headers)
        }
        CacheMetrics.originPieces.increment()
        let first = try await base.fetch(url, range: ByteRange(start, start + size), ifRange: ifRange, headers: headers)
        guard first.answer == nil, !first.isNotModified, first.bodyOffset == start, let firstEnd = first.bodyEnd,
            let total = first.metadata.length, let validator = first.metadata.ifRangeValidator
        else { return first }
        let end = min(asked, total)
        guard firstEnd < end else { return first }
        var whole = first
        whole.bodyEnd = end
        let further = MeteredFetcher.further
        let fetch: @Sendable (ByteRange) async throws -> OriginResponse = { [base] piece in
            let hold = try await further?.acquire(url)
            CacheMetrics.originPieces.increment()
            do {
                var response = try await base.fetch(url, range: piece, ifRange: validator, headers: headers)
                if let hold { response.body = CountedBody(base: response.body, hold: hold, countsBytes: false) }
                return response
            } catch {
                hold?.release()
                throw error
            }
        }
        let firstBody = further.map { ReleasingBody(base: first.body, release: $0.releaseFirst) }
        whole.body = PiecedBody(
            first: firstBody ?? first.body, firstStart: start, firstEnd: firstEnd, end: end, size: size,
            version: first.metadata,
            url: url,
            fetch: fetch, logger: logger)
        return whole
    }
}

/// The body of a read asked in pieces: each piece's body in turn, the next piece asked as soon
/// as the current one's head is in.
struct PiecedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    typealias Failure = any Error

    let first: any AsyncSequence<ByteBuffer, any Error> & Sendable
    let firstStart: Int64
    let firstEnd: Int64
    let end: Int64
    let size: Int64
    let version: ContentMetadata
    let url: URL
    let fetch: @Sendable (ByteRange) async throws -> OriginResponse
    let logger: Logger

    func makeAsyncIterator() -> Iterator {
        Iterator(self)
    }

    /// A class, so that a body dropped before its end cancels the piece asked ahead.
    final class Iterator: AsyncIteratorProtocol {
        private let body: PiecedBody
        private var current: any AsyncIteratorProtocol<ByteBuffer, any Error>
        /// Where the next byte of the body is, and where the current piece ends.
        private var position: Int64
        private var pieceEnd: Int64
        private var ahead: Task<OriginResponse, any Error>?

        init(_ body: PiecedBody) {
            self.body = body
            current = body.first.makeAsyncIterator()
            position = body.firstStart
            pieceEnd = body.firstEnd
            ahead = nil
            ahead = askAhead(from: body.firstEnd)  // the first piece's head is in
        }

        deinit {
            ahead?.cancel()
        }

        /// The piece after `from`, asked now, or `nil` past the end.
        private func askAhead(from offset: Int64) -> Task<OriginResponse, any Error>? {
            guard offset < body.end else { return nil }
            let piece = ByteRange(offset, Swift.min(body.end, offset + body.size))
            let fetch = body.fetch
            let asked = TaskPlacement.throwingTask { try await fetch(piece) }
            return asked
        }

        func next() async throws -> ByteBuffer? {
            while true {
                if var chunk = try await current.next(isolation: nil) {
                    // Never past the piece's end (a piece's own check is the transfer's).
                    let room = Int(pieceEnd - position)
                    if chunk.readableBytes > room { chunk = chunk.getSlice(at: chunk.readerIndex, length: room)! }
                    position += Int64(chunk.readableBytes)
                    if chunk.readableBytes > 0 { return chunk }
                    continue
                }
                // A piece that ended short: the transfer resumes from where the bytes stopped.
                guard position == pieceEnd else {
                    throw CacheError(
                        .originUnavailable, "An origin piece ended at \(position) before \(pieceEnd).")
                }
                guard let asked = ahead else { return nil }
                let response = try await asked.value
                try check(response, at: pieceEnd)
                pieceEnd = response.bodyEnd!
                current = response.body.makeAsyncIterator()
                ahead = askAhead(from: pieceEnd)
            }
        }

        /// A piece must be a `206` of the first piece's version at the offset asked.
        private func check(_ response: OriginResponse, at offset: Int64) throws {
            let same =
                response.answer == nil && !response.isNotModified && response.bodyOffset == offset
                && response.bodyEnd.map { $0 > offset && $0 <= body.end } == true
                && response.metadata.isSameVersion(as: body.version) && response.metadata.length == body.version.length
            guard same else {
                body.logger.warning(
                    "An origin piece was not the first piece's version; the read stops",
                    metadata: ["url": "\(body.url.absoluteString.prefix(200))", "at": "\(offset)"])
                throw CacheError(
                    .resourceChanged,
                    "\(body.url.absoluteString.prefix(200)) changed at the origin between the pieces of a read.")
            }
        }
    }
}

/// A body that calls `release` when it ends or fails: the first piece's, which lets its
/// read's connection go before the next piece needs one.
struct ReleasingBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: any AsyncSequence<ByteBuffer, any Error> & Sendable
    let release: @Sendable () -> Void

    func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator(), release: release)
    }

    struct Iterator: AsyncIteratorProtocol {
        var base: any AsyncIteratorProtocol<ByteBuffer, any Error>
        let release: @Sendable () -> Void

        mutating func next() async throws -> ByteBuffer? {
            do {
                guard let chunk = try await base.next() else {
                    release()
                    return nil
                }
                return chunk
            } catch {
                release()
                throw error
            }
        }
    }
}
