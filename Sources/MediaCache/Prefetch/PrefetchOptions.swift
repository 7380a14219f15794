// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// What to cache of an HLS asset ahead of playing it (see ``CachingReader/prefetchHLS(_:options:progress:)``).
public struct HLSPrefetchOptions: Sendable, Equatable {
    /// Which variant stream of a master playlist.
    public enum VariantChoice: Sendable, Equatable, Codable {
        /// The first listed (what most players start with).
        case first
        case lowestBandwidth
        case highestBandwidth
        /// The highest `BANDWIDTH` of at most this many bits per second; the lowest if none is.
        case atMost(bitsPerSecond: Int64)
        /// The tallest picture (`RESOLUTION`, DASH `height`) of at most this many lines, the
        /// highest `BANDWIDTH` of those; the shortest if none is; the first when none says.
        case atMostHeight(Int64)
    }

    /// The variants, audio and subtitle languages and trick-play playlists to store.
    public var renditions = RenditionChoice()

    /// The first of ``RenditionChoice/variants`` (setting it makes it the only one).
    public var variant: VariantChoice {
        get { renditions.variants.first ?? .first }
        set { renditions.variants = [newValue] }
    }
    /// How much of each media playlist, from its first segment: `nil` for all of it, else
    /// segments until their durations reach this many seconds.
    public var seconds: Double?
    /// How many resources are fetched at once.
    public var concurrency = 2
    /// Request fields for the origin (credentials, cookies).
    public var headers: RequestHeaders = []

    public init(variant: VariantChoice = .first, seconds: Double? = nil) {
        self.renditions = RenditionChoice(variants: [variant])
        self.seconds = seconds
    }

    /// The options of `renditions` and `seconds`.
    public init(renditions: RenditionChoice, seconds: Double? = nil) {
        self.renditions = renditions
        self.seconds = seconds
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.renditions == rhs.renditions && lhs.seconds == rhs.seconds && lhs.concurrency == rhs.concurrency
            && lhs.headers.map { "\($0.name):\($0.value)" } == rhs.headers.map { "\($0.name):\($0.value)" }
    }
}

/// How far a prefetch has got.
public struct PrefetchProgress: Sendable, Equatable, Codable {
    /// Media segments and init sections stored, of those chosen.
    public var resourcesDone = 0
    public var resourcesTotal = 0
    /// Bytes of the chosen resources stored (fetched now or already cached).
    public var bytesDone: Int64 = 0
    /// The chosen resources' bytes, once every one's length is known (byte-range segments
    /// are known from the playlist; whole files once they are reached).
    public var bytesTotal: Int64?
    /// Of ``bytesDone``, those of resources that were wholly cached before the prefetch.
    public var bytesAlreadyCached: Int64 = 0
    /// The media playlists chosen (one per rendition: the variant, its audio).
    public var playlists: [URL] = []

    public init() {}

    /// Whether every chosen resource is stored.
    public var isComplete: Bool { resourcesDone == resourcesTotal }
}
