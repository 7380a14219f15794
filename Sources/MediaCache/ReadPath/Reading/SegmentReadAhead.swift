// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import Synchronization

/// Which segments to store ahead of a player that plays through an HLS media playlist (or a
/// DASH representation, listed as one): the proxy tells it each media playlist it serves
/// (``learn(playlist:segments:)``) and each resource a player asks for (``segmentsAfter(_:)``).
/// A player that asks for a segment right after the ``playedBefore`` it asked for before is
/// playing on, so the next `depth` segments are read ahead (each at most once at a time): when
/// the player asks for them, their bytes are on the way or stored, and the round trip to the
/// origin is not in its wait. The first segments of a play or of a seek start nothing: a
/// player probing a stream (ffmpeg asks for the first two before its first frame), or waiting
/// for its first frame, has the link to itself. Byte-range segments are not read ahead.
///
/// Pure bookkeeping under a lock, no I/O: the read path starts and ends the reads.
package final class SegmentReadAhead: Sendable {
    /// The most media playlists remembered; the oldest is forgotten first.
    package static let playlistLimit = 32
    /// The most segments remembered of one playlist (its first ones).
    package static let segmentLimit = 20_000
    /// How many segments a player must have asked for right before the one it asks for to be
    /// read ahead of. With one, ffmpeg's first frame of an HLS stream over a far link waited for
    /// a read-ahead it started while probing (docs/benchmarks-history.md, "when read-ahead starts").
    package static let playedBefore = 2
    /// The most segments remembered in all: beyond it the oldest playlists are forgotten (a
    /// DASH manifest brings all its representations at once).
    package static let totalSegmentLimit = 100_000

    private struct Playlist {
        /// Its segments in order (`nil` for a byte-range one).
        var segments: [String?]
        /// The segments a player has asked for, by index.
        var asked: Set<Int> = []
    }

    private struct State {
        var playlists: [String: Playlist] = [:]
        /// Playlist URLs, oldest learned first.
        var order: [String] = []
        /// Where each remembered segment is listed: its playlist and index.
        var position: [String: (playlist: String, index: Int)] = [:]
        /// Segments being read ahead now.
        var running: Set<String> = []
    }

    /// How many segments are read ahead of a playing player; 0 reads none.
    package let depth: Int
    private let state = Mutex(State())

    package init(depth: Int) {
        self.depth = max(0, depth)
    }

    /// Remembers the segments of the media playlist at `playlist`, in order, in place of what
    /// it listed before (a live playlist moves on); `nil` stands for a segment that cannot be
    /// read ahead.
    package func learn(playlist: URL, segments: [URL?]) {
        guard depth > 0, !segments.isEmpty else { return }
        let key = playlist.absoluteString
        let listed = segments.prefix(Self.segmentLimit).map { $0?.absoluteString }
        state.withLock { state in
            var asked: Set<Int> = []
            if let old = state.playlists[key] {
                // A live playlist's window moves: keep what was asked by segment, not index.
                let askedURLs = Set(old.asked.compactMap { old.segments[$0] })
                asked = Set(listed.indices.filter { listed[$0].map(askedURLs.contains) == true })
                Self.forget(key, old, in: &state)
            } else {
                state.order.append(key)
                if state.order.count > Self.playlistLimit {
                    let oldest = state.order.removeFirst()
                    if let forgotten = state.playlists.removeValue(forKey: oldest) {
                        Self.forget(oldest, forgotten, in: &state)
                    }
                }
            }
            state.playlists[key] = Playlist(segments: listed, asked: asked)
            for (index, segment) in listed.enumerated() {
                if let segment { state.position[segment] = (key, index) }
            }
            while state.playlists.values.reduce(0, { $0 + $1.segments.count }) > Self.totalSegmentLimit,
                let oldest = state.order.firstIndex(where: { $0 != key })
            {
                let forgotten = state.order.remove(at: oldest)
                if let playlist = state.playlists.removeValue(forKey: forgotten) {
                    Self.forget(forgotten, playlist, in: &state)
                }
            }
        }
    }

    private static func forget(_ key: String, _ playlist: Playlist, in state: inout State) {
        for segment in playlist.segments {
            if let segment, state.position[segment]?.playlist == key { state.position[segment] = nil }
        }
    }

    /// A player asked for `url`: the segments to read ahead of it now (marked running until
    /// ``finished(_:)``), or none when `url` is not a remembered segment, the player has not
    /// asked for the ``playedBefore`` before it, or they are running already.
    package func segmentsAfter(_ url: URL) -> [URL] {
        guard depth > 0 else { return [] }
        return state.withLock { state in
            // Every request through the cache comes here: nothing to look up before a playlist.
            guard !state.position.isEmpty, let (playlistKey, index) = state.position[url.absoluteString],
                var playlist = state.playlists[playlistKey]
            else { return [] }
            playlist.asked.insert(index)
            state.playlists[playlistKey] = playlist
            guard index >= Self.playedBefore,
                (1...Self.playedBefore).allSatisfy({ playlist.asked.contains(index - $0) })
            else { return [] }
            var next: [URL] = []
            for later in (index + 1)..<min(playlist.segments.count, index + 1 + depth) {
                guard let segment = playlist.segments[later], !playlist.asked.contains(later),
                    !state.running.contains(segment),
                    let segmentURL = URL(string: segment)
                else { continue }
                state.running.insert(segment)
                next.append(segmentURL)
            }
            return next
        }
    }

    /// The read ahead of `url` ended (stored, failed or cancelled).
    package func finished(_ url: URL) {
        _ = state.withLock { $0.running.remove(url.absoluteString) }
    }
}
