// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation

/// One request of a trace: a closed range of a resource, within a play.
struct TraceRequest: Equatable {
    /// The play it belongs to; a play's requests are consecutive, its first is its start.
    var play: Int
    /// What the play is (`song`, `podcast`, `episode`, `movie`, or a user's own word).
    var kind: String
    /// The resource's path at the origin.
    var path: String
    /// The resource's length.
    var size: Int64
    /// Its type, as the origin says it.
    var type: String
    /// The range asked, both ends included.
    var first: Int64
    var last: Int64

    var length: Int64 { last - first + 1 }
}

/// Seeded household traces of a month, and the CSV form a user's own log is replayed from.
///
/// A trace is a month of one household's plays, in order:
/// - **songs**: 120 songs of 2.5-6 MB, played by Zipf popularity (s = 1), each asked as AVPlayer
///   asks (`0-1`, then closed 256 KiB ranges); one play in four is skipped after one or two
///   ranges (a few seconds);
/// - **podcasts**: 10 episodes of 25-60 MB, each listened to over sessions that resume where the
///   last stopped, a fifth to two fifths of the episode a session;
/// - **series**: HLS episodes of 100 segments of 200 kB (`.ts`, one rendition), watched in order,
///   a few watched again; **movies**: 300 segments of 400 kB, each watched once (a scan).
///
/// `songs` is the music alone; `shows` podcasts and series with a movie; `household` all of it.
enum HouseholdTrace {
    static let chunk: Int64 = 256 << 10

    /// The trace named `name` (`songs`, `shows`, `household`) with `seed`.
    static func make(_ name: String, seed: UInt64) throws -> [TraceRequest] {
        var random = SeededRandom(seed: seed)
        var plays: [[TraceRequest]] = []
        let days = 30
        let music = name == "songs" || name == "household"
        let shows = name == "shows" || name == "household"
        guard music || shows else { throw ValidationError("A trace is songs, shows or household, not \(name).") }
        // Songs: sizes and a Zipf popularity.
        let songs = (0..<120).map { _ in Int64(2_500_000 + random.below(3_500_000)) }
        let weights = (1...songs.count).map { 1 / Double($0) }
        let order = (0..<songs.count).shuffled(using: &random)
        // Podcasts: episodes and where each stopped.
        let episodes = (0..<10).map { _ in Int64(25_000_000 + random.below(35_000_000)) }
        var podcast = (episode: 0, position: Int64(0))
        var series = 0
        let movies = [6, 13, 20]
        for day in 0..<days {
            var today: [[TraceRequest]] = []
            if shows, day % 7 != 5 {
                // A session or two of podcast on most days.
                for _ in 0..<(day % 3 == 0 ? 2 : 1) where podcast.episode < episodes.count {
                    let size = episodes[podcast.episode]
                    let share = Int64(Double(size) * (0.2 + 0.2 * random.unit()))
                    let end = min(size, podcast.position + share)
                    today.append(
                        ranges(
                            kind: "podcast", path: "/podcasts/ep\(podcast.episode).mp3", size: size,
                            type: "audio/mpeg", from: podcast.position, to: end))
                    podcast.position = end
                    if end == size { podcast = (podcast.episode + 1, 0) }
                }
            }
            if music {
                for _ in 0..<(15 + random.below(8)) {
                    let index = order[random.pick(weights)]
                    let size = songs[index]
                    let skipped = random.below(4) == 0
                    let end = skipped ? min(size, chunk * Int64(1 + random.below(2))) : size
                    today.append(
                        ranges(
                            kind: "song", path: "/music/\(index).mp3", size: size, type: "audio/mpeg", from: 0, to: end,
                            probe: true))
                }
            }
            if shows {
                // An episode most evenings; two of them watched again a week later.
                if day % 7 != 6 {
                    let episode = series
                    series += 1
                    today.append(segments(kind: "episode", folder: "/series/e\(episode)", count: 100, size: 200_000))
                }
                if [10, 18].contains(day) {
                    today.append(segments(kind: "episode", folder: "/series/e\(day - 8)", count: 100, size: 200_000))
                }
                if movies.contains(day) {
                    today.append(segments(kind: "movie", folder: "/movies/m\(day)", count: 300, size: 400_000))
                }
            }
            // The day's plays interleave: music between the shows; a day's podcast sessions stay
            // in their order (each resumes where the one before stopped).
            var day = today.shuffled(using: &random)
            let sessions = today.filter { $0.first?.kind == "podcast" }
            for (slot, session) in zip(day.indices.filter { day[$0].first?.kind == "podcast" }, sessions) {
                day[slot] = session
            }
            plays += day
        }
        var requests: [TraceRequest] = []
        for (number, play) in plays.enumerated() {
            requests += play.map {
                var request = $0
                request.play = number
                return request
            }
        }
        return requests
    }

