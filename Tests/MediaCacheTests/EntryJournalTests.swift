// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The entries' journal: frames read back as written; a tail cut short or damaged anywhere
/// ends the reading there, never a wrong frame; a cut tail is dropped before the next append;
/// the file is rewritten with its live frames as it grows; random bytes never trap.
@Suite(.stallLimit) struct EntryJournalTests {
    typealias Frame = EntryJournal.Frame

    static func frames(_ random: inout SplitMix, count: Int) -> [Frame] {
        (0..<count).map { _ in
            let name = "f" + String(random.next() % 20)
            guard random.next() % 4 != 0 else { return Frame(name: name, payload: nil) }
            let payload = Data((0..<Int(random.next() % 300)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            return Frame(name: name, payload: payload)
        }
    }

    /// Every prefix of an encoding reads as the frames wholly inside it; a byte changed in a
    /// frame ends the reading before that frame.
    @Test(arguments: 0..<20) func aCutOrDamagedTailEndsTheReadingThere(seed: UInt64) {
        var random = SplitMix(seed: seed)
        let frames = Self.frames(&random, count: 1 + Int(random.next() % 12))
        let encoded = EntryJournal.encode(frames)
        let ends = frames.indices.map { EntryJournal.encode(Array(frames[...$0])).count }
        #expect(
            EntryJournal.decode(encoded).frames == frames && EntryJournal.decode(encoded).validLength == encoded.count)
        for cut in 0...encoded.count {
            let whole = ends.filter { $0 <= cut }.count
            let read = EntryJournal.decode(encoded.prefix(cut))
            #expect(read.frames == Array(frames.prefix(whole)), "cut at \(cut)")
            #expect(read.validLength == (whole == 0 ? 0 : ends[whole - 1]))
        }
        let at = Int(random.next() % UInt64(encoded.count))
        var damaged = encoded
        damaged[at] ^= 1 << UInt8(random.next() % 8)
        let before = ends.filter { $0 <= at }.count
        #expect(EntryJournal.decode(damaged).frames == Array(frames.prefix(before)), "byte \(at) changed")
    }

    /// Random bytes, and frames with random bytes spliced in, are read within bounds or not at all.
    @Test func randomBytesNeverTrap() {
        var random = SplitMix(seed: 77)
        for _ in 0..<2_000 {
            var bytes = EntryJournal.encode(Self.frames(&random, count: Int(random.next() % 4)))
            for _ in 0..<Int(random.next() % 6) {
                let at = bytes.isEmpty ? 0 : Int(random.next() % UInt64(bytes.count))
                bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: at)
            }
            let read = EntryJournal.decode(bytes)
            #expect(read.validLength <= bytes.count)
            #expect(EntryJournal.encode(read.frames) == bytes.prefix(read.validLength))
        }
    }

    /// A file cut in its last frame (a crash in the append) loses that frame alone, and what is
    /// appended after the next load reads back.
    @Test func aCutTailIsDroppedBeforeTheNextAppend() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent(".journal").path
            let (a, b, c) = (
                Frame(name: "a", payload: Data("first".utf8)), Frame(name: "b", payload: Data("second".utf8)),
                Frame(name: "c", payload: Data("third".utf8))
            )
            // File calls on the I/O pool, as the store makes them, never on the cooperative pool.
            try await BlockingIO.run {
                EntryJournal(path: path, markCreated: nil).append([a, b])
                #expect(truncate(path, off_t(EntryJournal.encode([a, b]).count - 3)) == 0)
                let reopened = EntryJournal(path: path, markCreated: nil)
                #expect(reopened.load() == [a])
                reopened.append([c, Frame(name: "a", payload: nil)])
                #expect(EntryJournal(path: path, markCreated: nil).load() == [c])
            }
        }
    }

    /// Records written again and again keep the file within twice its live size (at least
    /// 4 MiB), the last of each name read back.
    @Test func theFileIsRewrittenWithItsLiveFramesAsItGrows() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent(".journal").path
            let (largest, live) = try await BlockingIO.run {
                let journal = EntryJournal(path: path, markCreated: nil)
                var largest: Int64 = 0
                for round in 0..<300 {
                    let payload = Data(repeating: UInt8(round % 256), count: 60_000)
                    journal.append([Frame(name: "n\(round % 3)", payload: payload)])
                    let size =
                        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
                    largest = max(largest, size)
                }
                return (largest, EntryJournal(path: path, markCreated: nil).load())
            }
            #expect(largest <= EntryJournal.minimumRewrite + 200_000, "\(largest)")
            #expect(live.map(\.name) == ["n0", "n1", "n2"])
            // The last payloads written, of rounds 297, 298 and 299.
            let firsts: [UInt8?] = live.map { $0.payload?.first }
            #expect(firsts == [41, 42, 43])
        }
    }
}
