// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// What one origin transfer does next, decided in one place: a pure machine (no I/O, no clock)
/// that ``OriginTransfer`` asks at each of its steps with what it sees (``Situation``), and
/// whose answer it carries out and nothing else. ``DownloadStateMachine`` keeps the data (the
/// readers, the bytes, who waits for what); this machine keeps who the transfer's requests are
/// for, what it holds of its host's connections, and when it gives way.
///
/// The rules, each a branch below and nowhere else:
/// - **Whose a request is.** A player's while a player reads the download, or while the player
///   who started it (its probe, its revalidation, its read at a hole) has not joined yet; else
///   the cache's own, of the starter's kind (a player's download going on past its readers is a
///   ``Requester/Kind/fill``), taken within the own share of the host's connections
///   (``ConnectionBudgetStateMachine``).
/// - **The cache's own work yields the link.** A transfer no player reads sends no request and
///   takes no byte while players wait on an origin, or did within the quiet period
///   (``OriginPriority``); it resumes where it stopped. Before a request it holds nothing; in the
///   middle of a body it keeps its connection, within the own share, so it resumes without a round
///   trip.
/// - **It never holds what a player waits for.** While a player waits for a connection to the
///   transfer's host, a transfer no player reads lets its connection go at once (the chunk in
///   hand delivered and stored first), whether it was reading or yielding, and asks for the rest
///   later with a ranged request, as the cache's own: so a player waiting for a connection gets
///   one as soon as one frees or is asked back.
/// - **A play fills its file.** A player's download of a file ``FillPolicy`` covers goes on past
///   its player's range to the file's end, past its last reader, unpaced by readers (the
///   executor asks ``FillOnPlay``, which also keeps at most a few at once). A fill stops for a
///   stated reason (``FillStop``): the network turned metered here; a newer play, the store, the
///   origin or a shutdown elsewhere.
/// - **A fill waits for its play to prove itself.** Until the play has read enough or lasted
///   long enough (``FillStanding``), a fill no player reads fetches nothing past its players: it
///   waits, and its requests end where its players' reads end. A play left early for another (a
///   skip) ends its fill there.
/// - **A pin keeps to its rate.** The bytes of a transfer no player reads are paced by its
///   requester's rate caps (``DownloadPacer``); a player's never are.
///
/// - **A failure is retried while bytes come.** A request or a body that fails with the origin
///   unreachable, timed out or cut short (``CacheError/Code/originUnavailable``) is asked again after `attempt` times the retry delay,
///   up to ``CachingReader/Configuration/maxRetries`` failures in a row (a delivered chunk starts
///   the count again); any other failure ends the download.
/// - **An answer of another version ends the read.** Bytes of two versions are never served as
///   one: the version held is dropped and the read fails as ``CacheError/Code/resourceChanged``.
///
/// Every event returns what to do next (AsyncHTTPClient's shape):
/// ```
///            send                 answered: receive           chunkArrived ─▶ deliver ─┐
///  idle ─────────────▶ requesting ─────────────────▶ receiving ◀─────────────────────┘
///   ▲ │ yield (no player served, not yet quiet)  │ dropVersion │ │ yield · pace · stopFilling
///   │ ▼ awaitProof · stopFilling (a fill)        ▼             │ ▼ awaitProof
///   idle(yielded)     bodyEnded · failed ─▶ requestNext · complete · retry · giveUp ─▶ idle
/// ```
struct TransferPolicy: Equatable {
    /// Who started the download: its requests are a player's or this requester's own.
    let startedBy: Requester

    /// Where the transfer is.
    enum Step: Equatable {
        /// No request is out; `yielded`: it has given way to players since the last one.
        case idle(yielded: Bool)
        /// A request for `Requester` is out: waiting for a connection and the origin's answer.
        case requesting(Requester)
        /// The origin answered: the body is read on a connection held for `Requester`.
        case receiving(Requester)
        /// A chunk of the body is in hand, not yet delivered; `yielded` and `paced`: done for it.
        case holding(Requester, yielded: Bool, paced: Bool)
    }

    private(set) var step: Step
    /// How many requests may fail in a row before the download gives up.
    let maxRetries: Int
    /// Requests failed since the last delivered chunk.
    private(set) var failuresInARow = 0

    /// What the transfer sees when it asks.
    struct Situation: Equatable {
        /// A player reads the download, or the player who started it has not joined yet.
        var servesPlayer: Bool
        /// The download fills its file (it goes on past its readers to the file's end).
        var isFilling = false
        /// A player waits for a connection to the download's host.
        var playerWaitsForConnection = false
        /// Fills are allowed: the network is not metered, the power not low.
        var fillsAllowed = true
        /// Why fills are not allowed, when they are not.
        var fillsHeldBy = FillStop.metered
        /// Where the fill's play stands (``FillStanding``; a download that does not fill: proven).
        var play = PlayProof.proven
    }

