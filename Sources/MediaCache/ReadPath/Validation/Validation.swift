// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// What a request for a resource's content information asks, as one value: the resource, where
/// a read that follows starts and how much it wants, the player's fields, how old a stored
/// version may be, who asks, and whether the read belongs to a play.
package struct ContentRequest: Sendable {
    /// The resource.
    package var url: URL
    /// Where a read that follows starts (`nil`: none follows); an uncached resource is then
    /// asked with a ranged `GET` from there rather than a `HEAD`.
    package var offset: Int64?
    /// How many bytes that read wants, when it says.
    package var length: Int64?
    /// The player's request fields, for the origin.
    package var headers: RequestHeaders
    /// When given, a stored version the origin gave or confirmed longer ago is asked again,
    /// whatever its freshness (a live playlist).
    package var maximumAge: Duration?
    /// Who asks: the probe's download is theirs.
    package var requester: Requester
    /// The caller reads next: a probe's bytes that are not stored are held for that read.
    package var reserves = false
    /// Where a player's ranged read in a play starts (`nil`: not in a play, see ``Plays``).
    package var playFrom: Int64?

    package init(
        url: URL, offset: Int64? = nil, length: Int64? = nil, headers: RequestHeaders = [],
        maximumAge: Duration? = nil, requester: Requester
    ) {
        self.url = url
        self.offset = offset.map { min(max(0, $0), ByteRange.maximumOffset) }
        self.length = length
        self.headers = headers
        self.maximumAge = maximumAge
        self.requester = requester
    }
}

/// Whether a stored version may serve a request, and what the origin is asked otherwise: a
/// pure decision over what is known of the resource now (``Held``) and what is asked
/// (``Asked``). ``ContentValidator`` gathers the one and carries out the other.
package enum Validation {
    /// What is known of the resource when the request arrives.
    package struct Held: Equatable, Sendable {
        /// The origin's own answer (a `404`, a `301`) is remembered and still fresh.
        package var remembersAnswer = false
        /// The stored version, when its length is known.
        package var stored: Stored?
        /// A body without a length is coming from the origin from where the read starts.
        package var growingBodyAtReadStart = false
        /// A shared question to the origin (a probe, a revalidation) runs for the resource.
        package var probeRunning = false
        /// The read path is shutting down.
        package var isShutDown = false
        /// The cache is offline: the origin is never asked.
        package var isOffline = false

        package init() {}
    }

    /// What is known of a stored version.
    package struct Stored: Equatable, Sendable {
        /// Stored for a request whose varying fields (`Vary`) differ from this one's.
        package var varies = false
        /// Fresh (RFC 9111 §4.2), or the app prefers the cache.
        package var isCurrent = false
        /// Given or confirmed by the origin within the request's maximum age (`true` without one).
        package var isYoungEnough = true
        /// The origin said `no-cache` or `must-revalidate`: every use is validated.
        package var requiresRevalidation = false
        /// A media file whole on disk that a play under way began with.
        package var isWholeInPlay = false
        /// Stale, within its `stale-while-revalidate` (RFC 5861).
        package var mayServeWhileRevalidating = false
        /// Carries a validator `If-Range` may name.
        package var hasIfRangeValidator = false
        /// The read that follows misses bytes within the resource.
        package var readMissesBytes = false

        package init() {}
    }

    /// What the request asks, as far as the decision goes.
    package struct Asked: Equatable, Sendable {
        /// It carries the player's own conditions (`If-None-Match`, …): its answer may be the
        /// origin's `304` to them, so it shares nothing with other requests.
        package var hasConditions = false
        /// A read follows, from a known offset.
        package var readsNext = false
        /// It gives a maximum age (a live playlist).
        package var hasMaximumAge = false
        /// A player's read in a play that goes on past byte 0 (a seek, a resume).
        package var continuesPlay = false
        /// A player asks, not the cache's own work.
        package var isPlayer = true
        /// The cache's own question has already waited for the players.
        package var hasYielded = false

        package init() {}

        /// What `request` asks.
        package init(_ request: ContentRequest, hasYielded: Bool) {
            hasConditions = request.headers.hasConditions
            readsNext = request.offset != nil
            hasMaximumAge = request.maximumAge != nil
            continuesPlay = (request.playFrom ?? 0) > 0
            isPlayer = request.requester.isPlayer
            self.hasYielded = hasYielded
        }
    }

    /// What to do, one case per outcome.
    package enum Decision: Equatable, Sendable {
        /// Give the remembered answer of the origin again, without asking.
        case rememberedAnswer
        /// Remove the stored version (it varies on fields this request does not match), then decide again.
        case dropVariedVersion
        /// Join the body without a length coming from the origin for this read's start.
        case joinGrowingBody
        /// Serve the stored version: it is current.
        case stored
        /// Serve what the running question to the origin gives (its download is being set up),
        /// else the stored version.
        case storedAfterRunningProbe
        /// Serve the stored version though stale: it is whole and a play that began with it goes on.
        case staleWholeInPlay
        /// Serve the stored version though stale, and revalidate it in the background.
        case staleWhileRevalidate
        /// Serve the stored version; the read's request for its missing bytes carries `If-Range`.
        case staleWithIfRange
        /// The cache's own question waits while players wait on an origin, then is decided again.
        case waitForPlayers
        /// Refuse: the read path is shutting down.
        case shutDown
        /// Join the question to the origin that runs.
        case joinRunningProbe
        /// Ask the origin whether the stored version is current (a conditional ranged `GET`).
        case revalidate(shared: Bool)
        /// Ask the origin for the bytes the read wants (a ranged `GET`).
        case probe(shared: Bool)
        /// Ask the origin for the content information alone (a `HEAD`).
        case askHead(shared: Bool)
    }

    /// The decision for `asked`, given what is `held`.
    package static func decide(held: Held, asked: Asked) -> Decision {
        let plain = !asked.hasConditions && !asked.hasMaximumAge
        if !asked.hasConditions, held.remembersAnswer { return .rememberedAnswer }
        if let stored = held.stored, stored.varies { return .dropVariedVersion }
        if held.stored == nil, asked.readsNext, held.growingBodyAtReadStart { return .joinGrowingBody }
        if let stored = held.stored {
            if stored.isCurrent, held.isOffline || stored.isYoungEnough {
                let sharesRunning = !asked.hasConditions && !held.isOffline && held.probeRunning
                return sharesRunning ? .storedAfterRunningProbe : .stored
            }
            if plain, asked.continuesPlay, !stored.requiresRevalidation, stored.isWholeInPlay {
                return .staleWholeInPlay
            }
            if plain, !held.isShutDown, stored.mayServeWhileRevalidating { return .staleWhileRevalidate }
            if plain, asked.readsNext, stored.hasIfRangeValidator, stored.readMissesBytes { return .staleWithIfRange }
        }
        if !asked.isPlayer, !asked.hasYielded, !held.probeRunning { return .waitForPlayers }
        if held.isShutDown { return .shutDown }
        let shared = !asked.hasConditions
        if shared, held.probeRunning { return .joinRunningProbe }
        if held.stored != nil { return .revalidate(shared: shared) }
        return asked.readsNext ? .probe(shared: shared) : .askHead(shared: shared)
    }
}
