// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@_spi(Adapter) @testable import MediaCache

/// The pure parts of background pins: a task's description, what a relaunch keeps, starts and
/// cancels, and whether a finished file is what was asked for.
@Suite(.stallLimit) struct BackgroundTransferTests {
    static let key = CacheKey("https://cdn.example/film.mp4")

    @Test func aDescriptionNamesTheJobTheEntryAndTheRange() {
        let ranged = BackgroundTransfer(
            job: "0a1b2c3d", key: CacheKey("a key with spaces"), range: ByteRange(0, 1 << 20))
        #expect(ranged.taskDescription == "mediacache/1 0a1b2c3d 0-1048576 a key with spaces")
        #expect(BackgroundTransfer(taskDescription: ranged.taskDescription) == ranged)
        #expect(ranged.rangeField == "bytes=0-1048575")
        let whole = BackgroundTransfer(job: "j", key: Self.key, range: nil)
        #expect(BackgroundTransfer(taskDescription: whole.taskDescription) == whole)
        #expect(whole.rangeField == nil)
    }

    @Test(arguments: [
        "", "mediacache/1", "mediacache/1 job 0-10", "mediacache/2 job 0-10 key", "mediacache/1 job 10-10 key",
        "mediacache/1 job 10-5 key", "mediacache/1 job +1-5 key", "mediacache/1 job 0-99999999999999999999 key",
        "mediacache/1 j%b 0-10 key", "mediacache/1  0-10 key", "mediacache/1 job 0-10 ",
        "mediacache/1 " + String(repeating: "j", count: 65) + " 0-10 key",
        "mediacache/1 job 0-10 " + String(repeating: "k", count: 5000), "another app's task",
        // Found by the fuzz target: a leading zero read, and wrote back another text.
        "mediacache/1 a 00-10 k", "mediacache/1 a 0-010 k",
    ])
    func anythingElseIsNotOurs(_ text: String) {
        #expect(BackgroundTransfer(taskDescription: text) == nil)
    }

    @Test func aRuleTellsTheSessionWhichNetworksItsTasksMayUse() {
        let allowed = DownloadRules.Network.allCases.map { ($0, $0.allowsExpensive, $0.allowsConstrained) }
        #expect(allowed.map(\.0) == [.any, .unmetered, .notConstrained])
        #expect(allowed.map(\.1) == [true, false, true], "metered")
        #expect(allowed.map(\.2) == [true, false, false], "low-data mode")
    }

