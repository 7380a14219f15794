// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport

@testable import MediaCache

/// How readers (players and the cache's own work) move in the model: over stored chunks, onto the
/// transfer that will soon reach them or a new one, and off when they are done or hang up; and
/// which players wait on an origin (``OriginPriority``'s count).
extension TransferModel {
    // MARK: The executor

    /// Carries out everything that follows without an event, until nothing changes.
    mutating func settle() {
        var changed = true
        var rounds = 0
        while changed {
            rounds += 1
            precondition(rounds < 10_000, "the model does not settle")
            changed = false
            for id in readers.keys.sorted() where advanceReader(id) { changed = true }
            for id in transfers.keys.sorted() where advanceTransfer(id) { changed = true }
            if updateWaits() { changed = true }
        }
    }

    /// A reader moves over stored chunks, ends, or joins or starts a transfer; whether it changed.
    mutating func advanceReader(_ id: Int) -> Bool {
        guard var reader = readers[id], !reader.done else { return false }
        let before = (reader.cursor, reader.transfer)
        if let current = reader.transfer,
            transfers[current].map({ $0.isEnded || reader.cursor >= $0.end || reader.cursor < $0.start }) ?? true
        {
            leave(id, current)
            reader = readers[id]!
            reader.transfer = nil
        }
        if reader.transfer == nil {
            while reader.cursor < reader.end, files[reader.host][reader.file].stored.contains(reader.cursor) {
                reader.cursor += 1
            }
        }
        readers[id] = reader
        if reader.cursor >= reader.end {
            finish(id)
            return true
        }
        if reader.transfer == nil { attach(id) }
        return (readers[id]!.cursor, readers[id]!.transfer) != before
    }

    /// Joins a transfer that will soon reach the reader's cursor, or starts one.
    mutating func attach(_ id: Int) {
        var reader = readers[id]!
        let candidates = transfers.values.filter {
            $0.host == reader.host && $0.file == reader.file && !$0.isEnded && $0.start <= reader.cursor
                && reader.cursor < $0.end && reader.cursor <= $0.position + 1
        }
        if let joined = candidates.min(by: { $0.id < $1.id }) {
            reader.transfer = joined.id
            readers[id] = reader
            addReader(id, to: joined.id)
            return
        }
        let stored = files[reader.host][reader.file].stored
        var end = reader.cursor + 1
        while end < reader.end, !stored.contains(end) { end += 1 }
        for other in transfers.values
        where other.host == reader.host && other.file == reader.file && !other.isEnded && other.start > reader.cursor {
            end = min(end, other.start)
        }
        nextID += 1
        // A read at a hole, or a probe: its first request carries the content question and the
        // transfer is made when the answer comes.
        let isProbe = Bool.random(using: &random)
        var transfer = Transfer(
            id: nextID, host: reader.host, file: reader.file, startedBy: reader.requester, start: reader.cursor,
            end: end, position: reader.cursor, requestEnd: end,
            policy: isProbe ? nil : TransferPolicy(startedBy: reader.requester, answered: false), exec: .top,
            isProbe: isProbe)
        transfer.seen = waitBegins
        transfers[transfer.id] = transfer
        note("t\(transfer.id) for \(name(reader)): [\(reader.cursor), \(end))\(isProbe ? ", a probe" : "")")
        reader.transfer = transfer.id
        readers[id] = reader
        addReader(id, to: transfer.id)
        if isProbe {
            transfer = transfers[transfer.id]!
            if reader.isPlayer {
                send(transfer.id, as: .player)
            } else {
                // The cache's own question gives way to players first (``CachingReader``).
                startYielding(transfer.id)
            }
        }
    }

    mutating func addReader(_ reader: Int, to id: Int) {
        guard var transfer = transfers[id] else { return }
        if readers[reader]!.isPlayer {
            transfer.players[reader] = readers[reader]!.end
        } else {
            transfer.own.insert(reader)
        }
        transfer.hadReaders = true
        transfers[id] = transfer
        // A player that joins a request waiting as the cache's own makes it a player's (a
        // transfer's, or a probe's it waits on: ``CachingReader/Probe``).
        guard readers[reader]!.isPlayer else { return }
        transfers[id]!.requestPromoted = true
        if case .acquiring(let waiter, let requester) = transfer.exec, !requester.isPlayer, !promoted.contains(waiter) {
            promote(id, waiter)
        }
        // The piece asked ahead too, when it waits (``PiecedFetcher``).
        if let ahead = transfer.ahead, !ahead.granted, ahead.isOwn, !promoted.contains(ahead.waiter) {
            promote(id, ahead.waiter)
        }
    }

    mutating func leave(_ reader: Int, _ id: Int) {
        guard var transfer = transfers[id] else { return }
        transfer.players[reader] = nil
        transfer.own.remove(reader)
        transfers[id] = transfer
        // The last reader leaving ends a download that does not fill (``DownloadStateMachine``).
        if transfer.readers == 0, !transfer.isEnded, !transfer.filling {
            end(id, "cancelled: its readers left", reason: .shutDown)
        }
    }

    mutating func finish(_ id: Int) {
        guard var reader = readers[id], !reader.done else { return }
        if let transfer = reader.transfer { leave(id, transfer) }
        reader.done = true
        reader.transfer = nil
        reader.waitingOn = nil
        readers[id] = reader
    }

    /// One synchronous step of transfer `id`; whether it changed.

    mutating func updateWaits() -> Bool {
        var changed = false
        for id in readers.keys.sorted() {
            guard var reader = readers[id], !reader.done, reader.isPlayer else { continue }
            let waits = reader.transfer.flatMap { transfers[$0] }.map { $0.position <= reader.cursor } ?? false
            let on = waits ? reader.transfer : nil
            if on != reader.waitingOn {
                reader.waitingOn = on
                readers[id] = reader
                if on != nil { waitBegins += 1 }
                changed = true
            }
        }
        return changed
    }

    /// Player reads waiting on an origin: for bytes, or for a connection.
    var playersWaiting: Int {
        readers.values.filter(\.waiting).count + hosts.reduce(0) { $0 + $1.players.count }
    }
}
