// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// The media-time planner on files from outside: seeded random MP4s built with a model of
/// where every sample lies (both `moov` positions, `stco` or `co64`, one size or a table,
/// several chunk runs, an edit list or none), planned as they are and checked against the
/// model, then mutated (fields set to edge values, bytes flipped, cut, inserted) and planned
/// again: the planner returns or throws, never traps, reads only within the file, and plans
/// only ranges within it. Plus MP3, ADTS and WAV heads mutated the same way.
///
/// `MEDIACACHE_FUZZ_ITERATIONS` (default 25,000; a twentieth of it here, each input is a file)
/// and `MEDIACACHE_FUZZ_SEED` as for the other fuzz targets.
@Suite(.stallLimit, .cpuBound) struct MediaTimeFuzzTests {
    static var iterations: Int {
        max(1, (ProcessInfo.processInfo.environment["MEDIACACHE_FUZZ_ITERATIONS"].flatMap(Int.init) ?? 25_000) / 20)
    }
    static var seed: UInt64 {
        ProcessInfo.processInfo.environment["MEDIACACHE_FUZZ_SEED"].flatMap(UInt64.init) ?? 0x6d70_3474_696d_6521
    }

    @Test func mp4PlansMatchTheModelAndMutatedFilesNeverTrap() async throws {
        var random = SplitMix(seed: Self.seed)
        var outcomes: [String: Int] = [:]
        var failures = 0
        for iteration in 0..<Self.iterations {
            let file = SyntheticMP4(&random)
            let seconds = [0.0, 0.04, 0.5, 1, 2.5, 5, 30][random.below(7)]
            var data = file.bytes
            let mutated = random.below(2) == 1
            if mutated { Self.mutate(&data, &random) }
            var failure: String?
            do {
                let (plan, badRead) = try await Self.plan(
                    data, seconds: seconds, bridging: mutated ? MediaTimePlanner.bridgedGap : 0)
                failure = badRead ?? Self.wellFormed(plan, length: Int64(data.count))
                if failure == nil, !mutated { failure = file.check(plan, seconds: seconds) }
                outcomes[mutated ? "mutated planned" : "planned", default: 0] += 1
            } catch is MediaParseError {
                if !mutated { failure = "a well-formed file was refused" }
                outcomes["refused", default: 0] += 1
            }
            if let failure {
                failures += 1
                if failures <= 5 {
                    Issue.record(
                        Comment(
                            rawValue:
                                "iteration \(iteration), seed \(Self.seed), \(seconds) s, \(file.summary): \(failure)"))
                }
            }
        }
        print(
            "fuzz mp4: \(Self.iterations) files, \(failures) failures, outcomes \(outcomes.sorted { $0.key < $1.key })")
        #expect((outcomes["planned"] ?? 0) > Self.iterations / 4)
        #expect((outcomes["refused"] ?? 0) > 0 && (outcomes["mutated planned"] ?? 0) > 0)
    }

    @Test func audioHeadsNeverTrapAndPlanFromTheirStart() async throws {
        var random = SplitMix(seed: Self.seed ^ 0xA0D10)
        var shapes: [MediaShape: Int] = [:]
        for iteration in 0..<Self.iterations {
            var data = Self.audioHead(&random)
            if random.below(3) > 0 { Self.mutate(&data, &random) }
            let (plan, badRead) = try await Self.plan(data, seconds: Double(random.below(20)))
            shapes[plan.shape, default: 0] += 1
            if let failure = badRead ?? Self.wellFormed(plan, length: Int64(data.count))
                ?? (plan.ranges.first?.lowerBound ?? 0 == 0 ? nil : "not from the start")
            {
                Issue.record(Comment(rawValue: "iteration \(iteration): \(failure)"))
                break
            }
        }
        print("fuzz audio heads: \(Self.iterations) inputs, shapes \(shapes)")
        #expect(shapes.count >= 3)
    }