    /// Where a fill's play stands, without when (``FillStanding``).
    enum PlayProof: Equatable {
        case proven, pending, skipped
    }

    /// What the transfer does.
    enum Action: Equatable {
        /// Give way to players: wait (holding no more than it holds) until no player waits on an
        /// origin and none has for the quiet period, or until ``endsWait(_:)`` holds; then tell
        /// ``yielded(_:)``.
        case yield
        /// Send the next request, its connection taken for the requester; then tell
        /// ``answered(_:)`` or ``failed(_:)``.
        case send(Requester)
        /// End the fill for the reason (the download goes on for its readers only); then ask
        /// ``chunkArrived(_:)`` again, or ``next(_:)`` when no request is out.
        case stopFilling(FillStop)
        /// Wait until the fill's play is proven or skipped, or until ``endsWait(_:)`` holds; then
        /// tell ``proofAwaited(_:)``.
        case awaitProof
        /// Take the chunk's bytes from the requester's rate caps and wait as long as they say, or
        /// until ``endsWait(_:)`` holds; then tell ``paced(_:)``.
        case pace
        /// Deliver and store the chunk in hand; then read the next (``chunkArrived(_:)`` or ``bodyEnded(_:_:)``).
        case deliver
        /// Deliver and store the chunk in hand, then let the answer go: its connection is a waiting
        /// player's; then tell ``bodyEnded(_:_:)`` with ``BodyEnd/letGo``.
        case deliverAndLetGo
        /// Read the answer's body (``chunkArrived(_:)`` for each chunk); `filling`: first make the
        /// download fill its file to the answer's length (it reads on past the player's range).
        case receive(filling: Bool)
        /// The answer is of another version than the bytes held: drop the held version and fail
        /// the download (``CacheError/Code/resourceChanged``).
        case dropVersion
        /// Ask for the rest of the download (``next(_:)``), or complete it if nothing is left.
        case requestNext
        /// The download has served its readers: complete it.
        case complete
        /// Ask again after `attempt` times the retry delay (``next(_:)`` then).
        case retry(attempt: Int)
        /// End the download with the failure.
        case giveUp
    }

    /// A transfer of a download `requester` started; `answered`: the first answer is in hand
    /// already (a probe's, whose connection was taken for `requester`).
    init(startedBy requester: Requester, answered: Bool, maxRetries: Int = 3) {
        startedBy = requester
        self.maxRetries = maxRetries
        step = answered ? .receiving(requester) : .idle(yielded: false)
    }

    /// Whose the transfer's requests are when no player is served.
    var own: Requester { startedBy.isPlayer ? .own(.fill) : startedBy }

    /// Whether it holds a connection of its host now.
    var holdsConnection: Bool {
        switch step {
        case .idle: false
        case .requesting, .receiving, .holding: true
        }
    }

    // MARK: Requests

    /// What to do when no request is out.
    mutating func next(_ situation: Situation) -> Action {
        guard case .idle(let yielded) = step else { preconditionFailure("a request is already out: \(step)") }
        if situation.servesPlayer {
            step = .requesting(.player)
            return .send(.player)
        }
        if let unproven = unproven(situation) { return unproven }
        guard yielded else { return .yield }
        step = .requesting(own)
        return .send(own)
    }

    /// What a fill no player reads does while its play is not proven: wait, or end as skipped.
    private func unproven(_ situation: Situation) -> Action? {
        guard situation.isFilling else { return nil }
        switch situation.play {
        case .proven: return nil
        case .pending: return .awaitProof
        case .skipped: return .stopFilling(.skipped)
        }
    }

    /// Where a request whose hole ends at `holeEnd` ends: there, or, while a fill's play is not
    /// proven, where its players' reads end (`playersEnd`, past `position`): the rest waits for
    /// the proof, so a skipped song costs what its player asked.
    func requestEnd(from position: Int64, holeEnd: Int64, playersEnd: Int64?, _ situation: Situation) -> Int64 {
        guard situation.isFilling, situation.play != .proven, let playersEnd, playersEnd > position else {
            return holeEnd
        }
        return min(holeEnd, playersEnd)
    }

    /// The origin answered the request (its answer checked): what to do with it.
    mutating func answered(_ answer: Answer) -> Action {
        if case .requesting(let requester) = step { step = .receiving(requester) }
        if answer.isOtherVersion {
            step = .idle(yielded: false)
            return .dropVersion
        }
        let fills =
            startedBy.isPlayer && answer.stores && answer.isStorable && !answer.isFullBody && !answer.isFilling
            && answer.length != nil && answer.isCovered
        return .receive(filling: fills)
    }

