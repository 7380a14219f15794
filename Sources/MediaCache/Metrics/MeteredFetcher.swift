// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore

/// An origin fetcher that counts the requests and body bytes of the one it wraps.
struct MeteredFetcher: OriginFetcher {
    let base: any OriginFetcher

    func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        CacheMetrics.originRequests.increment()
        return try await base.contentInfo(for: url, headers: headers)
    }

    func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws -> OriginResponse {
        CacheMetrics.originRequests.increment()
        var response = try await base.fetch(url, range: range, ifRange: ifRange, headers: headers)
        response.body = CountedBody(base: response.body)
        return response
    }

    func checkOrigin(_ url: URL) throws {
        try base.checkOrigin(url)
    }

    var securityWarning: String? { base.securityWarning }

    var cookieJar: CookieJar? { base.cookieJar }
}

/// A body that adds each chunk's size to ``CacheMetrics/originBytes``.
struct CountedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: any AsyncSequence<ByteBuffer, any Error> & Sendable

    func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator())
    }

    struct Iterator: AsyncIteratorProtocol {
        var base: any AsyncIteratorProtocol<ByteBuffer, any Error>

        mutating func next() async throws -> ByteBuffer? {
            let chunk = try await base.next()
            if let chunk { CacheMetrics.originBytes.increment(by: chunk.readableBytes) }
            return chunk
        }
    }
}

/// One running origin download: the bytes `start..<end` of `url`, fetched up to `position`.
package struct DownloadSummary: Sendable, Codable, Equatable {
    public var url: String
    public var start: Int64
    public var end: Int64
    public var position: Int64
}
