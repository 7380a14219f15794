// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheTestSupport

@testable import MediaCache

/// The model's executor of each transfer's ``TransferPolicy``, step by step as ``OriginTransfer``
/// carries it out: requests through the host's budget, answers, chunks, yields, pacing, letting go,
/// fills and their ends.
extension TransferModel {
    mutating func advanceTransfer(_ id: Int) -> Bool {
        guard let transfer = transfers[id] else { return false }
        let before = transfer.exec
        if let ahead = transfer.ahead, !ahead.granted, admitted.remove(ahead.waiter) != nil {
            waiters[ahead.waiter] = nil
            transfers[id]!.ahead!.granted = true
            transfers[id]!.ahead!.isOwn = ahead.isOwn && promoted.remove(ahead.waiter) == nil
            if transfer.exec == .awaitingPiece { nextPiece(id) }
            return true
        }
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
        case .awaitingPiece:
            if transfer.ahead?.granted == true { nextPiece(id) }
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
            if transfer.position >= transfer.requestEnd {
                bodyEnded(id)
            } else if let size = pieces[transfer.host], transfer.position >= transfer.pieceStart + size {
                pieceEnded(id)
            } else {
                transfers[id]!.exec = .reading
            }
        case .deliverAndLetGo:
            note("t\(id) lets its connection go")
            deliver(id)
            guard let transfer = transfers[id], !transfer.isEnded else { return }
            release(id)
            let seen = situation(of: transfer)
            act(id, mutatingPolicy(id) { $0.bodyEnded(.letGo, seen) })
        case .requestNext:
            transfers[id]!.exec = .top
        case .receive, .dropVersion, .complete, .retry, .giveUp, .awaitProof:
            preconditionFailure("t\(id): \(action) is not the model's")
        }
    }

    mutating func send(_ id: Int, as requester: Requester) {
        let transfer = transfers[id]!
        nextWaiter += 1
        let waiter = nextWaiter
        // Each request has a promotion of its own, a player's at once when it serves one.
        transfers[id]!.requestPromoted = transfer.servesPlayer
        let isOwn = !requester.isPlayer && !transfer.servesPlayer
        var budget = hosts[transfer.host]
        let holds = budget.acquire(.init(id: waiter, isOwn: isOwn))
        hosts[transfer.host] = budget
        if holds {
            transfers[id]!.hold = (isOwn: isOwn, isProbes: transfer.policy == nil)
            transfers[id]!.exec = .awaitingAnswer
        } else {
            waiters[waiter] = id
            transfers[id]!.exec = .acquiring(waiter: waiter, requester: isOwn ? requester : .player)
            // A player's wait for a connection wakes the transfers that may hold one (``ConnectionBudget``).
            if !isOwn { waitBegins += 1 }
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
        let next = policy.bodyEnded(.whole, situation(of: transfer))
        precondition(next == .requestNext, "a whole body asks for the rest: \(next)")
        transfer.policy = policy
        transfer.exec = .top
        transfers[id] = transfer
        release(id)
    }

    /// A request failed: retried at the loop's top (its connection let go) when the policy says
    /// so; past the retries, or for a probe (whose error is its player's), the transfer fails.
    mutating func fail(_ id: Int) {
        guard var transfer = transfers[id] else { return }
        var retries = false
        if var policy = transfer.policy {
            retries = policy.failed(.originUnavailable) != .giveUp
            transfer.policy = policy
        }
        transfers[id] = transfer
        release(id, answered: false)
        if !retries {
            end(id, "failed: the origin", reason: .originFailed)
        } else {
            transfers[id]!.exec = .top
        }
    }

    /// Lets the transfer's connection go (the answer dropped); e48a7a1 kept a probe's answer's.
    mutating func release(_ id: Int, answered: Bool = true) {
        dropAhead(id)
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
        dropAhead(id)
        transfer.ahead = nil
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

    // MARK: Pieces

    /// On a host asked in pieces, asks for the next piece while this one's body flows
    /// (``PiecedFetcher``): a request of its own, for the same requester, with a connection of
    /// its own from the budget (``MeteredFetcher/further``).
    mutating func askAhead(_ id: Int) {
        guard let transfer = transfers[id], !transfer.isEnded, let size = pieces[transfer.host],
            let hold = transfer.hold, transfer.ahead == nil, transfer.pieceStart + size < transfer.requestEnd
        else { return }
        nextWaiter += 1
        let waiter = nextWaiter
        var budget = hosts[transfer.host]
        let isOwn = hold.isOwn && !transfer.requestPromoted
        let granted = budget.acquire(.init(id: waiter, isOwn: isOwn))
        hosts[transfer.host] = budget
        transfers[id]!.ahead = Ahead(waiter: waiter, isOwn: isOwn, granted: granted)
        note("t\(id) asks for the piece at \(transfer.pieceStart + size) ahead\(granted ? "" : ", waiting")")
        guard !granted else { return }
        waiters[waiter] = id
        if !isOwn { waitBegins += 1 }
    }

    /// The piece's body ended short of the request's end: its connection goes, and the body goes
    /// on with the next piece once that has one.
    mutating func pieceEnded(_ id: Int) {
        guard let transfer = transfers[id], let hold = transfer.hold else { return }
        transfers[id]!.hold = nil
        giveBack(transfer.host, isOwn: hold.isOwn)
        transfers[id]!.exec = .awaitingPiece
        if transfers[id]!.ahead?.granted == false { piecesWaited += 1 }
        guard transfers[id]!.ahead != nil else {
            // Not asked ahead (it was let go): the rest is asked at the loop's top.
            transfers[id]!.exec = .top
            return
        }
        if transfers[id]!.ahead!.granted { nextPiece(id) }
    }

    /// The next piece, asked ahead, has its connection: the body reads on.
    mutating func nextPiece(_ id: Int) {
        guard let ahead = transfers[id]?.ahead, ahead.granted else { return }
        transfers[id]!.ahead = nil
        transfers[id]!.hold = (isOwn: ahead.isOwn, isProbes: false)
        transfers[id]!.pieceStart = transfers[id]!.position
        transfers[id]!.exec = .reading
        note("t\(id) reads on with the next piece")
        piecesReadOn += 1
        askAhead(id)
    }

    /// Lets the piece asked ahead go: its connection, or its wait for one.
    mutating func dropAhead(_ id: Int) {
        guard let transfer = transfers[id], let ahead = transfer.ahead else { return }
        transfers[id]!.ahead = nil
        if ahead.granted {
            giveBack(transfer.host, isOwn: ahead.isOwn)
            return
        }
        let isOwn = ahead.isOwn && promoted.remove(ahead.waiter) == nil
        var budget = hosts[transfer.host]
        let (wasWaiting, admits) = budget.cancel(.init(id: ahead.waiter, isOwn: isOwn))
        hosts[transfer.host] = budget
        admitted.formUnion(admits)
        waiters[ahead.waiter] = nil
        if !wasWaiting, admitted.remove(ahead.waiter) != nil { giveBack(transfer.host, isOwn: isOwn) }
    }
}
