// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport

@testable import MediaCache

/// A world of hosts, files, players and the cache's own work, in which the real pure machines
/// decide: each host's ``ConnectionBudgetStateMachine``, each transfer's ``TransferPolicy``, the
/// fills' ``FillPolicy``. What the model adds is their executor, as ``OriginTransfer``,
/// ``ReadSession``, ``OriginPriority`` and ``FillOnPlay`` carry the machines' answers out, on a
/// manual clock of ticks: a chunk is one unit of a file, an origin answers or sends a chunk when
/// the schedule says so.
///
/// ``step()`` takes one random event (a player arrives, seeks or hangs up; the cache's own work of
/// a kind starts; an origin answers, sends a chunk or fails; the clock ticks; the network turns
/// metered; an entry is removed), carries out everything that follows from it without another
/// event, and checks the invariants (``violations``). ``drain()`` then lets the origins finish
/// with no new arrival and checks that everything ended: no player waits forever, every
/// connection is returned, every fill completed or stopped for a stated reason.
struct TransferModel {
    /// How the executor differs from today's.
    enum Variant {
        /// As the code is.
        case current
        /// As e48a7a1 ran fills: the probe's answer, kept in the transfer's value, held its
        /// connection until the transfer ended, and fills had no cap.
        case e48a7a1
    }

    struct File {
        var length: Int
        var audio: Bool
        var stored: Set<Int> = []
        var isWhole: Bool { stored.count == length }
    }

    enum Exec: Equatable {
        /// At the loop's top: the next request, or the end.
        case top
        /// Giving way to players (``OriginPriority/yieldToPlayers(seen:unless:)``): parked until
        /// the players' waits change from `parked` (a wait begins, or the last one ends) or the
        /// quiet period's timer fires.
        case yielding(seen: Int, needsQuiet: Bool, parked: Park?, timer: Int?)
        /// Waiting for a connection of its host.
        case acquiring(waiter: UInt64, requester: Requester)
        /// A request is out, its answer not in.
        case awaitingAnswer
        /// The answer is in; the next chunk is the origin's to send.
        case reading
        /// Keeping to a pin's rate, until the tick, or a change of the players' waits after which
        /// the policy ends the wait (``OriginPriority/pause(for:unless:)``).
        case pacing(until: Int, parked: Park)
        /// At a piece's end (a host asked in pieces, ``PiecedFetcher``): the body goes on once
        /// the next piece, asked ahead, has a connection of its own.
        case awaitingPiece
        case ended
    }

    /// What a parked wait was parked on: the count of waits begun, and whether none was under way.
    struct Park: Equatable {
        var generation: Int
        var idle: Bool
    }

    struct Transfer {
        let id: Int
        let host: Int
        let file: Int
        let startedBy: Requester
        var start: Int
        var end: Int
        var position: Int
        var requestEnd: Int
        /// `nil` while a probe's answer is awaited (the policy is made when it comes).
        var policy: TransferPolicy?
        var exec: Exec
        /// The players reading it, with where each one's read ends.
        var players: [Int: Int] = [:]
        var own: Set<Int> = []
        var hadReaders = false
        /// A player joined during the current request, or it served one when sent: its pieces
        /// still to come are players' (the download's ``ConnectionBudget/Promotion``).
        var requestPromoted = false
        var filling = false
        var everFilled = false
        var fillStop: FillStop?
        /// A connection held: whether as the cache's own, and whether it is a probe's answer's.
        var hold: (isOwn: Bool, isProbes: Bool)?
        /// e48a7a1: a probe's answer's connection, still held after its body (whether as the
        /// cache's own).
        var retained: Bool?
        /// The wait count it saw when it last gave way (``OriginTransfer``'s `seen`).
        var seen = 0
        /// On a host asked in pieces: where the current piece began, and the next piece's request,
        /// asked ahead while this one's body flows, with a connection of its own.
        var pieceStart = 0
        var ahead: Ahead?
        var isProbe: Bool
        var outcome: String?

