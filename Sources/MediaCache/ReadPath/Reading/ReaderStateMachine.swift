// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore

/// What one read does next, decided from what it sees: pure, no I/O, no clock.
///
/// A ``ReadSession`` is its executor: it takes an ``Observation`` of the world (the stored
/// span at the cursor, the bytes the current download holds there, that download's
/// progress), asks ``next(_:)`` for an ``Action``, carries the action out, and reports what
/// happened with ``advance(to:)``, ``paused()`` and ``close()``. Every decision of the reader
/// side of the read path is here, so each is tested without an origin or a store
/// (`ReaderStateMachineTests`), as ``DownloadStateMachine`` is for downloads.
///
/// The states: reading (the cursor inside the range: stored bytes, held bytes, or a body
/// streamed through), pausing at a hole (at most once per cursor, right after stored bytes,
/// and only until the read first waits on the origin), waiting on a download, finished,
/// failed, closed. The cursor only moves forward.
struct ReaderStateMachine {
    /// The current download as the reader sees it at its cursor.
    struct DownloadView {
        /// The bytes it covers, `start..<end`.
        var start: Int64
        var end: Int64
        /// How far its bytes have been delivered.
        var position: Int64
        var state: DownloadStateMachine.State
        /// The bytes it keeps in memory from the cursor on, if any.
        var held: ByteBuffer?
    }

    /// What the reader sees before it decides.
    struct Observation {
        /// The stored span that holds the cursor, `nil` at a hole.
        var stored: ByteRange?
        /// Whether the byte just before the cursor is stored (the read has just given cached bytes).
        var storedBefore = false
        /// The current download, if the read has joined one.
        var download: DownloadView?
        /// Whether the entry is encrypted: every byte read back is opened again, so bytes in
        /// a download's memory are always preferred.
        var encrypted = false
        /// Whether the read has an entry to read stored bytes from.
        var hasEntry = true
        /// Whether the read takes a body straight from the origin (no length: see
        /// `ReadSession.PassThrough`).
        var passesThrough = false
    }

    enum Action: Equatable {
        /// The cursor is at the range's end: finish once what was given is stored.
        case finish(storedUpTo: Int64)
        /// Give bytes the download holds in memory, from the cursor.
        case takeHeld(ByteBuffer)
        /// Give stored bytes, from the cursor within this span.
        case readStored(span: ByteRange)
        /// Give the next bytes of the body streamed through.
        case readPassThrough
        /// Wait the hole delay before asking the origin (a player's cancel may be on its way).
        case pause
        /// Leave the current download and join or start one for the hole at the cursor.
        case attach(at: Int64)
        /// Wait until the current download delivers the byte at the cursor.
        case waitForBytes
        /// Look again: something changed while the reader looked (stored meanwhile, a
        /// download that ended before the cursor).
        case lookAgain
        /// End the read with this error.
        case fail(Failure)

        static func == (lhs: Action, rhs: Action) -> Bool {
            switch (lhs, rhs) {
            case (.finish(let a), .finish(let b)): a == b
            case (.takeHeld(let a), .takeHeld(let b)): a == b
            case (.readStored(let a), .readStored(let b)): a == b
            case (.pause, .pause), (.waitForBytes, .waitForBytes), (.lookAgain, .lookAgain),
                (.readPassThrough, .readPassThrough):
                true
            case (.attach(let a), .attach(let b)): a == b
            case (.fail(let a), .fail(let b)): a.description == b.description
            default: false
            }
        }
    }

    /// Why a read fails.
    enum Failure: CustomStringConvertible {
        /// The read was closed.
        case closed
        /// Its download failed.
        case download(any Error)
        /// Downloads keep ending before the cursor.
        case fruitless(at: Int64)
        /// Bytes were delivered but are neither stored nor held.
        case lost(at: Int64)

