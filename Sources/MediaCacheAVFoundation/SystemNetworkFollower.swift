// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

#if canImport(AVFoundation)
    import Dispatch
    public import MediaCache
    import Network

    /// Tells a download queue what the system says of the network, as an `NWPathMonitor`
    /// sees it: an expensive path (cellular, a personal hotspot) as metered, a constrained one
    /// (Low Data Mode) as such. Jobs whose network rule forbids it wait
    /// (``MediaCache/DownloadQueue/Configuration/rules``); keep the follower as long as the queue.
    ///
    /// ```swift
    /// let downloads = try DownloadQueue(reader: reader)
    /// let network = SystemNetworkFollower(downloads)
    /// downloads.start()
    /// ```
    // NWPathMonitor is safe to use from any thread; its handler runs on the follower's queue.
    public final class SystemNetworkFollower: @unchecked Sendable {
        private let monitor = NWPathMonitor()

        /// Starts following the network for `downloads`.
        public init(_ downloads: DownloadQueue) {
            monitor.pathUpdateHandler = { [weak downloads] path in
                downloads?.networkChanged(
                    DownloadRules.NetworkConditions(isMetered: path.isExpensive, isConstrained: path.isConstrained))
            }
            monitor.start(queue: DispatchQueue(label: "mediacache.network"))
        }

        deinit {
            monitor.cancel()
        }
    }
#endif