        /// A player wants bytes it has not delivered, or the player who started it has not joined.
        var servesPlayer: Bool {
            players.values.contains { $0 > position } || (startedBy.isPlayer && !hadReaders)
        }
        var readers: Int { players.count + own.count }
        var isEnded: Bool { exec == .ended }
    }

    /// The next piece's request: its wait for a connection, and whether it has one.
    struct Ahead {
        var waiter: UInt64
        var isOwn: Bool
        var granted = false
    }

    struct Reader {
        let id: Int
        let host: Int
        let file: Int
        let requester: Requester
        let end: Int
        var cursor: Int
        var transfer: Int?
        var done = false
        /// The transfer a player waits on for its next byte (each wait is one, as each of a
        /// session's waits is, ``OriginPriority/whilePlayerWaits(_:_:)``).
        var waitingOn: Int?
        var waiting: Bool { waitingOn != nil }
        var isPlayer: Bool { requester.isPlayer }
    }

    let variant: Variant
    let grace = 2
    let capacity = 2
    var random: SplitMix
    var now = 0
    var hosts: [ConnectionBudgetStateMachine] = []
    /// Per host, the chunks of a piece when the host is asked in pieces.
    var pieces: [Int?] = []
    var files: [[File]] = []
    var transfers: [Int: Transfer] = [:]
    var readers: [Int: Reader] = [:]
    var nextID = 0
    var nextWaiter: UInt64 = 0
    var waiters: [UInt64: Int] = [:]
    var admitted: Set<UInt64> = []
    var promoted: Set<UInt64> = []
    /// Player waits begun (for bytes or for a connection): ``OriginPriority``'s generation.
    var waitBegins = 0
    var fillsAllowed = true
    var fills: [Int] = []
    /// What happened, in order: the schedule.
    var schedule: [String] = []
    var violations: [String] = []
    var fillOutcomes: [String] = []
    /// Bodies that read on with a piece asked ahead, and pieces that waited for a connection.
    var piecesReadOn = 0
    var piecesWaited = 0
    var steps = 0

    init(seed: UInt64, variant: Variant) {
        self.variant = variant
        random = SplitMix(seed: seed)
        let hostCount = Int.random(in: 2...3, using: &random)
        for _ in 0..<hostCount {
            let limit = Int.random(in: 1...4, using: &random)
            hosts.append(ConnectionBudgetStateMachine(limit: limit, ownLimit: max(1, limit / 4)))
            pieces.append(Bool.random(using: &random) ? Int.random(in: 1...3, using: &random) : nil)
            files.append(
                (0..<Int.random(in: 2...5, using: &random)).map { _ in
                    File(length: Int.random(in: 2...10, using: &random), audio: Bool.random(using: &random))
                })
        }
    }

    // MARK: Events

    /// One random event and all that follows from it; `false` when none could happen.
    @discardableResult
    mutating func step(arrivals: Bool = true) -> Bool {
        steps += 1
        var events: [Event] = []
        if arrivals {
            events += [.player, .player, .own, .tick, .meter, .remove]
            for id in readers.keys.sorted() where !readers[id]!.done { events.append(.hangUp(id)) }
        } else {
            events.append(.tick)
        }
        for transfer in transfers.keys.sorted().map({ transfers[$0]! }) {
            switch transfer.exec {
            case .awaitingAnswer: events += [.answer(transfer.id), .answer(transfer.id)]
            case .reading: events += [.chunk(transfer.id), .chunk(transfer.id), .chunk(transfer.id)]
            default: break
            }
        }
        guard !events.isEmpty else { return false }
        let event = events[Int.random(in: 0..<events.count, using: &random)]
        apply(event)
        settle()
        check()
        // What ended can change nothing more (a reader's transfer that ended is `nil` to it).
        readers = readers.filter { !$0.value.done }
        transfers = transfers.filter { !$0.value.isEnded }
        return true
    }

    enum Event {
        case player, own, tick, meter, remove
        case hangUp(Int)
        case answer(Int)
        case chunk(Int)
    }

