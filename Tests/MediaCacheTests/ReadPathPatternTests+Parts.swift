// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore
import Testing

extension ReadPathPatternTests {
    @Test(arguments: FetcherSetup.all)
    func aReaderThatGoesAwayCancelsTheOriginRequest(setup: FetcherSetup) async throws {
        try await Harness.with(setup: setup) { h in
            var faults = TestOrigin.Faults()
            faults.bytesPerSecond = 4_000_000
            h.origin.serve(.generated(length: 40_000_000, seed: 11, faults: faults), at: "/slow.mp4")
            let got = try await ReadPathTests.readThenCancel(h, "/slow.mp4", offset: 0, limit: 300_000)
            // The download ends with its reader (that nothing more is then sent is shown
            // without a network by `ScriptedReadPathTests.aReaderThatGoesAwayCancelsTheOriginRequest`).
            try await waitUntil { h.reader.activeDownloads == 0 }
            // The origin sends 4 MB/s, so what it sent before the cancel reached it depends on
            // how busy the machine is (up to 3.7 MB seen while the whole suite ran); a download
            // that went on without its reader would send all 40 MB before it ended.
            let sentAfterCancel = h.origin.bodyBytesSent("/slow.mp4")
            #expect(sentAfterCancel < 20_000_000, "sent \(sentAfterCancel) after \(got) consumed")
            let key = h.store.key(for: h.origin.url("/slow.mp4"))
            #expect(h.store.spans(for: key).contains(ByteRange(0, got)))
        }
    }

    /// `nextPart()`: stored bytes come as regions of the data file (read back here with
    /// pread from the descriptor the stream hands over); together they are the resource's
    /// bytes in order.
    @Test func partsGiveFileRegionsOfStoredBytesAndFetchedBytesFromMemory() async throws {
        try await Harness.with { h in
            let size: Int64 = 3_000_000
            h.origin.serve(.generated(length: size, seed: 14), at: "/parts.mp4")
            let resource = h.origin.resource(at: "/parts.mp4")!
            _ = try await ReadPathTests.readAndCheck(h, "/parts.mp4", offset: 1_000_000, length: 1_000_000)
            let stream = try await h.reader.read(h.origin.url("/parts.mp4"))
            var cursor: Int64 = 0
            var regions: [ByteRange] = []
            var buffers = 0
            while let part = try await stream.nextPart() {
                switch part {
                case .bytes(let buffer):
                    #expect(resource.firstMismatch(in: buffer, at: cursor) == nil, "bytes at \(cursor)")
                    cursor += Int64(buffer.readableBytes)
                    buffers += 1
                case .file(let region):
                    let range = region.range
                    #expect(range.lowerBound == cursor)
                    let buffer = ReadPathTests.bytes(of: region.descriptor, at: range)
                    #expect(buffer.readableBytes == Int(range.length))
                    #expect(resource.firstMismatch(in: buffer, at: cursor) == nil, "region \(range)")
                    cursor = range.upperBound
                    regions.append(range)
                }
            }
            #expect(cursor == size)
            // Bytes stored before the read come as regions; fetched ones from the download's
            // memory while it keeps them (a reader waiting at a hole gets the chunk it waited for).
            #expect(SpanSet(regions).contains(ByteRange(1_000_000, 2_000_000)), "\(regions)")
            #expect(buffers > 0)
        }
    }

    /// A region is sent from the store's own descriptor, not a duplicate: held, it stays
    /// readable (the same bytes) after its entry is removed and its file deleted, and a
    /// region of another file opened since cannot take its descriptor's number.
    @Test func aHeldRegionKeepsItsFileAfterTheEntryIsRemoved() async throws {
        try await Harness.with { h in
            let size: Int64 = 2_000_000
            h.origin.serve(.generated(length: size, seed: 17), at: "/held.mp4")
            h.origin.serve(.generated(length: size, seed: 18), at: "/other.mp4")
            let resource = h.origin.resource(at: "/held.mp4")!
            _ = try await ReadPathTests.readAndCheck(h, "/held.mp4")
            let stream = try await h.reader.read(h.origin.url("/held.mp4"))
            guard case .file(let region)? = try await stream.nextPart() else {
                Issue.record("a cached read gave no file region")
                return
            }
            stream.cancel()
            try await h.store.remove(h.store.key(for: h.origin.url("/held.mp4")))
            _ = try await ReadPathTests.readAndCheck(h, "/other.mp4")  // opens and writes another file
            let buffer = ReadPathTests.bytes(of: region.descriptor, at: region.range)
            #expect(buffer.readableBytes == Int(region.range.length) && region.range.length > 0)
            #expect(resource.firstMismatch(in: buffer, at: region.range.lowerBound) == nil)
        }
    }

