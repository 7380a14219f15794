// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

@testable import MediaCache

/// A play keeps to the version it began with: a whole stored entry that turns stale during a
/// play is served to the play's reads past byte 0 as it is, and asked for again (RFC 9111) by
/// a read from byte 0 or once no player has read it for the play window. On the manual clock,
/// against the scripted origin: the test counts the origin's requests.
@Suite(.stallLimit) struct PlaysTests {
    static let url = URL(string: "https://scripted.example/episode.mp3")!
    static let length: Int64 = 300_000

    /// Reads the episode from `offset` to its end, checking every byte.
    static func read(_ h: ScriptedHarness, from offset: Int64) async throws {
        let stream = try await h.reader.read(Self.url, offset: offset)
        var cursor = offset
        for try await chunk in stream {
            #expect(DeterministicContent(seed: 31).firstMismatch(in: chunk, at: cursor) == nil, "bytes at \(cursor)")
            cursor += Int64(chunk.readableBytes)
        }
        #expect(cursor == length)
    }

    static func configuration() -> CachingReader.Configuration {
        var configuration = CachingReader.Configuration()
        configuration.fillOnPlay = .none
        return configuration
    }

    /// A play of the episode (fresh for a minute) read whole from byte 0; then `body` with the
    /// number of origin requests so far.
    static func withPlayedEpisode(_ body: (ScriptedHarness, ManualClock, Int) async throws -> Void) async throws {
        let clock = ManualClock()
        try await ScriptedHarness.with(answersWhole: true, clock: clock, reader: Self.configuration()) { h in
            h.origin.serve(Self.url, length: Self.length, seed: 31, lifetime: 60)
            try await Self.read(h, from: 0)
            try await waitUntil { h.reader.activeDownloads == 0 }
            try await body(h, clock, h.origin.exchanges.count)
        }
    }

    @Test func aWholeEntryKeepsItsPlaysVersionThoughStale() async throws {
        try await Self.withPlayedEpisode { h, clock, asked in
            clock.advance(by: 120)  // stale, the play goes on: a seek
            try await Self.read(h, from: Self.length / 2)
            #expect(h.origin.exchanges.count == asked, "a seek within the play asks nothing")
            clock.advance(by: 300)  // still within ten minutes of the last read
            try await Self.read(h, from: Self.length / 10)
            #expect(h.origin.exchanges.count == asked)
            // From byte 0: a new play, asked as any read of a stale entry.
            try await Self.read(h, from: 0)
            #expect(h.origin.exchanges.count == asked + 1)
        }
    }

    @Test func aPlayIdleForTheWindowIsOver() async throws {
        try await Self.withPlayedEpisode { h, clock, asked in
            clock.advance(by: 601)  // no read for the play window: the play is over
            try await Self.read(h, from: Self.length / 2)
            #expect(h.origin.exchanges.count == asked + 1, "a stale entry out of a play is validated")
        }
    }

    /// A part of the file is all the entry holds: a seek to the missing part asks the origin
    /// (with the stored validator), in a play or not.
    @Test func aPartialEntryIsNotServedStale() async throws {
        let clock = ManualClock()
        try await ScriptedHarness.with(answersWhole: true, clock: clock, reader: Self.configuration()) { h in
            h.origin.serve(Self.url, length: Self.length, seed: 31, lifetime: 60)
            let stream = try await h.reader.read(Self.url, offset: 0, length: 1_000)
            for try await _ in stream {}
            try await waitUntil { h.reader.activeDownloads == 0 }
            let asked = h.origin.exchanges.count
            clock.advance(by: 120)
            try await Self.read(h, from: Self.length / 2)
            #expect(h.origin.exchanges.count > asked)
        }
    }

    /// A playlist is never held to a play: it changes as it is read.
    @Test func onlyMediaFilesArePlayed() {
        #expect(FillPolicy.isMedia(mimeType: "audio/mpeg", path: "/a"))
        #expect(FillPolicy.isMedia(mimeType: "video/mp2t", path: "/s.ts"))
        #expect(FillPolicy.isMedia(mimeType: nil, path: "/e/ep.m4a"))
        #expect(FillPolicy.isMedia(mimeType: "application/octet-stream", path: "/seg.m4s"))
        #expect(!FillPolicy.isMedia(mimeType: "application/vnd.apple.mpegurl", path: "/a.m3u8"))
        #expect(!FillPolicy.isMedia(mimeType: "audio/mpegurl", path: "/a.mp3"))
        #expect(!FillPolicy.isMedia(mimeType: "application/dash+xml", path: "/a.mpd"))
        #expect(!FillPolicy.isMedia(mimeType: "text/html", path: "/a.mp3"))
        #expect(!FillPolicy.isMedia(mimeType: nil, path: "/index"))
    }
}
