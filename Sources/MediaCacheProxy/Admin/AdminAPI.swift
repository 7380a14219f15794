// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
package import MediaCache
package import NIOHTTP1

/// One admin operation under `/_mediacache/`: its method, its name, what its query carries
/// (`Query`) and what it answers (`Answer`, JSON unless ``AdminAPI`` says otherwise). The
/// server routes from these values and the CLI asks through them: neither writes a name.
package struct AdminEndpoint<Query: AdminQuery, Answer: Codable & Sendable>: Sendable {
    package let method: HTTPMethod
    package let name: String

    init(_ method: HTTPMethod, _ name: String) {
        self.method = method
        self.name = name
    }

    /// Its method and name, as the table lists it.
    package var route: AdminRoute { AdminRoute(method: method, name: name) }
}

/// A method and a name of the admin table, without its types.
package struct AdminRoute: Sendable, Hashable {
    package let method: HTTPMethod
    package let name: String

    package func hash(into hasher: inout Hasher) {
        hasher.combine(method.rawValue)
        hasher.combine(name)
    }
}

/// The admin API's one table. They answer JSON, need the token when one is set, ask a
/// change to carry `X-MediaCache-Admin: 1`, and never proxy anything; an origin URL is given
/// as `target=`, a download job (its ID, or a URL it pins) as `job=`.
package enum AdminAPI {
    /// `[CacheEntrySummary]`: every entry.
    package static let entries = AdminEndpoint<NoQuery, [CacheEntrySummary]>(.GET, "entries")
    /// The entry of `target=`, or 404.
    package static let entry = AdminEndpoint<URLQuery, CacheEntrySummary>(.GET, "entry")
    package static let stats = AdminEndpoint<NoQuery, AdminStats>(.GET, "stats")
    package static let remove = AdminEndpoint<URLQuery, Removed>(.POST, "remove")
    package static let clear = AdminEndpoint<NoQuery, Cleared>(.POST, "clear")
    /// One `PrefetchProgress` JSON per line as it goes, then `{"done": …}` or `{"error": …}`.
    package static let prefetch = AdminEndpoint<AssetQuery, PrefetchProgress>(.POST, "prefetch")
    package static let downloads = AdminEndpoint<NoQuery, [DownloadJob]>(.GET, "downloads")
    /// The job, queued; 507 with the numbers when it cannot fit.
    package static let pin = AdminEndpoint<PinQuery, DownloadJob>(.POST, "pin")
    /// Releases `target=`, or the renditions the query names.
    package static let unpin = AdminEndpoint<AssetQuery, Unpinned>(.POST, "unpin")
    /// The job under its new rules.
    package static let rules = AdminEndpoint<RulesQuery, DownloadJob>(.POST, "rules")
    /// The job, moved to the front of the queue (`to=first`) or the back (`to=last`).
    package static let move = AdminEndpoint<MoveQuery, DownloadJob>(.POST, "move")
    package static let network = AdminEndpoint<NoQuery, NetworkReport>(.GET, "network")
    /// Says the network over the system's (`mode=auto|metered|unmetered`).
    package static let setNetwork = AdminEndpoint<NetworkQuery, NetworkReport>(.POST, "network")
    /// The job `job=` with the new URL `target=` (a signed URL that expired), queued again.
    package static let replaceURL = AdminEndpoint<ReplaceURLQuery, DownloadJob>(.POST, "replace-url")
    package static let pause = AdminEndpoint<JobQuery, DownloadJob>(.POST, "pause")
    package static let resume = AdminEndpoint<JobQuery, DownloadJob>(.POST, "resume")
    package static let cancel = AdminEndpoint<JobQuery, Cancelled>(.POST, "cancel")
    /// Writes what is cached of `target=` to `output=` (an absolute path on the server's
    /// machine); 504 naming what is not cached.
    package static let export = AdminEndpoint<ExportQuery, ExportSummary>(.POST, "export")
    /// Checks the entries of each `target=` (every entry without one) against their block
    /// checksums now, and fetches damaged bytes again unless `repair=0`.
    package static let verify = AdminEndpoint<VerifyQuery, [VerifyReport]>(.POST, "verify")
    /// The preload queue.
    package static let preloadStatus = AdminEndpoint<NoQuery, [PreloadItem.Status]>(.GET, "preload")
    /// A new preload queue, in the order the items will play; it replaces the old one and
    /// answers at once.
    package static let preload = AdminEndpoint<PreloadQuery, [PreloadItem.Status]>(.POST, "preload")
    /// The preload queue, emptied.
    package static let stopPreload = AdminEndpoint<NoQuery, [PreloadItem.Status]>(.DELETE, "preload")
    /// The played files being fetched on to their end (`FillPolicy`), each with its position.
    package static let fills = AdminEndpoint<NoQuery, [FillOnPlay.Progress]>(.GET, "fills")
    /// Starts a recording: its job and the URL a player opens to watch it.
    package static let record = AdminEndpoint<AssetQuery, RecordingAnswer>(.POST, "record")
    /// A recording's playlist, for a player (`EVENT` while it records, `VOD` after), its URIs
    /// through the proxy; of a multivariant one, with no `track=`, its multivariant playlist
    /// naming each track's (0 the variant's, 1, … its renditions'). Answers a playlist.
    package static let recordingPlaylist = AdminEndpoint<TrackQuery, String>(.GET, "recording.m3u8")
    /// A DASH recording's manifest (`dynamic` while it records, `static` after), the same.
    package static let recordingManifest = AdminEndpoint<JobQuery, String>(.GET, "recording.mpd")

    /// Revokes one LAN URL (`lan-url=`), every other one going on (``LANRevocations``).
    package static let lanRevoke = AdminEndpoint<LANURLQuery, LANRevoked>(.POST, "lan-revoke")

    /// Every method and name of the table (`GET` answering `HEAD` too).
    package static let routes: [AdminRoute] = [
        entries.route, entry.route, stats.route, remove.route, clear.route, prefetch.route, downloads.route, pin.route,
        unpin.route, rules.route, move.route, network.route, setNetwork.route, replaceURL.route, pause.route,
        resume.route, cancel.route, export.route, verify.route, preloadStatus.route, preload.route, stopPreload.route,
        fills.route,
        record.route,
        recordingPlaylist.route, recordingManifest.route, lanRevoke.route,
    ]

    /// `POST /_mediacache/remove`: whether there was an entry.
    package struct Removed: Sendable, Codable, Equatable {
        package var removed: Bool
    }

    /// `POST /_mediacache/lan-revoke`: whether the URL was not revoked already.
    package struct LANRevoked: Sendable, Codable, Equatable {
        package var revoked: Bool
    }

    /// `POST /_mediacache/clear`: how many entries there were.
    package struct Cleared: Sendable, Codable, Equatable {
        package var removed: Int
    }

    /// `POST /_mediacache/unpin`: whether anything was released.
    package struct Unpinned: Sendable, Codable, Equatable {
        package var unpinned: Bool
    }

    /// `POST /_mediacache/cancel`.
    package struct Cancelled: Sendable, Codable, Equatable {
        package var cancelled = true
    }
}
