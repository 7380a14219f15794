// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import MediaCacheTestSupport
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

/// Every path of writing a streamed answer, without a socket: where the head and the end
/// marker go, how many parts are in flight, and what a failure at each point does.
@Suite(.stallLimit) struct ResponseWriterTests {
    /// A stored range in one part: the head, the part and the end marker in one flush.
    @Test func aStoredRangeGoesInOneWrite() {
        var writer = ResponseWriter(range: ByteRange(100, 65_636))
        #expect(writer.write(.file(end: 65_636)) == .init(withHead: true, endsBody: true, awaitsPrevious: false))
        #expect(writer.allWritten(lastWriteEndedBody: true) == (false, false))
        #expect(writer.isComplete)
    }

    /// Bytes from memory: the head with the first, each later part written before the one
    /// before it is awaited (two in flight), the end marker after the read ends.
    @Test func partsFromMemoryKeepTwoInFlightAndEndAfterTheRead() {
        var writer = ResponseWriter(range: ByteRange(0, 300))
        #expect(writer.write(.bytes(count: 100)) == .init(withHead: true, endsBody: false, awaitsPrevious: false))
        #expect(writer.write(.bytes(count: 100)) == .init(withHead: false, endsBody: false, awaitsPrevious: true))
        // Bytes from memory reaching the end do not end the body: the read may still be
        // storing them, and its end says when it has.
        #expect(writer.write(.bytes(count: 100)) == .init(withHead: false, endsBody: false, awaitsPrevious: true))
        #expect(writer.sent == 300)
        #expect(writer.allWritten(lastWriteEndedBody: false) == (false, true))
    }

    /// A stored part short of the end leaves the body open; the next stored part to the end closes it.
    @Test func onlyAStoredPartThatReachesTheEndEndsTheBody() {
        var writer = ResponseWriter(range: ByteRange(0, 200))
        #expect(writer.write(.file(end: 100)).endsBody == false)
        #expect(writer.write(.bytes(count: 50)).endsBody == false)
        #expect(writer.write(.file(end: 200)) == .init(withHead: false, endsBody: true, awaitsPrevious: true))
    }

    /// An empty body: the head and the end marker, nothing else.
    @Test func anEmptyBodyWritesTheHeadAndTheEnd() {
        var writer = ResponseWriter(range: ByteRange(0, 0))
        #expect(writer.allWritten(lastWriteEndedBody: false) == (true, true))
    }

    /// A failure before the first byte gets the error's own status; after the head, the
    /// connection is cut; once every byte was sent or handed over, the answer counts as whole.
    @Test func aFailureIsAnsweredOrCutByWhatWasSent() {
        var writer = ResponseWriter(range: ByteRange(0, 200))
        #expect(writer.failed(isCancellation: false) == .answerInstead)
        #expect(writer.failed(isCancellation: true) == .answerInstead)
        _ = writer.write(.bytes(count: 100))
        #expect(writer.failed(isCancellation: false) == .cut(.failed))
        #expect(writer.failed(isCancellation: true) == .cut(.failed))
        _ = writer.write(.bytes(count: 100))
        #expect(writer.failed(isCancellation: true) == .cut(.whole))
        #expect(writer.failed(isCancellation: false) == .cut(.failed))
        _ = writer.allWritten(lastWriteEndedBody: false)
        #expect(writer.failed(isCancellation: false) == .cut(.alreadyEnded))
    }

    /// Keep-alive: when the client asks, and its HTTP version can tell where the body ends.
    @Test(arguments: [
        (true, HTTPVersion.http1_1, false, true), (true, .http1_1, true, true), (false, .http1_1, true, false),
        (true, .http1_0, true, true), (true, .http1_0, false, false),
    ])
    func keepAliveNeedsAnEndTheClientCanFind(requested: Bool, version: HTTPVersion, hasLength: Bool, keeps: Bool) {
        let headers: HTTPHeaders = hasLength ? ["Content-Length": "10"] : [:]
        #expect(ResponseWriter.keepsAlive(requested: requested, version: version, headers: headers) == keeps)
    }
}