        var description: String {
            switch self {
            case .closed: "closed"
            case .download(let error): "download failed: \(error)"
            case .fruitless(let cursor): "downloads keep ending before \(cursor)"
            case .lost(let cursor): "bytes at \(cursor) neither stored nor held"
            }
        }
    }

    /// The read's range.
    let range: ByteRange
    /// Whether the read pauses at a hole right after stored bytes (a hole delay is set).
    let pausesAtHoles: Bool
    /// How many downloads in a row may end before the cursor.
    static let fruitlessLimit = 3

    private(set) var cursor: Int64
    private(set) var isClosed = false
    /// The hole the read last paused at.
    private(set) var pausedAt: Int64?
    /// Whether the read has joined a download: its client took bytes as the origin sent them,
    /// so it reads on, and a later hole is asked for without a pause (a pause is for a client
    /// that may leave once it has had the cached bytes: a preloaded play that is swiped away).
    private(set) var hasWaitedOnOrigin = false
    /// Downloads that ended without reaching the cursor, in a row.
    private(set) var fruitlessDownloads = 0

    /// Whether a read of `range`, of a resource of `length` bytes (`nil`: not known), pauses at
    /// a hole after stored bytes: a read to the resource's end (an open range, or a closed one
    /// to the last byte) may be left once its client has what it wants, so it does. A closed
    /// range that ends before the resource's end names the bytes its client wants: its holes
    /// are asked for at once.
    static func pausesAtHoles(reading range: ByteRange, of length: Int64?) -> Bool {
        length.map { range.upperBound >= $0 } ?? true
    }

    init(range: ByteRange, pausesAtHoles: Bool) {
        self.range = range
        self.pausesAtHoles = pausesAtHoles
        cursor = range.lowerBound
    }

    /// The next action for what the reader sees now.
    mutating func next(_ seen: Observation) -> Action {
        if isClosed { return .fail(.closed) }
        guard cursor < range.upperBound else { return .finish(storedUpTo: cursor) }
        if seen.passesThrough { return .readPassThrough }

        // Just fetched, at the download's front: the download still holds it in memory. A
        // reader further behind reads the longer stored span in one part instead, unless the
        // entry is encrypted.
        if let held = seen.download?.held,
            seen.encrypted || (seen.stored?.upperBound ?? 0) - cursor <= Int64(held.readableBytes)
        {
            return .takeHeld(held)
        }
        if seen.hasEntry, let span = seen.stored { return .readStored(span: span) }

        // Missing.
        if case .failed(let error)? = seen.download?.state { return .fail(.download(error)) }
        guard let download = seen.download, (download.start..<download.end).contains(cursor) else {
            if pausesAtHoles, !hasWaitedOnOrigin, cursor > range.lowerBound, seen.storedBefore, pausedAt != cursor {
                return .pause
            }
            hasWaitedOnOrigin = true
            return .attach(at: cursor)
        }
        if download.position > cursor {
            // Stored while the reader looked: read it from the store on the next turn.
            return seen.hasEntry ? .lookAgain : .fail(.lost(at: cursor))
        }
        switch download.state {
        case .completed, .cancelled, .failed:
            // It ended before the cursor (the origin cut it short, or another download
            // fetched its bytes): another one, a few times in a row at most.
            fruitlessDownloads += 1
            guard fruitlessDownloads <= Self.fruitlessLimit else { return .fail(.fruitless(at: cursor)) }
            hasWaitedOnOrigin = true
            return .attach(at: cursor)
        case .awaitingResponse, .receiving, .resuming:
            return .waitForBytes
        }
    }

    /// The read gave everything before `position`.
    mutating func advance(to position: Int64) {
        precondition(position >= cursor && position <= range.upperBound, "a read moves forward within its range")
        cursor = position
        fruitlessDownloads = 0
    }

    /// The pause at the cursor has begun (it happens once per cursor).
    mutating func paused() {
        pausedAt = cursor
    }

    mutating func close() {
        isClosed = true
    }
}
