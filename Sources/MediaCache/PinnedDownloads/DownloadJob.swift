// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import MediaCacheHTTPFields

/// One pinned download: a file, an HLS asset (a variant, its default audio, their init
/// sections and segments) or a DASH presentation (a representation of each adaptation set,
/// its initialization and segments), kept whatever the store's size and age limits. Jobs are kept with
/// the store, so a job cut by a restart resumes, fetching only what is missing.
public struct DownloadJob: Sendable, Codable, Equatable, Identifiable {
    /// Where a job is.
    public enum State: String, Sendable, Codable, Equatable {
        /// Waiting for a free slot (``DownloadQueue/Configuration/maxConcurrent``), or for its
        /// rules to let it run (``DownloadJob/waiting`` says which).
        case queued
        case downloading
        /// Stopped by ``DownloadQueue/pause(_:)``; what arrived stays pinned.
        case paused
        /// Every byte is stored.
        case completed
        /// Stopped by an error, ``DownloadJob/failure`` says which; ``DownloadQueue/resume(_:)`` tries again.
        case failed

        /// Whether the job has ended, well or not, or waits for the user.
        public var isSettled: Bool { self == .completed || self == .failed || self == .paused }
    }

    /// A short identifier, unique in the store.
    public var id: String
    /// The file's or the playlist's URL.
    public var url: URL
    /// For an HLS asset or a DASH presentation, which and how much of it; `nil` for a file.
    public var asset: AssetChoice?
    public var state: State
    /// Why the job failed, in words.
    public var failure: String?
    /// Bytes of the pinned resources stored so far.
    public var bytesDone: Int64 = 0
    /// All the bytes the job pins: exact when ``totalIsEstimate`` is `false`, otherwise an
    /// estimate (an HLS variant's `BANDWIDTH` times its duration) until every length is known;
    /// `nil` while nothing is known.
    public var bytesTotal: Int64?
    public var totalIsEstimate = false
    /// Resources stored, of those the job pins (1 for a file).
    public var resourcesDone = 0
    public var resourcesTotal = 0
    /// Bytes per second fetched since the job last started, while it downloads.
    public var bytesPerSecond: Double?
    /// Seconds left at that rate, when the total is known.
    public var secondsLeft: Double?
    public var createdAt: Date
    /// Why a queued job does not download now (outside its window, on a network its rule
    /// forbids, short of disk space); `nil` when it runs or waits only for a free slot.
    public var waiting: DownloadJob.Wait?
    /// ``waiting`` in words, with what would end it.
    public var waitingDetail: String?
    /// What can be done about its ``failure`` or its ``waiting``, as data (the command line
    /// names its command or flag), when there is something.
    public var remedy: CacheError.Remedy?
    /// The job's own rules, over the queue's (``DownloadQueue/setRules(_:_:)``).
    public var rules: DownloadRules?
    /// Its place in the queue: lower first; jobs of one rank in the order they were added.
    var rank: Int?
    /// The entries the job pins: its playlists and resources.
    var keys: [CacheKey] = []
    /// For an asset, each rendition the job pins and how much of it is stored (when last
    /// looked: at the pin, as the download goes, when it settles).
    package var renditions: [RenditionState]?
    /// For a recording of a live stream (``DownloadQueue/record(_:for:variant:)``), what it holds.
    package var recording: Recording?
    /// The cookies its stream needs (those of its host in the fetcher's jar when it was last
    /// written), for after a restart; sealed with the job in an encrypted store.
    var cookies: [OriginCookie]?

    /// What of an HLS asset or a DASH presentation a job pins.
    public struct AssetChoice: Sendable, Codable, Equatable {
        public var format: CachingReader.ManifestKind
        /// The variants, audio, subtitles and trick play, every part said (``RenditionChoice/resolved``).
        public var renditions: RenditionChoice
        /// From the start, how many seconds; `nil` for all.
        public var seconds: Double?

        /// The first HLS variant, or representation of each DASH video adaptation set, chosen.
        public var variant: HLSPrefetchOptions.VariantChoice {
            get { renditions.variants.first ?? .first }
            set { renditions.variants = [newValue] }
        }

        init(format: CachingReader.ManifestKind, renditions: RenditionChoice, seconds: Double?) {
            self.format = format
            self.renditions = renditions.resolved
            self.seconds = seconds
        }

        private enum CodingKeys: String, CodingKey { case format, renditions, seconds, variant }

        /// A job written before renditions were chosen names only its variant.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            format = try container.decode(CachingReader.ManifestKind.self, forKey: .format)
            seconds = try container.decodeIfPresent(Double.self, forKey: .seconds)
            renditions =
                try container.decodeIfPresent(RenditionChoice.self, forKey: .renditions)
                ?? RenditionChoice(variants: [
                    try container.decodeIfPresent(HLSPrefetchOptions.VariantChoice.self, forKey: .variant) ?? .first
                ]).resolved
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(format, forKey: .format)
            try container.encode(renditions, forKey: .renditions)
            try container.encodeIfPresent(seconds, forKey: .seconds)
        }
    }

    /// Whether the job records a live stream (``DownloadQueue/record(_:for:variant:)``).
    public var isRecording: Bool { recording != nil }

    /// The seconds a recording holds (gaps left out); `nil` for another job.
    public var recordedSeconds: Double? { recording?.duration }

    /// The error of a job `id` that is not there.
    static func missing(_ id: String) -> CacheError {
        CacheError(.notCached, "There is no download job \(id.prefix(60)).", remedy: CacheError.Remedy(.listJobs))
    }

    /// The fraction stored, 0...1, when the total is known.
    public var fraction: Double? {
        guard let total = bytesTotal else { return nil }
        return total > 0 ? min(1, Double(bytesDone) / Double(total)) : 1
    }
}

/// A rendition a job pins, and how much of it is stored.
package struct RenditionState: Sendable, Codable, Equatable {
    package var rendition: ChosenRendition
    package var state: HeldState
    /// Its resources (segments, init sections), and of those wholly stored.
    package var resources: Int
    package var resourcesHeld: Int
}

/// All jobs together, for a "Downloads" screen's header or `mediacache downloads`.
package struct DownloadTotals: Sendable, Codable, Equatable {
    public var jobs = 0
    public var active = 0
    public var bytesDone: Int64 = 0
    /// The sum of the totals known (estimates included).
    public var bytesTotal: Int64 = 0
    public var bytesPerSecond: Double = 0
    public var secondsLeft: Double?

    public init(_ jobs: [DownloadJob]) {
        self.jobs = jobs.count
        for job in jobs {
            if job.state == .downloading || job.state == .queued { active += 1 }
            bytesDone += job.bytesDone
            bytesTotal += job.bytesTotal ?? job.bytesDone
            bytesPerSecond += job.bytesPerSecond ?? 0
        }
        if bytesPerSecond > 0 { secondsLeft = Double(max(0, bytesTotal - bytesDone)) / bytesPerSecond }
    }
}
