// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// The `# HELP` line of each metric, added to a text export (swift-metrics carries no help
/// text, and Prometheus's linter asks for one).
package enum MetricsHelp {
    package static let texts: [String: String] = [
        "mediacache_requests_total":
            "Proxy requests by how they were answered (hit, partial, miss, pass-through, error, none).",
        "mediacache_served_bytes_total": "Body bytes served to players, by where they came from (cache or origin).",
        "mediacache_listener_closed_total":
            "Times the listening socket closed under the proxy (it then listens again on the same port).",
        "mediacache_refused_requests_total":
            "Requests a guard refused, by cause (cross-site page, host, token, capability: a LAN URL altered, expired: a LAN URL past its expiry, revoked: a LAN URL revoked, loop: the proxy itself as origin, private-address: a LAN URL another origin named on this machine or its networks, origin, admin header).",
        "mediacache_request_duration_seconds": "Time from a request's arrival to the end of its answer.",
        "mediacache_origin_requests_total": "Requests sent to origins (content information, ranges, revalidations).",
        "mediacache_origin_bytes_total": "Body bytes received from origins.",
        "mediacache_revalidations_total": "Revalidations of stale entries with the origin, by outcome.",
        "mediacache_evictions_total": "Entries evicted to stay within the size or age limit.",
        "mediacache_evicted_bytes_total":
            "Bytes let go by eviction (entries removed, and entries trimmed to their start).",
        "mediacache_evicted_reason_bytes_total":
            "Bytes let go by eviction, by reason: unplayed (the cache's own fetches no player read), tail (past an entry's start), unproven (new, not played again), cold (played, not lately), expired (the maximum age), disk (the free-space floor).",
        "mediacache_downloads_in_flight": "Origin downloads running now.",
        "mediacache_cache_size_bytes": "Bytes stored in the cache.",
        "mediacache_pinned_downloads_waiting":
            "Pinned downloads that wait, by reason: window (outside their hours), network (metered or low-data and their rule forbids it), space (the disk is at its free-space floor).",
        "mediacache_disk_free_bytes":
            "Free space on the cache's disk, as last measured (the cache keeps its configured minimum of it free).",
        "mediacache_cache_limit_bytes": "The most bytes the cache may hold.",
        "mediacache_cache_entries": "Entries in the cache.",
        "mediacache_index_rebuilds_total":
            "Times the cache index was found damaged or missing at open and rebuilt from the entry records.",
        "mediacache_origin_retries_total":
            "Origin requests made again, by cause: resume (a download resumed after its connection broke), connection-closed (a pooled connection closed before the answer), play-url-refused (the URL a play was led to refused, the player's URL asked again); each is logged.",
        "mediacache_refused_lan_redirects_total":
            "Redirects a LAN request met that led to this machine or its networks, elsewhere than the origin its URL was made for: refused with a 403, each logged with the client's address.",
        "mediacache_refused_cookies_total":
            "Set-Cookie fields from origins that the cookie jar refused (another site's domain, Secure over HTTP, malformed, too long); each is logged.",
        "mediacache_segments_read_ahead_total":
            "HLS and DASH segments the proxy began to store ahead of a player playing through a media playlist or a representation.",
        "mediacache_yields_to_players_total":
            "Times one of the cache's own transfers (read-ahead, prefetch, preload, pinned download) paused so a player waiting on the origin went first.",
        "mediacache_origin_connection_waits_total":
            "Times a player's origin request waited for a connection because every one its host may have was in use; each is logged.",
        "mediacache_changed_mid_read_total":
            "Times the origin answered another version while a read needed the rest of the stored one: the read failed (never two versions spliced) and the cached version was dropped; each is logged.",
        "mediacache_origin_failovers_total":
            "Times an origin failed (unreachable, too slow, 5xx, a body broken) and an alternate serving the same bytes (one the configuration names, or one the stream's manifests name) was asked; each is logged.",
        "mediacache_url_renewals_total":
            "Signed URLs renewed in a play (expired, or refused with 401/403/410) through the configured refresh hook, by outcome (renewed, failed); each is logged.",
        "mediacache_background_transfers_total":
            "Pinned downloads' transfers on a system session (iOS background URLSession), by outcome (imported, rejected: not what was asked for, failed); rejected and failed ones are logged.",
        "mediacache_fills_total":
            "Fills on play (a played file fetched on to its end as the cache's own work), by outcome (started, completed, stopped).",
        "mediacache_fill_stops_total":
            "Fills on play that ended before their file was whole, by reason (metered, superseded: newer plays took their places, skipped: another play began before its own proved itself, store_refused: the store refused its bytes or has no room of the cache's own kind, entry_removed, origin_failed, shut_down).",
        "mediacache_preloaded_bytes_total": "Bytes preload items fetched from origins.",
        "mediacache_preloads_total":
            "Preload items ended, by outcome (done, failed, over_budget, stopped); a failure is logged.",
        "mediacache_preload_hits_total":
            "Preloaded resources (a file, an HLS or DASH segment) a player then read, each counted once per preload.",
        "mediacache_rejected_blocks_total":
            "Stored blocks that failed their check (a CRC-32C, or an encrypted cache's seal): changed on disk, torn by a crash, another key; each is dropped and fetched again.",
        "mediacache_damaged_blocks_total":
            "Blocks that failed their check, by what became of them (refetched: stored again right; unrecoverable: needed while the origin could not give them).",
        "mediacache_connections_accepted_total":
            "Connections accepted, by the event loop that accepted and serves them.",
        "mediacache_origin_digests_total":
            "Whole entries checked against the digests their origin sent (Repr-Digest, Content-Digest, x-amz-checksum-*, x-goog-hash), by outcome (matched; mismatched: the stored representation was dropped).",
    ]

    /// `export` with a `# HELP` line before each `# TYPE` line of a known metric that has none.
    package static func annotate(_ export: String) -> String {
        var lines: [Substring] = []
        var previous: Substring = ""
        for line in export.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE "), let name = line.split(separator: " ").dropFirst(2).first,
                !previous.hasPrefix("# HELP "),
                let help = texts[String(name)]
            {
                lines.append(Substring("# HELP \(name) \(help)"))
            }
            lines.append(line)
            previous = line
        }
        return lines.joined(separator: "\n")
    }
}
