// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// One item of a preload queue (``CachingReader/preload(_:)``): a media file, an HLS asset or
/// a DASH presentation, and how many seconds of it from its start.
public struct PreloadItem: Sendable, Hashable, Codable {
    /// The origin URL: a media file, an HLS playlist or a DASH manifest.
    public var url: URL
    /// How much of its start to store, in seconds of media.
    public var seconds: Double

    /// Creates an item.
    /// - Parameters:
    ///   - url: the origin URL (a media file, an HLS playlist or a DASH manifest).
    ///   - seconds: how much of its start, in seconds of media.
    /// How many items a preload queue takes at most (``CachingReader/maximumPreloadItems``).
    package static var maximumQueued: Int { Preloader.maximumItems }

    public init(_ url: URL, seconds: Double = 5) {
        self.url = url
        self.seconds = seconds
    }
}

extension PreloadItem {
    /// Where one item of the preload queue is (``CachingReader/preloadStatus``).
    public struct Status: Sendable, Equatable, Codable {
        /// An item's state.
        public enum State: String, Sendable, Codable {
            /// Waiting for a transfer.
            case queued
            /// Being fetched.
            case preloading
            /// Its first seconds are stored.
            case done
            /// It could not be preloaded (``PreloadItem/Status/error`` says why); the queue went on.
            case failed
            /// Stopped before its end: the queue's byte budget was spent.
            case overBudget
        }

        /// The item's origin URL.
        public var url: URL
        /// The seconds asked for.
        public var seconds: Double
        /// Where it is.
        public var state: State
        /// Bytes fetched from the origin for it.
        public var bytesFetched: Int64
        /// Why it failed, if it did.
        public var error: String?
        /// Why a queued item does not start (or a started one stopped at its boundary and
        /// waits to go on): `"power"` while the device's power is low. `nil`: nothing holds it.
        public var waiting: String?
    }
}
