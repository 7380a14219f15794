// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache

/// What the admin endpoints manage: the engine, through ``AdminSource`` alone (its store,
/// what it is doing, prefetches, preloads, exports, verifies), and the pinned downloads, if the
/// app keeps a queue. The answers to players reach the engine only through ``PlayerSource``.
struct AdminSide: Sendable {
    let engine: any AdminSource
    /// The pinned downloads the admin endpoints control, if the app keeps a queue.
    let downloads: DownloadQueue?
}
