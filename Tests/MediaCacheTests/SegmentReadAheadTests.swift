// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing

@testable import MediaCache

/// Which segments are read ahead of a player, as pure bookkeeping (no I/O).
@Suite struct SegmentReadAheadTests {
    static func segment(_ name: String) -> URL { URL(string: "https://o.example/v/\(name).ts")! }
    static let playlist = URL(string: "https://o.example/v/index.m3u8")!

    @Test func onlyAPlayerPlayingOnIsReadAheadOf() {
        let readAhead = SegmentReadAhead(depth: 1)
        readAhead.learn(playlist: Self.playlist, segments: ["a", "b", "c", "d"].map(Self.segment))
        // The first segment alone: a probe, or a first frame that should have the link alone.
        #expect(readAhead.segmentsAfter(Self.segment("a")).isEmpty)
        // The next one: playing on, so the one after it.
        #expect(readAhead.segmentsAfter(Self.segment("b")) == [Self.segment("c")])
        // While `c` is read ahead it is not started again; the player asking for it reads `d` ahead.
        #expect(readAhead.segmentsAfter(Self.segment("c")) == [Self.segment("d")])
        readAhead.finished(Self.segment("c"))
        // The last segment has nothing after it; an unknown URL starts nothing.
        #expect(readAhead.segmentsAfter(Self.segment("d")).isEmpty)
        #expect(readAhead.segmentsAfter(Self.segment("elsewhere")).isEmpty)
    }

    @Test func aSeekStartsNothingUntilThePlayerPlaysOn() {
        let readAhead = SegmentReadAhead(depth: 2)
        readAhead.learn(playlist: Self.playlist, segments: (0..<10).map { Self.segment("s\($0)") })
        #expect(readAhead.segmentsAfter(Self.segment("s0")).isEmpty)
        #expect(readAhead.segmentsAfter(Self.segment("s6")).isEmpty, "a seek: s5 was not asked for")
        #expect(readAhead.segmentsAfter(Self.segment("s7")) == [Self.segment("s8"), Self.segment("s9")])
    }

    @Test func segmentsAskedForAlreadyOrThatCannotBeAreNotReadAhead() {
        let readAhead = SegmentReadAhead(depth: 3)
        // `c` is a byte range of a file: not read ahead.
        readAhead.learn(playlist: Self.playlist, segments: [Self.segment("a"), Self.segment("b"), nil, Self.segment("d"), Self.segment("e")])
        _ = readAhead.segmentsAfter(Self.segment("d"))
        _ = readAhead.segmentsAfter(Self.segment("a"))
        #expect(readAhead.segmentsAfter(Self.segment("b")) == [Self.segment("e")], "c cannot be, d was asked for")
    }

    @Test func aLivePlaylistThatMovesOnKeepsWhatWasAsked() {
        let readAhead = SegmentReadAhead(depth: 1)
        readAhead.learn(playlist: Self.playlist, segments: ["s1", "s2", "s3", "s4"].map(Self.segment))
        _ = readAhead.segmentsAfter(Self.segment("s1"))
        #expect(readAhead.segmentsAfter(Self.segment("s2")) == [Self.segment("s3")])
        readAhead.finished(Self.segment("s3"))
        readAhead.learn(playlist: Self.playlist, segments: ["s2", "s3", "s4", "s5"].map(Self.segment))
        #expect(readAhead.segmentsAfter(Self.segment("s3")) == [Self.segment("s4")], "s2 was asked for before the reload")
    }

    @Test func theOldestPlaylistIsForgottenBeyondTheLimitAndDepthZeroReadsNothing() {
        let readAhead = SegmentReadAhead(depth: 1)
        for index in 0...SegmentReadAhead.playlistLimit {
            let base = "https://o.example/p\(index)/"
            readAhead.learn(playlist: URL(string: base + "index.m3u8")!, segments: ["a", "b", "c"].map { URL(string: base + $0)! })
        }
        _ = readAhead.segmentsAfter(URL(string: "https://o.example/p0/a")!)
        #expect(readAhead.segmentsAfter(URL(string: "https://o.example/p0/b")!).isEmpty, "p0 was forgotten")
        _ = readAhead.segmentsAfter(URL(string: "https://o.example/p1/a")!)
        #expect(readAhead.segmentsAfter(URL(string: "https://o.example/p1/b")!) == [URL(string: "https://o.example/p1/c")!])

        let none = SegmentReadAhead(depth: 0)
        none.learn(playlist: Self.playlist, segments: ["a", "b", "c"].map(Self.segment))
        _ = none.segmentsAfter(Self.segment("a"))
        #expect(none.segmentsAfter(Self.segment("b")).isEmpty)
    }

    /// Segments remembered in all are bounded too: six playlists of the most segments each
    /// leave the last five (and the one just learned is never the one forgotten).
    @Test func theOldestPlaylistsAreForgottenBeyondTheTotalOfSegments() {
        let readAhead = SegmentReadAhead(depth: 1)
        let count = SegmentReadAhead.segmentLimit
        #expect(SegmentReadAhead.totalSegmentLimit / count == 5)
        for index in 0..<6 {
            let base = "https://o.example/q\(index)/"
            readAhead.learn(playlist: URL(string: base + "index.m3u8")!, segments: (0..<count).map { URL(string: base + "s\($0)")! })
        }
        _ = readAhead.segmentsAfter(URL(string: "https://o.example/q0/s0")!)
        #expect(readAhead.segmentsAfter(URL(string: "https://o.example/q0/s1")!).isEmpty, "q0 was forgotten")
        for index in 1..<6 {
            _ = readAhead.segmentsAfter(URL(string: "https://o.example/q\(index)/s0")!)
            #expect(readAhead.segmentsAfter(URL(string: "https://o.example/q\(index)/s1")!) == [URL(string: "https://o.example/q\(index)/s2")!])
        }
    }
}
