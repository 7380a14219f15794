// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

#if canImport(AVFoundation)
    public import Foundation
    public import MediaCache

    extension CacheStore.Configuration {
        /// This configuration, with every folder and file the store makes (and, at each open, its
        /// folders and index files) excluded from the device's backup: a store kept in
        /// `Application Support`, where the system never purges pins, must not go to iCloud, as
        /// what it holds can be downloaded again (App Store Review Guideline 2.23). A flag the
        /// system refuses is logged at warning; the store goes on.
        ///
        /// ```swift
        /// var configuration = CacheStore.Configuration().excludingFromBackup()
        /// configuration.cacheDirectory = caches.appendingPathComponent("MediaCache")
        /// let store = try await CacheStore.open(directory: support.appendingPathComponent("MediaCache"),
        ///                                       configuration: configuration)
        /// ```
        public func excludingFromBackup() -> CacheStore.Configuration {
            var configuration = self
            let logger = logger
            configuration.markCreated = { url in
                var values = URLResourceValues()
                values.isExcludedFromBackup = true
                var item = url
                do {
                    try item.setResourceValues(values)
                } catch {
                    logger.warning(
                        "Could not exclude a file of the store from backup",
                        metadata: ["path": "\(url.path)", "reason": "\(error)"])
                }
            }
            return configuration
        }
    }
#endif