    /// What the executor tells of an answer.
    struct Answer: Equatable {
        /// The download writes to the store.
        var stores: Bool
        /// The answer may be stored (no `no-store`).
        var isStorable: Bool
        /// The body is the whole resource (an origin without ranges): nothing to fill.
        var isFullBody: Bool
        /// The download fills already.
        var isFilling: Bool
        /// The resource's length, if known.
        var length: Int64?
        /// ``FillOnPlay`` covers the file now (its policy, and a network that allows fills).
        var isCovered: Bool
        /// The answer's version is not the one whose bytes the store holds.
        var isOtherVersion = false
    }

    /// How an answer's body ended.
    enum BodyEnd: Equatable {
        /// It reached the end asked for.
        case whole
        /// Another download stored the next bytes (the readers go on from the store).
        case storedAhead
        /// The transfer let its connection go to a waiting player (``Action/deliverAndLetGo``).
        case letGo
    }

    /// The answer's body ended: what to do next.
    mutating func bodyEnded(_ end: BodyEnd, _ situation: Situation) -> Action {
        step = .idle(yielded: false)
        switch end {
        case .whole, .letGo: return .requestNext
        case .storedAhead: return goesOnPastStoredBytes(situation) ? .requestNext : .complete
        }
    }

    /// Whether, at bytes the store has (another download stored them), the transfer goes on at
    /// the next hole rather than completing: a fill does (its file is to be whole); any other
    /// download has served its readers, who read those bytes from the store.
    func goesOnPastStoredBytes(_ situation: Situation) -> Bool {
        situation.isFilling
    }

    /// The request or its body failed with `code` (`nil`: not the cache's error, a connection's):
    /// ask again after a pause, or give up.
    mutating func failed(_ code: CacheError.Code?) -> Action {
        step = .idle(yielded: false)
        let retryable = code.map { $0 == .originUnavailable || $0 == .originTimedOut } ?? true
        failuresInARow += 1
        guard retryable, failuresInARow <= maxRetries else { return .giveUp }
        return .retry(attempt: failuresInARow)
    }

    // MARK: Chunks

    /// A chunk of the body is in hand: what to do before it is delivered.
    mutating func chunkArrived(_ situation: Situation) -> Action {
        let (requester, yielded, paced): (Requester, Bool, Bool)
        switch step {
        case .receiving(let r): (requester, yielded, paced) = (r, false, false)
        case .holding(let r, let y, let p): (requester, yielded, paced) = (r, y, p)
        case .idle, .requesting: preconditionFailure("a chunk without an answer: \(step)")
        }
        step = .holding(requester, yielded: yielded, paced: paced)
        if situation.isFilling, !situation.fillsAllowed { return .stopFilling(situation.fillsHeldBy) }
        guard !situation.servesPlayer else { return deliver(requester) }
        if situation.playerWaitsForConnection {
            failuresInARow = 0
            step = .idle(yielded: false)
            return .deliverAndLetGo
        }
        if let unproven = unproven(situation) { return unproven }
        if !yielded { return .yield }
        if startedBy.pacer != nil, !paced { return .pace }
        return deliver(requester)
    }

    /// The chunk in hand goes to the readers: bytes came, so the failures' count starts again.
    private mutating func deliver(_ requester: Requester) -> Action {
        failuresInARow = 0
        step = .receiving(requester)
        return .deliver
    }

    /// Whether a transfer that gives way to players, or keeps to its rate, stops waiting now: a
    /// player reads it (it goes on at once), or, holding a connection, a player waits for one (it
    /// lets it go).
    func endsWait(_ situation: Situation) -> Bool {
        situation.servesPlayer || (holdsConnection && situation.playerWaitsForConnection)
    }

    /// The transfer gave way to players (the wait of ``Action/yield`` ended): what to do now.
    mutating func yielded(_ situation: Situation) -> Action {
        switch step {
        case .idle:
            step = .idle(yielded: true)
            return next(situation)
        case .holding(let requester, _, let paced):
            step = .holding(requester, yielded: true, paced: paced)
            return chunkArrived(situation)
        case .requesting, .receiving:
            preconditionFailure("a yield while a request is out: \(step)")
        }
    }

    /// The wait for the fill's play to prove itself ended: what to do now.
    mutating func proofAwaited(_ situation: Situation) -> Action {
        switch step {
        case .idle: return next(situation)
        case .holding: return chunkArrived(situation)
        case .requesting, .receiving: preconditionFailure("a wait for proof while a request is out: \(step)")
        }
    }

    /// The chunk in hand was paced by the rate caps: what to do now.
    mutating func paced(_ situation: Situation) -> Action {
        guard case .holding(let requester, let yielded, _) = step else {
            preconditionFailure("paced without a chunk: \(step)")
        }
        step = .holding(requester, yielded: yielded, paced: true)
        return chunkArrived(situation)
    }
}