    mutating func apply(_ event: Event) {
        switch event {
        case .player: arrive(.player)
        case .own:
            let kinds: [Requester] = [
                .own(.preload), .own(.readAhead), .own(.prefetch), .own(.recording),
                .own(.pin, pacer: Self.pacer),
            ]
            arrive(kinds[Int.random(in: 0..<kinds.count, using: &random)])
        case .tick:
            now += 1
            note("tick \(now)")
        case .meter:
            fillsAllowed.toggle()
            note(fillsAllowed ? "network unmetered" : "network metered")
        case .remove:
            let host = Int.random(in: 0..<files.count, using: &random)
            let file = Int.random(in: 0..<files[host].count, using: &random)
            // An entry is never evicted while it is open: a removal (`rm`, a new version) is.
            note("entry h\(host)/f\(file) removed")
            files[host][file].stored = []
            for id in transfers.keys.sorted() {
                let transfer = transfers[id]!
                guard transfer.host == host, transfer.file == file, !transfer.isEnded else { continue }
                end(id, "failed: entry removed", reason: .entryRemoved)
            }
        case .hangUp(let id):
            guard let reader = readers[id], !reader.done else { return }
            note("\(name(reader)) hangs up at \(reader.cursor)")
            finish(id)
        case .answer(let id):
            answer(id)
        case .chunk(let id):
            chunk(id)
        }
    }

    /// A player or the cache's own work starts to read a range of a file.
    mutating func arrive(_ requester: Requester) {
        let host = Int.random(in: 0..<files.count, using: &random)
        let file = Int.random(in: 0..<files[host].count, using: &random)
        let length = files[host][file].length
        let start = Int.random(in: 0..<length, using: &random)
        // Closed ranges (AVPlayer's) and open ones (ffmpeg's, mpv's).
        let end = Bool.random(using: &random) ? Int.random(in: (start + 1)...length, using: &random) : length
        nextID += 1
        let reader = Reader(id: nextID, host: host, file: file, requester: requester, end: end, cursor: start)
        readers[reader.id] = reader
        note("\(name(reader)) reads h\(host)/f\(file) [\(start), \(end)) of \(length)")
    }

    /// The origin answers a request (or it fails).
    mutating func answer(_ id: Int) {
        guard var transfer = transfers[id], transfer.exec == .awaitingAnswer else { return }
        if Int.random(in: 0..<20, using: &random) == 0 {
            note("t\(id): the request failed")
            transfers[id] = transfer
            fail(id)
            return
        }
        if transfer.policy == nil {
            transfer.policy = TransferPolicy(startedBy: transfer.startedBy, answered: true)
        }
        let fileState = files[transfer.host][transfer.file]
        let answer = TransferPolicy.Answer(
            stores: true, isStorable: true, isFullBody: false, isFilling: transfer.filling,
            length: Int64(fileState.length), isCovered: fillsAllowed && fileState.audio)
        var policy = transfer.policy!
        let fills = policy.answered(answer) == .receive(filling: true)
        transfer.policy = policy
        transfer.exec = .reading
        transfer.pieceStart = transfer.position
        note("t\(id): answered")
        transfers[id] = transfer
        if fills { startFill(id) }
        askAhead(id)
    }

    /// The origin sends the next chunk of the answer (or the connection breaks).
    mutating func chunk(_ id: Int) {
        guard let transfer = transfers[id], transfer.exec == .reading else { return }
        if Int.random(in: 0..<30, using: &random) == 0 {
            note("t\(id): the connection broke at \(transfer.position)")
            fail(id)
            return
        }
        if files[transfer.host][transfer.file].stored.contains(transfer.position) {
            note("t\(id): chunk \(transfer.position) is stored already")
            bodyEnded(id)
            return
        }
        note("t\(id): chunk \(transfer.position) arrives")
        let seen = situation(of: transfer)
        act(id, mutatingPolicy(id) { $0.chunkArrived(seen) })
    }

    // MARK: Invariants