    @Test func piecesFollowAFixedGridAndSkipWhatIsStored() {
        let stored = SpanSet([ByteRange(0, 100), ByteRange(250, 300)])
        let pieces = BackgroundReconciliation.pieces(range: nil, length: 350, spans: stored, pieceSize: 100)
        #expect(pieces == [ByteRange(100, 200), ByteRange(200, 300), ByteRange(300, 350)])
        // A range of a resource (an HLS byte-range segment) is cut from its own start.
        #expect(
            BackgroundReconciliation.pieces(range: ByteRange(50, 170), length: nil, spans: SpanSet(), pieceSize: 100)
                == [ByteRange(50, 150), ByteRange(150, 170)])
        #expect(BackgroundReconciliation.pieces(range: nil, length: nil, spans: SpanSet(), pieceSize: 100) == [nil])
        #expect(
            BackgroundReconciliation.pieces(
                range: nil, length: 350, spans: SpanSet([ByteRange(0, 350)]), pieceSize: 100
            ).isEmpty)
    }

    @Test func aRelaunchKeepsWhatIsWantedAndCancelsTheRest() {
        func transfer(_ job: String, _ lower: Int64) -> BackgroundTransfer {
            BackgroundTransfer(job: job, key: Self.key, range: ByteRange(lower, lower + 10))
        }
        // 2: a piece stored meanwhile; 3: a second task for one piece; 4: a job gone; 5: b's own.
        let running = [
            BackgroundTransferTask(identifier: 1, taskDescription: transfer("a", 0).taskDescription),
            BackgroundTransferTask(identifier: 2, taskDescription: transfer("a", 10).taskDescription),
            BackgroundTransferTask(identifier: 3, taskDescription: transfer("a", 0).taskDescription),
            BackgroundTransferTask(identifier: 4, taskDescription: transfer("gone", 0).taskDescription),
            BackgroundTransferTask(identifier: 5, taskDescription: transfer("b", 0).taskDescription),
            BackgroundTransferTask(identifier: 6, taskDescription: "another part of the app"),
            BackgroundTransferTask(identifier: 7, taskDescription: nil),
        ]
        let plan = BackgroundReconciliation.plan(
            wanted: [transfer("a", 0), transfer("a", 20)], deciding: ["a"], known: ["a", "b"], running: running)
        #expect(plan.cancel == [2, 3, 4, 6, 7])
        #expect(plan.start == [transfer("a", 20)])
        // A job removed: what it runs is cancelled, whoever asks.
        let removed = BackgroundReconciliation.plan(wanted: [], deciding: ["b"], known: ["a"], running: running)
        #expect(removed.cancel == [4, 5, 6, 7], "job a's tasks are its own run's to decide")
        #expect(removed.start.isEmpty)
    }

    // MARK: Finished files

    static let transfer = BackgroundTransfer(job: "j", key: key, range: ByteRange(100, 200))

    static func verdict(_ status: Int, _ fields: [(String, String)], length: Int64 = 100) -> BackgroundImport.Verdict {
        BackgroundImport.verdict(
            for: transfer, status: status, fields: fields.map { ContentMetadata.HeaderField(name: $0.0, value: $0.1) },
            fileLength: length)
    }

    @Test func aPartialAnswerOfTheRangeAskedIsStoredWithWhatItSays() throws {
        let verdict = Self.verdict(
            206,
            [
                ("Content-Range", "bytes 100-199/5000"), ("ETag", "\"v1\""), ("Content-Type", "video/MP4"),
                ("Content-Length", "100"), ("Cache-Control", "max-age=60"), ("Set-Cookie", "a=b"),
            ])
        guard case .store(let range, let metadata) = verdict else {
            Issue.record("rejected: \(verdict)")
            return
        }
        #expect(range == ByteRange(100, 200))
        #expect(metadata.length == 5000 && metadata.etag == "\"v1\"" && metadata.mimeType == "video/mp4")
        #expect(metadata.acceptsRanges)
        #expect(metadata.responseHeaders.map(\.name) == ["Content-Type", "Cache-Control"], "no length, range, cookie")
    }

    @Test func aWholeAnswerIsTheResource() {
        #expect(
            Self.verdict(200, [("Content-Length", "100")])
                == .store(
                    range: ByteRange(0, 100),
                    metadata: {
                        var metadata = ContentMetadata(length: 100)
                        metadata.responseHeaders = []
                        return metadata
                    }()))
    }

    @Test(
        arguments: [
            (206, [("Content-Range", "bytes 0-99/5000")], Int64(100), "another range"),
            (206, [("Content-Range", "bytes 100-199/*")], 100, "no total"),
            (206, [("Content-Range", "bytes 100-199/5000")], 99, "a short file"),
            (206, [], 100, "no Content-Range"),
            (206, [("Content-Range", "bytes 100-199/5000"), ("Content-Length", "101")], 100, "lengths disagree"),
            (206, [("Content-Range", "bytes 100-199/5000"), ("Cache-Control", "no-store")], 100, "no-store"),
            (206, [("Content-Range", "bytes 100-199/150")], 100, "past the total"),
            (200, [], 0, "empty"),
            (404, [], 100, "an error"),
            (206, [("Content-Range", "bytes 100-99999999999999999999999/5000")], 100, "a huge number"),
        ] as [(Int, [(String, String)], Int64, String)])
    func anythingElseIsRejected(_ status: Int, _ fields: [(String, String)], _ length: Int64, _ what: String) {
        guard case .reject = Self.verdict(status, fields, length: length) else {
            Issue.record("\(what) was stored")
            return
        }
    }
}
