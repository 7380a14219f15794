// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Which segments are read ahead of a player, as pure bookkeeping (no I/O).
@Suite(.stallLimit) struct SegmentReadAheadTests {
    static func segment(_ name: String) -> URL { URL(string: "https://o.example/v/\(name).ts")! }
    static let playlist = URL(string: "https://o.example/v/index.m3u8")!

    @Test func onlyAPlayerPlayingOnIsReadAheadOf() {
        #expect(SegmentReadAhead.playedBefore == 2)
        let readAhead = SegmentReadAhead(depth: 1)
        readAhead.learn(playlist: Self.playlist, segments: ["a", "b", "c", "d", "e"].map(Self.segment))
        // The first two segments: a probe, or a first frame that should have the link alone.
        #expect(readAhead.segmentsAfter(Self.segment("a")).isEmpty)
        #expect(readAhead.segmentsAfter(Self.segment("b")).isEmpty)
        // The third after the two before it: playing on, so the one after it.
        #expect(readAhead.segmentsAfter(Self.segment("c")) == [Self.segment("d")])
        // While `d` is read ahead it is not started again; the player asking for it reads `e` ahead.
        #expect(readAhead.segmentsAfter(Self.segment("d")) == [Self.segment("e")])
        readAhead.finished(Self.segment("d"))
        // The last segment has nothing after it; an unknown URL starts nothing.
        #expect(readAhead.segmentsAfter(Self.segment("e")).isEmpty)
        #expect(readAhead.segmentsAfter(Self.segment("elsewhere")).isEmpty)
    }

    @Test func aSeekStartsNothingUntilThePlayerPlaysOn() {
        let readAhead = SegmentReadAhead(depth: 2)
        readAhead.learn(playlist: Self.playlist, segments: (0..<10).map { Self.segment("s\($0)") })
        _ = readAhead.segmentsAfter(Self.segment("s0"))
        #expect(readAhead.segmentsAfter(Self.segment("s1")).isEmpty)
        #expect(readAhead.segmentsAfter(Self.segment("s5")).isEmpty, "a seek: s4 was not asked for")
        #expect(readAhead.segmentsAfter(Self.segment("s6")).isEmpty, "s4 was not asked for")
        #expect(readAhead.segmentsAfter(Self.segment("s7")) == [Self.segment("s8"), Self.segment("s9")])
    }

    @Test func segmentsAskedForAlreadyOrThatCannotBeAreNotReadAhead() {
        let readAhead = SegmentReadAhead(depth: 3)
        // `d` is a byte range of a file: not read ahead.
        let names: [String?] = ["a", "b", "c", nil, "e", "f"]
        readAhead.learn(playlist: Self.playlist, segments: names.map { $0.map(Self.segment) })
        _ = readAhead.segmentsAfter(Self.segment("e"))
        _ = readAhead.segmentsAfter(Self.segment("a"))
        _ = readAhead.segmentsAfter(Self.segment("b"))
        #expect(readAhead.segmentsAfter(Self.segment("c")) == [Self.segment("f")], "d cannot be, e was asked for")
    }

    @Test func aLivePlaylistThatMovesOnKeepsWhatWasAsked() {
        let readAhead = SegmentReadAhead(depth: 1)
        readAhead.learn(playlist: Self.playlist, segments: ["s1", "s2", "s3", "s4"].map(Self.segment))
        _ = readAhead.segmentsAfter(Self.segment("s1"))
        _ = readAhead.segmentsAfter(Self.segment("s2"))
        #expect(readAhead.segmentsAfter(Self.segment("s3")) == [Self.segment("s4")])
        readAhead.finished(Self.segment("s4"))
        readAhead.learn(playlist: Self.playlist, segments: ["s2", "s3", "s4", "s5"].map(Self.segment))
        #expect(
            readAhead.segmentsAfter(Self.segment("s4")) == [Self.segment("s5")],
            "s2 and s3 were asked for before the reload")
    }

    @Test func theOldestPlaylistIsForgottenBeyondTheLimitAndDepthZeroReadsNothing() {
        let readAhead = SegmentReadAhead(depth: 1)
        for index in 0...SegmentReadAhead.playlistLimit {
            let base = "https://o.example/p\(index)/"
            readAhead.learn(
                playlist: URL(string: base + "index.m3u8")!,
                segments: ["a", "b", "c", "d"].map { URL(string: base + $0)! })
        }
        func play(_ playlist: String, _ names: String...) -> [URL] {
            names.map { readAhead.segmentsAfter(URL(string: "https://o.example/\(playlist)/\($0)")!) }.last ?? []
        }
        #expect(play("p0", "a", "b", "c").isEmpty, "p0 was forgotten")
        #expect(play("p1", "a", "b", "c") == [URL(string: "https://o.example/p1/d")!])

        let none = SegmentReadAhead(depth: 0)
        none.learn(playlist: Self.playlist, segments: ["a", "b", "c", "d"].map(Self.segment))
        _ = none.segmentsAfter(Self.segment("a"))
        _ = none.segmentsAfter(Self.segment("b"))
        #expect(none.segmentsAfter(Self.segment("c")).isEmpty)
    }

    /// Segments remembered in all are bounded too: six playlists of the most segments each
    /// leave the last five (and the one just learned is never the one forgotten).
    @Test func theOldestPlaylistsAreForgottenBeyondTheTotalOfSegments() {
        let readAhead = SegmentReadAhead(depth: 1)
        let count = SegmentReadAhead.segmentLimit
        #expect(SegmentReadAhead.totalSegmentLimit / count == 5)
        for index in 0..<6 {
            let base = "https://o.example/q\(index)/"
            readAhead.learn(
                playlist: URL(string: base + "index.m3u8")!, segments: (0..<count).map { URL(string: base + "s\($0)")! }
            )
        }
        func play(_ playlist: Int) -> [URL] {
            (0..<3).map { readAhead.segmentsAfter(URL(string: "https://o.example/q\(playlist)/s\($0)")!) }.last ?? []
        }
        #expect(play(0).isEmpty, "q0 was forgotten")
        for index in 1..<6 {
            #expect(play(index) == [URL(string: "https://o.example/q\(index)/s3")!])
        }
    }
}
