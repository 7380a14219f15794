// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// A recording of a live stream, as its job keeps it: an HLS recording (the media playlists it
/// follows and the segments each holds) or a DASH one (the representations it follows, each a
/// track). Written with its job as `{"version": 2, "hls": …}` or `{"version": 2, "dash": …}`;
/// a job written before the version (one flat object, `format` saying DASH) reads the same.
package enum Recording: Sendable, Equatable {
    case hls(HLSRecording)
    case dash(DASHRecording)

    /// A recording not begun of a stream of `kind`, taking `choice`, stopping at `until`.
    package init(_ kind: CachingReader.ManifestKind, choice: RenditionChoice, until: Date?) {
        switch kind {
        case .dash: self = .dash(DASHRecording(choice: choice, until: until))
        case .hls: self = .hls(HLSRecording(choice: choice, until: until))
        }
    }

    package var isDASH: Bool { dash != nil }

    /// The HLS recording it is, if it is one.
    package var hls: HLSRecording? { if case .hls(let recording) = self { recording } else { nil } }

    /// The DASH recording it is, if it is one.
    package var dash: DASHRecording? { if case .dash(let recording) = self { recording } else { nil } }

    /// When it stops, if not at the end of the presentation.
    package var until: Date? {
        switch self {
        case .hls(let recording): recording.until
        case .dash(let recording): recording.until
        }
    }

    /// What it takes of a multivariant playlist or manifest.
    package var choice: RenditionChoice {
        switch self {
        case .hls(let recording): recording.choice
        case .dash(let recording): recording.choice
        }
    }

    /// It stopped: at its time, at the end of the presentation, or by hand.
    package var finished: Bool {
        get {
            switch self {
            case .hls(let recording): recording.finished
            case .dash(let recording): recording.finished
            }
        }
        set {
            switch self {
            case .hls(var recording):
                recording.finished = newValue
                self = .hls(recording)
            case .dash(var recording):
                recording.finished = newValue
                self = .dash(recording)
            }
        }
    }

    /// The seconds held, gaps left out.
    package var duration: Double {
        switch self {
        case .hls(let recording): recording.duration
        case .dash(let recording): recording.duration
        }
    }

    /// Applies `body` to the timeline of `track` (see each kind's `update`).
    package mutating func update(_ track: Int?, _ body: (inout RecordingTimeline) -> Void) {
        switch self {
        case .hls(var recording):
            recording.update(track, body)
            self = .hls(recording)
        case .dash(var recording):
            recording.update(track, body)
            self = .dash(recording)
        }
    }
}

extension Recording: Codable {
    private enum Keys: String, CodingKey { case version, hls, dash, format }

    /// The layout written now; a job without it was written by version 1.
    static let version = 2

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        switch try container.decodeIfPresent(Int.self, forKey: .version) {
        case nil:
            self = try Self.version1(decoder)
        case Self.version:
            if let dash = try container.decodeIfPresent(DASHRecording.self, forKey: .dash) {
                self = .dash(dash)
            } else {
                self = .hls(try container.decode(HLSRecording.self, forKey: .hls))
            }
        case let version?:
            throw DecodingError.dataCorruptedError(
                forKey: .version, in: container,
                debugDescription: "A recording of layout \(version) was written by a newer MediaCache.")
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(Self.version, forKey: .version)
        switch self {
        case .hls(let recording): try container.encode(recording, forKey: .hls)
        case .dash(let recording): try container.encode(recording, forKey: .dash)
        }
    }

    /// The flat layout of version 1: HLS and DASH fields side by side, `format` `"dash"` for
    /// DASH, the choice as `variant` unless `chosen` says more.
    private struct Version1: Decodable {
        var variant: HLSPrefetchOptions.VariantChoice
        var chosen: RenditionChoice?
        var until: Date?
        var finished: Bool?
        var format: CachingReader.ManifestKind?
        var mediaPlaylist: URL?
        var timeline: RecordingTimeline?
        var renditions: [RecordedPlaylist]?
        var variantLine: String?
        var carried: [String]?
        var tracks: [RecordedTrack]?
        var namespaces: String?
        var anchor: Date?
    }

    private static func version1(_ decoder: any Decoder) throws -> Recording {
        let old = try Version1(from: decoder)
        let choice = old.chosen ?? RenditionChoice(variants: [old.variant])
        if old.format == .dash {
            var dash = DASHRecording(choice: choice, until: old.until)
            dash.finished = old.finished ?? false
            dash.tracks = old.tracks ?? []
            dash.namespaces = old.namespaces
            dash.anchor = old.anchor
            return .dash(dash)
        }
        var hls = HLSRecording(choice: choice, until: old.until)
        hls.finished = old.finished ?? false
        hls.mediaPlaylist = old.mediaPlaylist
        hls.timeline = old.timeline ?? RecordingTimeline()
        if let variantLine = old.variantLine {
            hls.master = HLSRecording.Master(
                variantLine: variantLine, renditions: old.renditions ?? [], carried: old.carried ?? [])
        }
        return .hls(hls)
    }
}
