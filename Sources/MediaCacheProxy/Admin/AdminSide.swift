// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache

/// What the admin endpoints manage: the read path itself (prefetches, preloads, exports, its
/// status) and the pinned downloads, if the app keeps a queue. The answers to players reach the
/// read path only through ``PlayerSource``.
struct AdminSide: Sendable {
    let reader: CachingReader
    /// The pinned downloads the admin endpoints control, if the app keeps a queue.
    let downloads: DownloadQueue?
}

extension ProxyHandler {
    /// A handler over `reader`: its answers through the reader's ``PlayerSource`` face, its admin
    /// endpoints over the reader and `downloads`.
    init(
        reader: CachingReader, downloads: DownloadQueue? = nil, configuration: ProxyConfiguration,
        statistics: ProxyStatistics = ProxyStatistics()
    ) {
        statistics.countsLifetime(in: reader.store)
        self.init(
            engine: reader, admin: AdminSide(reader: reader, downloads: downloads),
            securityWarning: reader.securityWarning, checkOrigin: reader.checkOrigin, configuration: configuration,
            statistics: statistics)
    }
}
