// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// A recording written as one playable file, as a held asset is (``FileExport``).
extension Recorder {
    /// Writes the recording `id` as one file at `destination`: its first track (the variant)
    /// and its other tracks (audio renditions) in one MP4 or `.ts`, WebVTT tracks beside it. A
    /// gap's segment is left out (the timestamps jump over it).
    /// - Throws: ``CacheError`` as ``CachingReader/exportFile(_:to:renditions:)`` does;
    ///   `.notCached` when there is no such recording.
    package func exportFile(_ id: String, to destination: URL) async throws -> ExportSummary {
        guard let job = jobs.job(id), let recording = job.recording else { throw DownloadJob.missing(id) }
        var chosen: [FileExport.Rendition] = []
        func role(_ index: Int, _ resources: [ExportResource]) -> ChosenRendition.Role {
            if resources.contains(where: { ["vtt", "webvtt"].contains($0.item.url.pathExtension.lowercased()) }) {
                return .subtitles
            }
            return index == 0 ? .variant : .audio
        }
        switch recording {
        case .dash(let recording):
            for (index, track) in recording.tracks.enumerated() {
                var resources =
                    track.initialization.flatMap(URL.init(string:)).map {
                        [ExportResource(item: PrefetchItem(url: $0, range: nil))]
                    } ?? []
                for segment in track.timeline.segments where !segment.gap {
                    guard let url = URL(string: segment.url) else { continue }
                    resources.append(
                        ExportResource(item: PrefetchItem(url: url, range: segment.range), seconds: segment.duration))
                }
                let rendition = ChosenRendition(
                    role: role(index, resources), url: job.url, representation: track.representation, bandwidth: 0)
                chosen.append((rendition, resources))
            }
        case .hls(let recording):
            for track in recording.timelines.indices {
                guard let (text, base, _) = playlist(id, track: track) else { throw DownloadJob.missing(id) }
                let playlist = try HLSPlaylist(parsing: Array(text.utf8))
                let gaps = Set(try RecordedSegment.segments(of: playlist, base: base).filter(\.gap).map(\.url))
                let resources = try ExportChoice.resources(
                    of: playlist, base: base, encryptions: try playlist.segmentEncryptions(), skipping: gaps)
                chosen.append((ChosenRendition(role: role(track, resources), url: job.url, bandwidth: 0), resources))
            }
        }
        return try await FileExport(reading: reader).write(chosen, to: destination, source: job.url.absoluteString)
    }
}
