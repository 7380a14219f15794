// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// The fills under way (see ``FillPolicy``): which download a play's transfer goes on with to
/// the end of its file, whether the network allows it now, and what each has stored. A
/// transfer asks ``admits`` when the origin answers a player's request, and says when the
/// fill ends; nothing here fetches.
///
/// At most ``capacity`` fills run at once: a new play's fill takes the place of the oldest, one
/// no player reads first (``FillPolicy/superseded(_:capacity:)``), which ends as a fill (it goes
/// on only as far as its readers read). The newest play is the one the user listens to; a fill
/// per skipped song would hold entries open and fetch what nobody plays.
package final class FillOnPlay: Sendable {
    /// A fill under way, for the status page.
    package struct Progress: Sendable, Equatable, Codable {
        package var url: String
        package var position: Int64
        package var length: Int64
    }

    private struct Active {
        var download: SharedDownload
        var length: Int64
        /// When it started, in the order of starts.
        var order: UInt64
        /// When it started, on the plays' clock (which plays began after it).
        var beganAt: Date?
        /// Whether no player has read it for the probation, once.
        var quietEnough = false
        /// Where its play stands, once that is settled (proven or skipped).
        var settled: FillStanding?
    }

    private struct State {
        /// Why fills may not run now (``FillStop/metered``, ``FillStop/lowPower``), or `nil`.
        var heldBy: FillStop?
        var active: [ObjectIdentifier: Active] = [:]
        var started: UInt64 = 0
    }

    let policy: FillPolicy
    /// How many fills may run at once.
    let capacity: Int
    /// The store's size limit: a fill takes a file of an eighth of it at most.
    let storeLimit: Int64
    /// Whether the store has room for that many of the cache's own bytes: free space under its
    /// limit and bytes no player read (``CacheStore/roomForOwnBytes(atLeast:)``).
    let room: @Sendable (Int64) -> Bool
    /// How far into the file a play's players read before its fill goes on at once; else it
    /// waits for the probation (the executor's wait, then ``wasQuiet(_:)``; see
    /// ``FillPolicy/standing(played:of:proofBytes:quietEnough:otherPlayBegan:)``).
    let proofBytes: Int64
    /// The plays under way: which began after a fill's.
    let plays: Plays?
    private let state = Mutex(State())

    init(
        policy: FillPolicy, capacity: Int, storeLimit: Int64 = .max,
        proofBytes: Int64 = 0, plays: Plays? = nil, room: @escaping @Sendable (Int64) -> Bool = { _ in true }
    ) {
        self.policy = policy
        self.capacity = max(1, capacity)
        self.storeLimit = storeLimit
        self.proofBytes = proofBytes
        self.plays = plays
        self.room = room
    }

    /// Whether fills may start: not on a metered network, nor while the device's power is low
    /// (the download rules' judgement), where only what players read, and its lead, is
    /// fetched. A fill under way when it turns `false` stops at its next chunk. Setting it
    /// `false` holds fills as a metered network does.
    package var isAllowed: Bool {
        get { heldBy == nil }
        set { heldBy = newValue ? nil : .metered }
    }

    /// How many fills began, over the reader's life.
    package var begun: UInt64 { state.withLock { $0.started } }

    /// Why fills may not run now, or `nil` when they may.
    package var heldBy: FillStop? {
        get { state.withLock { $0.heldBy } }
        set { state.withLock { $0.heldBy = newValue } }
    }

    /// What holds fills back on `network` and with the power low or not: the power first, then
    /// a metered or low-data network; nothing else.
    static func hold(on network: DownloadRules.NetworkConditions, lowPower: Bool) -> FillStop? {
        if lowPower { return .lowPower }
        return network.isMetered || network.isConstrained ? .metered : nil
    }

    /// Whether a player's download of `url` whose origin answered `metadata` fills its file. A
    /// fill's bytes push out no played ones (``EvictionPolicy``): one the store has no room for
    /// of that kind would fetch what it cannot keep, so it does not start; nor one of a file
    /// past an eighth of the store.
    func admits(_ metadata: ContentMetadata, url: URL) -> Bool {
        guard isAllowed, policy.covers(mimeType: metadata.mimeType, length: metadata.length, path: url.path),
            let length = metadata.length, FillPolicy.fits(length, storeLimit: storeLimit)
        else { return false }
        return room(length)
    }

    /// Records that `download` fills its file of `length` bytes, and ends the fills it takes the
    /// place of (beyond ``capacity``).
    func started(_ download: SharedDownload, length: Int64) {
        let running = state.withLock { state -> [SharedDownload] in
            state.started += 1
            state.active[ObjectIdentifier(download)] = Active(
                download: download, length: length, order: state.started, beganAt: plays?.clock.now)
            return state.active.values.sorted { $0.order < $1.order }.map(\.download)
        }
        CacheMetrics.fill(.started)
        // (Each download's readers are looked at outside the lock: its own lock is taken.)
        let superseded = FillPolicy.superseded(running.map(\.servesPlayer), capacity: capacity).map { running[$0] }
        let ended = state.withLock { state in
            superseded.filter { state.active.removeValue(forKey: ObjectIdentifier($0)) != nil }
        }
        for old in ended {
            old.stopFilling(.superseded)
            CacheMetrics.fill(.stopped)
            CacheMetrics.fillStopped(.superseded)
        }
    }

    /// Where the play of `download`'s fill stands now: `.proven` for a download that does not fill
    /// (nothing to hold back).
    func standing(of download: SharedDownload) -> FillStanding {
        let id = ObjectIdentifier(download)
        guard let active = state.withLock({ $0.active[id] }) else { return .proven }
        if let settled = active.settled { return settled }
        let standing = FillPolicy.standing(
            played: download.playerProgress, of: active.length, proofBytes: proofBytes,
            quietEnough: active.quietEnough,
            otherPlayBegan: active.beganAt.map { plays?.otherPlayBegan(than: download.key, after: $0) ?? false }
                ?? false)
        if standing != .pending { state.withLock { $0.active[id]?.settled = standing } }
        return standing
    }

    /// Records that no player read `download`'s fill for the probation.
    func wasQuiet(_ download: SharedDownload) {
        state.withLock { $0.active[ObjectIdentifier(download)]?.quietEnough = true }
    }

    /// Records that the fill of `download` ended: the file whole, or not (and why).
    func ended(_ download: SharedDownload, whole: Bool, reason: FillStop?) {
        let removed = state.withLock { $0.active.removeValue(forKey: ObjectIdentifier(download)) != nil }
        guard removed else { return }
        if whole {
            CacheMetrics.fill(.completed)
        } else {
            CacheMetrics.fill(.stopped)
            CacheMetrics.fillStopped(reason ?? .originFailed)
        }
    }

    /// The fills under way, their positions now.
    package var progress: [Progress] {
        state.withLock { Array($0.active.values) }.map {
            Progress(url: $0.download.url.absoluteString, position: $0.download.position, length: $0.length)
        }
        .sorted { $0.url < $1.url }
    }
}

/// Why a fill on play ended before its file was whole: every fill that does not complete stops
/// for one of these (counted in `mediacache_fill_stops_total{reason}`).
package enum FillStop: String, Sendable, CaseIterable, Equatable {
    /// The network turned metered or low-data (the download rules).
    case metered
    /// The device's power turned low (the download rules).
    case lowPower = "low_power"
    /// Newer plays took the places of the fills (``FillOnPlay/capacity``).
    case superseded
    /// Another play began while its own was young and had read little: a skip
    /// (``FillPolicy/standing(played:of:proofBytes:quietEnough:otherPlayBegan:)``).
    case skipped
    /// The store refused its bytes (full of entries in use, a disk that failed).
    case storeRefused = "store_refused"
    /// Its entry was evicted, removed, or replaced by another version.
    case entryRemoved = "entry_removed"
    /// The origin failed past the retries.
    case originFailed = "origin_failed"
    /// The cache shut down.
    case shutDown = "shut_down"
}
