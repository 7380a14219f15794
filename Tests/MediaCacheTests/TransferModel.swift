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
        var filling = false
        var everFilled = false
        var fillStop: FillStop?
        /// A connection held: whether as the cache's own, and whether it is a probe's answer's.
        var hold: (isOwn: Bool, isProbes: Bool)?
        /// e48a7a1: a probe's answer's connection, still held after its body (whether as the
        /// cache's own).
        var retained: Bool?
        var failures = 0
        /// The wait count it saw when it last gave way (``OriginTransfer``'s `seen`).
        var seen = 0
        var isProbe: Bool
        var outcome: String?

        /// A player wants bytes it has not delivered, or the player who started it has not joined.
        var servesPlayer: Bool {
            players.values.contains { $0 > position } || (startedBy.isPlayer && !hadReaders)
        }
        var readers: Int { players.count + own.count }
        var isEnded: Bool { exec == .ended }
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
    var steps = 0

    init(seed: UInt64, variant: Variant) {
        self.variant = variant
        random = SplitMix(seed: seed)
        let hostCount = Int.random(in: 2...3, using: &random)
        for _ in 0..<hostCount {
            let limit = Int.random(in: 1...4, using: &random)
            hosts.append(ConnectionBudgetStateMachine(limit: limit, ownLimit: max(1, limit / 4)))
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
        let fills = policy.answered(answer)
        transfer.policy = policy
        transfer.exec = .reading
        note("t\(id): answered")
        transfers[id] = transfer
        if fills { startFill(id) }
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
        if readers[reader]!.isPlayer, case .acquiring(let waiter, let requester) = transfer.exec,
            !requester.isPlayer, !promoted.contains(waiter)
        {
            promote(id, waiter)
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
    mutating func advanceTransfer(_ id: Int) -> Bool {
        guard let transfer = transfers[id] else { return false }
        let before = transfer.exec
        switch transfer.exec {
        case .top:
            top(id)
        case .yielding(_, _, let parked, let timer):
            let fired = timer.map { now >= $0 } ?? false
            if let parked, parked == park, !fired { break }
            yieldStep(id)
        case .acquiring(let waiter, let requester):
            if admitted.remove(waiter) != nil {
                waiters[waiter] = nil
                let isOwn = !requester.isPlayer && promoted.remove(waiter) == nil
                transfers[id]!.hold = (isOwn: isOwn, isProbes: transfer.policy == nil)
                transfers[id]!.exec = .awaitingAnswer
            }
        case .pacing(let until, let parked):
            if now >= until || (parked != park && transfer.policy!.endsWait(situation(of: transfer))) {
                let seen = situation(of: transfer)
                act(id, mutatingPolicy(id) { $0.paced(seen) })
            } else if parked != park {
                transfers[id]!.exec = .pacing(until: until, parked: park)
            }
        case .awaitingAnswer, .reading, .ended:
            break
        }
        return transfers[id].map { $0.exec != before } ?? true
    }

    /// The loop's top (``OriginTransfer/run()``): the end, bytes the store has, or the next request.
    mutating func top(_ id: Int) {
        var transfer = transfers[id]!
        if transfer.position >= transfer.end {
            end(id, "completed", reason: nil)
            return
        }
        let stored = files[transfer.host][transfer.file].stored
        if stored.contains(transfer.position) {
            guard transfer.policy!.goesOnPastStoredBytes(situation(of: transfer)) else {
                end(id, "completed: the rest is stored", reason: nil)
                return
            }
            var next = transfer.position
            while next < transfer.end, stored.contains(next) { next += 1 }
            transfer.position = next
            transfers[id] = transfer
            return  // looked at again at the top
        }
        var requestEnd = transfer.position + 1
        while requestEnd < transfer.end, !stored.contains(requestEnd) { requestEnd += 1 }
        transfer.requestEnd = requestEnd
        transfers[id] = transfer
        let seen = situation(of: transfer)
        act(id, mutatingPolicy(id) { $0.next(seen) })
    }

    /// The players' waits now, as a parked wait compares them.
    var park: Park { Park(generation: waitBegins, idle: playersWaiting == 0) }

    /// Begins to give way to players (``OriginPriority/yieldToPlayers(seen:unless:)``) from the
    /// wait count it saw last.
    mutating func startYielding(_ id: Int) {
        transfers[id]!.exec = .yielding(seen: transfers[id]!.seen, needsQuiet: false, parked: nil, timer: nil)
        yieldStep(id)
    }

    /// One turn of ``OriginPriority/yieldToPlayers(seen:unless:)``'s loop.
    mutating func yieldStep(_ id: Int) {
        guard let transfer = transfers[id], case .yielding(let seen, let needsQuiet, _, _) = transfer.exec else {
            return
        }
        let situation = situation(of: transfer)
        let ends = transfer.policy.map { $0.endsWait(situation) } ?? situation.servesPlayer
        let waiting = playersWaiting
        if ends || (waiting == 0 && waitBegins == seen && !needsQuiet) {
            transfers[id]!.seen = seen
            yielded(id)
        } else if waiting > 0 {
            transfers[id]!.exec = .yielding(seen: seen, needsQuiet: true, parked: park, timer: nil)
        } else {
            transfers[id]!.exec = .yielding(seen: waitBegins, needsQuiet: false, parked: park, timer: now + grace)
        }
    }

    mutating func yielded(_ id: Int) {
        guard let transfer = transfers[id] else { return }
        guard transfer.policy != nil else {
            // The cache's own probe, once players are quiet: it asks as its requester.
            send(id, as: transfer.servesPlayer ? .player : transfer.startedBy)
            return
        }
        let seen = situation(of: transfer)
        act(id, mutatingPolicy(id) { $0.yielded(seen) })
    }

    /// Carries out what the policy says.
    mutating func act(_ id: Int, _ action: TransferPolicy.Action) {
        guard transfers[id] != nil, !transfers[id]!.isEnded else { return }
        switch action {
        case .yield:
            startYielding(id)
        case .send(let requester):
            send(id, as: requester)
        case .stopFilling(let reason):
            stopFilling(id, reason)
            guard let transfer = transfers[id], !transfer.isEnded else { return }
            let seen = situation(of: transfer)
            act(id, mutatingPolicy(id) { $0.chunkArrived(seen) })
        case .pace:
            transfers[id]!.exec = .pacing(until: now + 2, parked: park)
        case .deliver:
            deliver(id)
            guard let transfer = transfers[id], !transfer.isEnded else { return }
            if transfer.position >= transfer.requestEnd { bodyEnded(id) } else { transfers[id]!.exec = .reading }
        case .deliverAndLetGo:
            note("t\(id) lets its connection go")
            deliver(id)
            guard transfers[id] != nil, !transfers[id]!.isEnded else { return }
            release(id)
            transfers[id]!.exec = .top
        }
    }

    mutating func send(_ id: Int, as requester: Requester) {
        let transfer = transfers[id]!
        nextWaiter += 1
        let waiter = nextWaiter
        var budget = hosts[transfer.host]
        let holds = budget.acquire(.init(id: waiter, isOwn: !requester.isPlayer))
        hosts[transfer.host] = budget
        if holds {
            transfers[id]!.hold = (isOwn: !requester.isPlayer, isProbes: transfer.policy == nil)
            transfers[id]!.exec = .awaitingAnswer
        } else {
            waiters[waiter] = id
            transfers[id]!.exec = .acquiring(waiter: waiter, requester: requester)
            // A player's wait for a connection wakes the transfers that may hold one (``ConnectionBudget``).
            if requester.isPlayer { waitBegins += 1 }
            // A request for a player who joined already is a player's at once (``SharedDownload``).
            if !requester.isPlayer, transfer.servesPlayer { promote(id, waiter) }
        }
    }

    /// Makes the waiting request of the cache's own a player's (``ConnectionBudget/Promotion``),
    /// which wakes the transfers that may hold a connection it should have.
    mutating func promote(_ id: Int, _ waiter: UInt64) {
        var budget = hosts[transfers[id]!.host]
        let (wasWaiting, admits) = budget.promote(waiter)
        hosts[transfers[id]!.host] = budget
        if wasWaiting {
            promoted.insert(waiter)
            waitBegins += 1
        }
        admitted.formUnion(admits)
    }

    mutating func deliver(_ id: Int) {
        var transfer = transfers[id]!
        let chunk = transfer.position
        files[transfer.host][transfer.file].stored.insert(chunk)
        transfer.position += 1
        transfers[id] = transfer
        for reader in Set(transfer.players.keys).union(transfer.own) where readers[reader]!.cursor == chunk {
            readers[reader]!.cursor += 1
        }
    }

    mutating func bodyEnded(_ id: Int) {
        guard var transfer = transfers[id] else { return }
        var policy = transfer.policy!
        policy.bodyEnded()
        transfer.policy = policy
        transfer.exec = .top
        transfers[id] = transfer
        release(id)
    }

    /// A request failed: retried at the loop's top (its connection let go), or, past the retries
    /// or for a probe (whose error is its player's), the transfer fails.
    mutating func fail(_ id: Int) {
        guard var transfer = transfers[id] else { return }
        if var policy = transfer.policy {
            policy.failed()
            transfer.policy = policy
        }
        transfer.failures += 1
        transfers[id] = transfer
        release(id, answered: false)
        if transfer.failures > 3 || transfer.policy == nil {
            end(id, "failed: the origin", reason: .originFailed)
        } else {
            transfers[id]!.exec = .top
        }
    }

    /// Lets the transfer's connection go (the answer dropped); e48a7a1 kept a probe's answer's.
    mutating func release(_ id: Int, answered: Bool = true) {
        guard var transfer = transfers[id], let hold = transfer.hold else { return }
        if variant == .e48a7a1, answered, hold.isProbes, !transfer.isEnded {
            transfer.retained = hold.isOwn
            transfer.hold = nil
            transfers[id] = transfer
            return
        }
        transfer.hold = nil
        transfers[id] = transfer
        giveBack(transfer.host, isOwn: hold.isOwn)
    }

    mutating func giveBack(_ host: Int, isOwn: Bool) {
        var budget = hosts[host]
        admitted.formUnion(budget.release(isOwn: isOwn))
        hosts[host] = budget
    }

    mutating func end(_ id: Int, _ outcome: String, reason: FillStop?) {
        guard var transfer = transfers[id], !transfer.isEnded else { return }
        if case .acquiring(let waiter, let requester) = transfer.exec {
            var budget = hosts[transfer.host]
            let isOwn = !requester.isPlayer && !promoted.contains(waiter)
            let (wasWaiting, admits) = budget.cancel(.init(id: waiter, isOwn: isOwn))
            hosts[transfer.host] = budget
            admitted.formUnion(admits)
            waiters[waiter] = nil
            promoted.remove(waiter)
            if !wasWaiting, admitted.remove(waiter) != nil { giveBack(transfer.host, isOwn: isOwn) }
        }
        transfer.exec = .ended
        transfer.outcome = outcome
        transfers[id] = transfer
        if let hold = transfer.hold {
            transfers[id]!.hold = nil
            giveBack(transfer.host, isOwn: hold.isOwn)
        }
        if let isOwn = transfer.retained {
            transfers[id]!.retained = nil
            giveBack(transfer.host, isOwn: isOwn)
        }
        note("t\(id) ended: \(outcome)")
        fills.removeAll { $0 == id }
        if transfer.everFilled {
            // A fill completes when it reaches its file's end (from where its play began).
            let completed = outcome.hasPrefix("completed") && transfer.fillStop == nil
            let stop = transfer.fillStop ?? reason
            fillOutcomes.append(completed ? "completed" : stop.map { "stopped: \($0)" } ?? "stopped for no reason")
        }
        for reader in Set(transfer.players.keys).union(transfer.own) where readers[reader]?.transfer == id {
            readers[reader]!.transfer = nil
            if outcome.hasPrefix("failed") { finish(reader) }
        }
    }

    mutating func startFill(_ id: Int) {
        transfers[id]!.filling = true
        transfers[id]!.everFilled = true
        transfers[id]!.end = files[transfers[id]!.host][transfers[id]!.file].length
        note("t\(id) fills its file")
        guard variant == .current else { return }
        fills.append(id)
        let superseded = FillPolicy.superseded(fills.map { transfers[$0]!.servesPlayer }, capacity: capacity)
        for index in superseded.reversed() { stopFilling(fills[index], .superseded) }
    }

    mutating func stopFilling(_ id: Int, _ reason: FillStop) {
        guard var transfer = transfers[id], transfer.filling else { return }
        transfer.filling = false
        transfer.fillStop = reason
        transfers[id] = transfer
        fills.removeAll { $0 == id }
        note("t\(id) stops filling: \(reason)")
        if transfer.readers == 0, !transfer.isEnded { end(id, "cancelled: fill stopped", reason: reason) }
    }

    /// Marks each player's wait for bytes; a wait that begins counts (``OriginPriority``).
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

    func situation(of transfer: Transfer) -> TransferPolicy.Situation {
        TransferPolicy.Situation(
            servesPlayer: transfer.servesPlayer, isFilling: transfer.filling,
            playerWaitsForConnection: !hosts[transfer.host].players.isEmpty, fillsAllowed: fillsAllowed)
    }

    mutating func mutatingPolicy(_ id: Int, _ body: (inout TransferPolicy) -> TransferPolicy.Action)
        -> TransferPolicy.Action
    {
        var policy = transfers[id]!.policy!
        let action = body(&policy)
        transfers[id]!.policy = policy
        return action
    }

    // MARK: Invariants

    /// After every step: the budgets count what is held; no connection is held by work that
    /// moves no bytes while a player waits for one on its host.
    mutating func check() {
        for (host, budget) in hosts.enumerated() {
            let held = transfers.values.filter { $0.host == host && ($0.hold != nil || $0.retained != nil) }
            let count = held.reduce(0) { $0 + ($1.hold == nil ? 0 : 1) + ($1.retained == nil ? 0 : 1) }
            let own = held.reduce(0) { $0 + ($1.hold?.isOwn == true ? 1 : 0) + ($1.retained == true ? 1 : 0) }
            if budget.inUse != count || budget.ownInUse != own {
                violations.append(
                    "h\(host): the budget counts \(budget.inUse) (\(budget.ownInUse) own), transfers hold \(count) (\(own) own)"
                )
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