    /// After every step: the budgets count what is held; no connection is held by work that
    /// moves no bytes while a player waits for one on its host.
    mutating func check() {
        for (host, budget) in hosts.enumerated() {
            let held = transfers.values.filter {
                $0.host == host && ($0.hold != nil || $0.retained != nil || $0.ahead?.granted == true)
            }
            let count = held.reduce(0) {
                $0 + ($1.hold == nil ? 0 : 1) + ($1.retained == nil ? 0 : 1) + ($1.ahead?.granted == true ? 1 : 0)
            }
            let own = held.reduce(0) {
                $0 + ($1.hold?.isOwn == true ? 1 : 0) + ($1.retained == true ? 1 : 0)
                    + ($1.ahead.map { $0.granted && $0.isOwn } == true ? 1 : 0)
            }
            if budget.inUse != count || budget.ownInUse != own {
                violations.append(
                    "h\(host): the budget counts \(budget.inUse) (\(budget.ownInUse) own), transfers hold \(count) (\(own) own)"
                )
            }
            // A request a player waits on never waits as the cache's own (``Promotion``).
            for transfer in transfers.values where transfer.host == host && transfer.servesPlayer {
                var own: [UInt64] = []
                if case .acquiring(let waiter, let requester) = transfer.exec, !requester.isPlayer {
                    own.append(waiter)
                }
                if let ahead = transfer.ahead, !ahead.granted, ahead.isOwn { own.append(ahead.waiter) }
                for waiter in own where !promoted.contains(waiter) && waiters[waiter] != nil {
                    violations.append("h\(host): t\(transfer.id) waits as the cache's own while a player waits on it")
                }
            }
            guard !budget.players.isEmpty else { continue }
            for transfer in held where !transfer.servesPlayer {
                let moves = (transfer.exec == .awaitingAnswer || transfer.exec == .reading) && transfer.retained == nil
                if !moves {
                    let work = transfer.startedBy.isPlayer ? "a fill" : transfer.startedBy.description
                    violations.append(
                        "h\(host): a player waits for a connection that t\(transfer.id) (\(work)) holds, moving no bytes (\(transfer.exec))"
                    )
                }
            }
        }
    }

    /// No new arrival: the origins answer and send until nothing is left, or the bound is hit.
    /// Then everything must have ended.
    mutating func drain(bound: Int = 20_000) {
        var count = 0
        while count < bound, !isQuiet {
            step(arrivals: false)
            count += 1
        }
        if !isQuiet {
            let stuck = readers.values.filter { !$0.done }.map { reader in
                let transfer = reader.transfer.flatMap { transfers[$0] }
                return "\(name(reader)) at \(reader.cursor) of h\(reader.host)/f\(reader.file) on "
                    + (transfer.map { "t\($0.id) [\($0.start), \($0.end)) at \($0.position), \($0.exec)" } ?? "none")
            }
            let waiting = hosts.enumerated().filter { !$0.element.players.isEmpty }.map { "h\($0.offset)" }
            violations.append(
                "not live after \(bound) more events: \(stuck.count) readers unfinished (\(stuck.prefix(4).joined(separator: ", "))), players wait for connections on \(waiting)"
            )
        }
        for (host, budget) in hosts.enumerated() where budget.inUse != 0 || budget.waiting != 0 {
            violations.append("h\(host): \(budget.inUse) connections never returned, \(budget.waiting) waiting")
        }
        for outcome in fillOutcomes where outcome == "stopped for no reason" {
            violations.append("a fill stopped for no stated reason")
        }
    }

    var isQuiet: Bool {
        readers.values.allSatisfy(\.done) && transfers.values.allSatisfy(\.isEnded)
    }

    func name(_ reader: Reader) -> String {
        "\(reader.isPlayer ? "player" : reader.requester.description) r\(reader.id)"
    }

    mutating func note(_ line: String) {
        schedule.append("\(steps): \(line)")
    }

    static let pacer = DownloadPacer(rates: [], store: nil)
}
