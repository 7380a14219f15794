// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
package import MediaCache

/// `POST /_mediacache/record`: the recording's job, and the URL a player opens to watch it.
package struct RecordingAnswer: Sendable, Codable, Equatable {
    package var job: DownloadJob
    package var url: String

    package init(job: DownloadJob, url: String) {
        self.job = job
        self.url = url
    }
}

/// `GET /_mediacache/stats`.
package struct AdminStats: Sendable, Codable, Equatable {
    package var store: CacheStoreSummary
    package var proxy: ProxyStatistics.Snapshot
    package var downloadsInFlight: Int
    /// What the store served and let go over its life (`nil` from a server before it kept one).
    package var usage: UsageHistory?

    package init(
        store: CacheStoreSummary, proxy: ProxyStatistics.Snapshot, downloadsInFlight: Int, usage: UsageHistory? = nil
    ) {
        self.store = store
        self.proxy = proxy
        self.downloadsInFlight = downloadsInFlight
        self.usage = usage
    }
}

/// `GET /_mediacache/network`: what downloads take the network to be, and who says so.
package struct NetworkReport: Sendable, Codable, Equatable {
    /// What downloads go by.
    package var effective: DownloadRules.NetworkConditions
    /// What the system says.
    package var system: DownloadRules.NetworkConditions
    /// What the user says over it (`mediacache network`).
    package var override: DownloadRules.NetworkOverride

    package init(_ downloads: DownloadQueue) {
        (effective, system) = downloads.network
        override = downloads.networkOverride
    }
}