    /// Plans from memory; says what went wrong with a read, if anything did.
    static func plan(_ data: [UInt8], seconds: Double, bridging: Int64 = MediaTimePlanner.bridgedGap) async throws -> (
        MediaTimePlan, String?
    ) {
        let badRead = Mutex<String?>(nil)
        let plan = try await MediaTimePlanner.plan(seconds: seconds, length: Int64(data.count), bridging: bridging) {
            range in
            guard range.upperBound <= Int64(data.count), !range.isEmpty else {
                badRead.withLock { $0 = "read \(range) of a \(data.count)-byte file" }
                return []
            }
            return Array(data[Int(range.lowerBound)..<Int(range.upperBound)])
        }
        return (plan, badRead.withLock { $0 })
    }

    static func wellFormed(_ plan: MediaTimePlan, length: Int64) -> String? {
        for (index, range) in plan.ranges.enumerated() {
            if range.isEmpty || range.upperBound > length { return "range \(range) outside a \(length)-byte file" }
            if index > 0, plan.ranges[index - 1].upperBound >= range.lowerBound {
                return "ranges not sorted and apart: \(plan.ranges)"
            }
        }
        return nil
    }

    static let edgeValues: [UInt32] = [
        0, 1, 2, 7, 8, 16, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0xFFFF_FFFE, 0x0001_0000,
    ]

    static func mutate(_ data: inout [UInt8], _ random: inout SplitMix) {
        for _ in 0...random.below(6) {
            guard !data.isEmpty else { return }
            let at = random.below(data.count)
            switch random.below(5) {
            case 0, 1:
                let value = edgeValues[random.below(edgeValues.count)]
                for byte in 0..<4 where at + byte < data.count {
                    data[at + byte] = UInt8(truncatingIfNeeded: value >> (24 - 8 * byte))
                }
            case 2: data[at] ^= UInt8(truncatingIfNeeded: 1 << random.below(8))
            case 3: data.removeSubrange(at...)
            default:
                data.insert(
                    contentsOf: (0..<random.below(12)).map { _ in UInt8(truncatingIfNeeded: random.next()) }, at: at)
            }
        }
    }

    /// The start of an MP3 (with or without an ID3 tag and a Xing header), ADTS or WAV file,
    /// padded with frames or silence.
    static func audioHead(_ random: inout SplitMix) -> [UInt8] {
        var bytes: [UInt8] = []
        switch random.below(3) {
        case 0:
            if random.below(2) == 0 {
                bytes += Array("ID3".utf8) + [4, 0, 0, 0, 0, 1, 0] + [UInt8](repeating: 0, count: 128)
            }
            let frame: [UInt8] = [0xFF, 0xFB, UInt8(random.below(14) + 1) << 4 | UInt8(random.below(3)) << 2, 0x44]
            let length = MPEGFrame(frame, at: 0)?.length ?? 417
            var first = frame + [UInt8](repeating: 0, count: max(0, length - 4))
            if random.below(2) == 0, first.count > 48 {
                first.replaceSubrange(36..<48, with: Array("Xing".utf8) + [0, 0, 0, 3] + [0, 0, 0x10, 0])
            }
            bytes += first
            for _ in 0..<20 { bytes += frame + [UInt8](repeating: 0x55, count: max(0, length - 4)) }
        case 1:
            for _ in 0..<30 {
                let length = 7 + random.below(400)
                bytes += [
                    0xFF, 0xF1, 0x50, 0x80 | UInt8(length >> 11), UInt8(truncatingIfNeeded: length >> 3),
                    UInt8(truncatingIfNeeded: length << 5) | 0x1F, 0xFC,
                ]
                bytes += [UInt8](repeating: 0x21, count: length - 7)
            }
        default:
            let rate = UInt32(8000 * (1 + random.below(12)))
            func le(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
            bytes +=
                Array("RIFF".utf8) + le(36 + 20000) + Array("WAVE".utf8) + Array("fmt ".utf8) + le(16) + [1, 0, 1, 0]
                + le(rate / 2) + le(rate) + [2, 0, 16, 0]
            bytes += Array("data".utf8) + le(20000) + [UInt8](repeating: 0, count: 20000)
        }
        return bytes
    }
}

extension SplitMix {
    /// A number in `0 ..< bound`.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(1, bound))) }
}