    /// A play of `path` from `from` to `to` (excluded) in closed ranges of ``chunk``, after a
    /// probe of its first two bytes when `probe` (AVPlayer's first request).
    static func ranges(
        kind: String, path: String, size: Int64, type: String, from: Int64, to: Int64, probe: Bool = false
    ) -> [TraceRequest] {
        var requests: [TraceRequest] = []
        if probe {
            requests.append(TraceRequest(play: 0, kind: kind, path: path, size: size, type: type, first: 0, last: 1))
        }
        var offset = from
        while offset < to {
            let last = min(to, offset + chunk) - 1
            requests.append(
                TraceRequest(play: 0, kind: kind, path: path, size: size, type: type, first: offset, last: last))
            offset = last + 1
        }
        return requests
    }

    /// A play of an HLS rendition: each of `count` segments of `size` bytes, whole.
    static func segments(kind: String, folder: String, count: Int, size: Int64) -> [TraceRequest] {
        (0..<count).map {
            TraceRequest(
                play: 0, kind: kind, path: "\(folder)/seg\($0).ts", size: size, type: "video/mp2t", first: 0,
                last: size - 1)
        }
    }

    // MARK: CSV

    static let header = "play,kind,path,size,type,first,last"

    /// The trace as CSV: ``header``, then a request a line.
    static func csv(_ requests: [TraceRequest]) -> String {
        ([header] + requests.map { "\($0.play),\($0.kind),\($0.path),\($0.size),\($0.type),\($0.first),\($0.last)" })
            .joined(separator: "\n") + "\n"
    }

    /// Reads a trace in the CSV form, refusing what does not fit it: a path that does not begin
    /// with `/` or holds a comma, a range outside its resource, a resource whose size or type
    /// changes, a play whose requests are not together.
    static func read(csv text: String) throws -> [TraceRequest] {
        var lines = text.split(whereSeparator: \.isNewline).map(String.init)
        guard lines.first?.trimmingCharacters(in: .whitespaces) == header else {
            throw ValidationError("A trace's first line is \(header).")
        }
        lines.removeFirst()
        var requests: [TraceRequest] = []
        var resources: [String: (Int64, String)] = [:]
        var finished: Set<Int> = []
        for (number, line) in lines.enumerated() where !line.isEmpty {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            let at = "line \(number + 2)"
            guard fields.count == 7, let play = Int(fields[0]), play >= 0, let size = Int64(fields[3]),
                (1...(1 << 40)).contains(size), let first = Int64(fields[5]), let last = Int64(fields[6]),
                first >= 0, first <= last, last < size
            else { throw ValidationError("\(at): seven fields, a play number, and a range within the size.") }
            guard fields[2].hasPrefix("/"), !fields[2].contains(" "), fields[2].count < 1024 else {
                throw ValidationError("\(at): the path begins with / and holds no space.")
            }
            if let known = resources[fields[2]], known != (size, fields[4]) {
                throw ValidationError("\(at): \(fields[2]) changed its size or type.")
            }
            resources[fields[2]] = (size, fields[4])
            if let previous = requests.last?.play, previous != play {
                finished.insert(previous)
                guard !finished.contains(play) else { throw ValidationError("\(at): play \(play) is not together.") }
            }
            requests.append(
                TraceRequest(
                    play: play, kind: fields[1], path: fields[2], size: size, type: fields[4], first: first, last: last)
            )
        }
        guard !requests.isEmpty else { throw ValidationError("The trace has no request.") }
        return requests
    }
}

/// SplitMix64, seeded: the same trace for the same seed.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E4B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(1, bound))) }

    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// An index drawn with the given weights.
    mutating func pick(_ weights: [Double]) -> Int {
        var target = unit() * weights.reduce(0, +)
        for (index, weight) in weights.enumerated() {
            target -= weight
            if target < 0 { return index }
        }
        return weights.count - 1
    }
}
