// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import NIOHTTP1

/// The writing of one answer whose body comes in parts (a read's, or a feed's lines) to a
/// connection, as a pure value: it decides, from what happens (a part of the body arrives,
/// the body ends, the read fails), what the connection writes, and whether the connection
/// stays open. ``ResponseSender`` carries the decisions out; `ResponseWriterTests` checks every
/// path without a socket.
///
/// - The head of a read waits for the first part, so a read that fails before its first
///   byte (a refused origin answer) still gets its own status rather than a cut. A feed's
///   head goes at once: nothing of it can fail, and its first line may be long in coming.
/// - The head goes with the first part, and the end marker with the last one (a part that
///   reaches the body's end, from the store): one flush for a cached range.
/// - At most two parts are in the socket's queue: each part is written before the one before
///   it is awaited, so a slow client holds the read back instead of filling memory.
/// - A failure after the head cuts the connection: a player must never get wrong bytes under
///   a success status. Once every body byte is in the socket the answer is whole, whatever
///   happens to the end marker.
struct ResponseWriter: Equatable {
    /// A part of the body, as the writer needs to know it.
    enum Part: Equatable {
        /// `count` bytes from memory (they may still be being written to the store, so the
        /// end marker waits for the read's end).
        case bytes(count: Int64)
        /// Stored bytes up to `end` (exclusive), sent from the data file.
        case file(end: Int64)
    }

    /// What to write for a part.
    struct PartWrite: Equatable {
        /// The head goes first, in the same flush.
        var withHead: Bool
        /// The end marker follows, in the same flush; no further part is asked for.
        var endsBody: Bool
        /// The part before this one must be in the socket before the next is asked for.
        var awaitsPrevious: Bool
    }

    /// What to do when the read fails.
    enum Failure: Equatable {
        /// Nothing was sent: answer with the error's own status instead.
        case answerInstead
        /// The head was sent: close the connection, and end the request's log line so.
        case cut(CutLog)
    }

    /// How the log line of a cut answer ends.
    enum CutLog: Equatable {
        /// It has ended: every body byte was in the socket.
        case alreadyEnded
        /// As a whole answer: the client had every byte when it went away.
        case whole
        /// With the error.
        case failed
    }

    /// Where the body ends.
    let end: Int64
    /// The head is written before any part is waited for.
    let writesHeadFirst: Bool
    /// Where the next part starts.
    private(set) var sent: Int64
    private(set) var headIsSent: Bool
    private(set) var partsWritten = 0
    /// Every body byte is in the socket.
    private(set) var isComplete = false

    /// A writer for a read of the body `range`.
    init(range: ByteRange) {
        self.init(start: range.lowerBound, end: range.upperBound, writesHeadFirst: false)
    }

    private init(start: Int64, end: Int64, writesHeadFirst: Bool) {
        self.end = end
        self.sent = start
        self.writesHeadFirst = writesHeadFirst
        self.headIsSent = writesHeadFirst
    }

    /// A writer for a feed: lines of unknown number and length, the head at once.
    static var feed: ResponseWriter { ResponseWriter(start: 0, end: .max, writesHeadFirst: true) }

    /// Whether a connection stays open after an answer with `headers`: when the client asked,
    /// and the body's end is known without closing (an HTTP/1.0 client cannot read chunks, so
    /// a body without a length ends with the connection).
    static func keepsAlive(requested: Bool, version: HTTPVersion, headers: HTTPHeaders) -> Bool {
        requested && ((version.major, version.minor) >= (1, 1) || headers.contains(name: "content-length"))
    }

    /// A part arrived: write it.
    mutating func write(_ part: Part) -> PartWrite {
        switch part {
        case .bytes(let count): sent += count
        case .file(let end): sent = end
        }
        let isFile = if case .file = part { true } else { false }
        let write = PartWrite(withHead: !headIsSent, endsBody: isFile && sent >= end, awaitsPrevious: partsWritten > 0)
        headIsSent = true
        partsWritten += 1
        return write
    }

    /// Every part written is in the socket. Returns whether the head is still to be written
    /// (an empty body) and whether the end marker is still to be written.
    mutating func allWritten(lastWriteEndedBody: Bool) -> (writesHead: Bool, writesEnd: Bool) {
        defer {
            headIsSent = true
            isComplete = true
        }
        return (!headIsSent, !lastWriteEndedBody)
    }

    /// The read failed (`isCancellation`: because the client went away).
    func failed(isCancellation: Bool) -> Failure {
        guard headIsSent else { return .answerInstead }
        if isComplete { return .cut(.alreadyEnded) }
        // A client that has every byte of a sized body may hang up before the read has seen
        // its bytes stored (the read's last wait): that answer is whole.
        return .cut(isCancellation && sent >= end ? .whole : .failed)
    }
}