    /// Regions share ``CachingReader/Configuration/fileRegionBudget``: one open stream gets
    /// regions of `fileRegionSize`; with 64 open, a region is at most a 64th of the budget,
    /// so many clients take turns on the event loops in small steps. A region the budget cuts
    /// ends half-way into a page, so that no `sendfile` but the first starts on a page boundary
    /// (on Linux those ran at two thirds of the speed over loopback). Bytes are checked.
    @Test func regionsShrinkAsStreamsAreOpened() async throws {
        var configuration = CachingReader.Configuration()
        configuration.fileRegionSize = 1 << 20
        configuration.fileRegionBudget = 16 << 20
        try await Harness.with(reader: configuration) { h in
            let size: Int64 = 4 << 20
            h.origin.serve(.generated(length: size, seed: 16), at: "/share.mp4")
            let resource = h.origin.resource(at: "/share.mp4")!
            _ = try await ReadPathTests.readAndCheck(h, "/share.mp4")
            func regions(of stream: ReadStream) async throws -> [ByteRange] {
                var regions: [ByteRange] = []
                var cursor: Int64 = 0
                while let part = try await stream.nextPart() {
                    guard case .file(let region) = part else {
                        Issue.record("a cached read gave a buffer")
                        return regions
                    }
                    let range = region.range
                    let buffer = ReadPathTests.bytes(of: region.descriptor, at: range)
                    #expect(range.lowerBound == cursor)
                    #expect(resource.firstMismatch(in: buffer, at: cursor) == nil, "region \(range)")
                    cursor = range.upperBound
                    regions.append(range)
                }
                #expect(cursor == size)
                #expect(regions.dropLast().allSatisfy { $0.upperBound % 4096 == 2048 }, "\(regions)")
                return regions
            }
            let alone = try await regions(of: try await h.reader.read(h.origin.url("/share.mp4"))).map(\.length)
            #expect(alone.dropFirst().max() == Int64(1 << 20), "\(alone)")
            var others: [ReadStream] = []
            for _ in 0..<63 { others.append(try await h.reader.read(h.origin.url("/share.mp4"))) }
            let crowded = try await regions(of: try await h.reader.read(h.origin.url("/share.mp4"))).map(\.length)
            #expect(crowded.max() == Int64(16 << 20) / 64, "\(crowded)")
            others.forEach { $0.cancel() }
        }
    }

    @Test(arguments: FetcherSetup.all)
    func originErrorsAndOddHeadersAreHandled(setup: FetcherSetup) async throws {
        try await Harness.with(setup: setup) { h in
            var missing = TestOrigin.Faults()
            missing.status = 404
            h.origin.serve(.generated(length: 1000, faults: missing), at: "/missing.mp3")
            // The origin's own answer, carried for the front door to pass on, never stored.
            await #expect { _ = try await h.reader.read(h.origin.url("/missing.mp3")) } throws: {
                let error = $0 as? CacheError
                return error?.code == .originAnswered && error?.originAnswer?.status == 404
                    && error?.isOriginFailure == false
            }
            #expect(h.store.metadata(for: h.store.key(for: h.origin.url("/missing.mp3"))) == nil)
            var broken = TestOrigin.Faults()
            broken.status = 500
            h.origin.serve(.generated(length: 1000, faults: broken), at: "/broken.mp3")
            // A 5xx is a failure to serve now, like an unreachable origin (a stale copy may stand in).
            await #expect { _ = try await h.reader.read(h.origin.url("/broken.mp3")) } throws: {
                ($0 as? CacheError)?.originAnswer?.status == 500 && ($0 as? CacheError)?.isOriginFailure == true
            }

            var odd = TestOrigin.Faults()
            odd.lowercaseHeaders = true
            odd.headFails = true
            h.origin.serve(.generated(length: 1_000_000, seed: 13, mimeType: "audio/mpeg", faults: odd), at: "/odd.mp3")
            let info = try await h.reader.contentInfo(for: h.origin.url("/odd.mp3"))
            #expect(info.length == 1_000_000)
            #expect(info.acceptsRanges)
            #expect(info.uniformTypeIdentifier == "public.mp3")
            #expect(info.etag == "\"v1\"")
            #expect(h.origin.requests("/odd.mp3").map(\.range) == [nil, "bytes=0-1"])
            try await ReadPathTests.readAndCheck(h, "/odd.mp3", offset: 999_000)

            await #expect { _ = try await h.reader.read(h.origin.url("/odd.mp3"), offset: 1_000_000) } throws: {
                ($0 as? CacheError)?.code == .rangeNotSatisfiable && ($0 as? CacheError)?.resourceLength == 1_000_000
            }
            await #expect { _ = try await h.reader.read(URL(string: "http://127.0.0.1:1/nothing.mp3")!) } throws: {
                ($0 as? CacheError)?.code == .originUnavailable
            }
        }
    }
}
