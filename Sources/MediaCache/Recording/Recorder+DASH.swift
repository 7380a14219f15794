// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// A DASH recording: its manifest, its run, and the pure reading of a live manifest into tracks.
extension Recorder {
    /// The elements that say where a representation's segments are, left out of what a
    /// recording copies of the origin's manifest (the recording writes its own).
    static let segmentInformation: Set<String> = ["SegmentTemplate", "SegmentList", "SegmentBase", "BaseURL"]

    /// The DASH recording `id` as a manifest (URLs absolute, at the origin): `dynamic` while it
    /// records, `static` once it stopped; `nil` when there is no such recording.
    package func manifest(_ id: String) -> (text: String, base: URL)? {
        guard let job = jobs.job(id), let recording = job.recording?.dash else { return nil }
        let now = store.configuration.clock.now
        let text = DASHRecordingWriter.manifest(
            recording.tracks, namespaces: recording.namespaces ?? "",
            finished: recording.finished || job.state == .completed,
            anchor: recording.anchor ?? now, now: now)
        return (text, job.url)
    }

    /// Runs the DASH recording `id`: reads its manifest as often as new segments may appear,
    /// and stores each new segment of each representation followed (a track per
    /// representation and period), until it is due to stop or the manifest turns static.
    func runDASH(_ id: String) async throws {
        // Segments taken but not stored when the last run was cut: fetched now.
        for (index, track) in (jobs.job(id)?.recording?.dash?.tracks ?? []).enumerated() {
            try await keep(
                unheld(track.timeline), of: id, track: index,
                initialization: track.initialization.flatMap(URL.init(string:)))
        }
        var failing: Date?
        while true {
            try Task.checkCancellation()
            let job = try current(id)
            guard
                let (manifest, metadata) = try await reloading(
                    id, job.url, failingSince: &failing,
                    {
                        let info = try await reader.contentInfo(
                            for: job.url, maximumAge: .milliseconds(500), as: requester)
                        let (body, metadata) = try await reader.bodies.playlistBody(
                            job.url, planned: info, as: requester)
                        do {
                            return (try DASHManifest(parsing: body), metadata)
                        } catch let error as DASHManifestError {
                            logger.warning(
                                "Rejected an origin manifest",
                                metadata: [
                                    "url": "\(job.url.absoluteString.prefix(200))", "reason": "\(error.message)",
                                ])
                            throw CacheError(
                                .originRejected,
                                "The manifest at \(job.url.absoluteString.prefix(200)) cannot be read: \(error.message)"
                            )
                        }
                    })
            else {
                guard try await stillRecording(id, ended: false, wait: 1) else { return }
                continue
            }
            let now = store.configuration.clock.now
            let snapshot = try Self.tracks(
                of: manifest, url: job.url, base: metadata.finalURL ?? job.url, now: now,
                choice: job.recording?.choice ?? RenditionChoice())
            let taken =
                jobs.updateDASH(of: id) {
                    recording -> [(track: Int, initialization: URL?, segments: [RecordedSegment])] in
                    let taken = Self.merge(snapshot, into: &recording, ended: !manifest.isDynamic, now: now)
                    if recording.namespaces == nil { recording.namespaces = manifest.namespaceDeclarations }
                    return taken
                } ?? []
            // Written before the fetches: a cut run knows what it had taken, and the next one fetches it.
            if taken.contains(where: { !$0.segments.isEmpty }) { try? await jobs.persist(id) }
            for (track, initialization, segments) in taken {
                try await keep(segments, of: id, track: track, initialization: initialization)
            }
            // Read again when the shortest segment may have been followed by another (half its
            // duration), at most after the manifest's update period.
            let shortest = snapshot.flatMap(\.segments).map(\.duration).filter { $0 > 0 }.min() ?? 2
            let wait = max(0.5, min(shortest / 2, manifest.minimumUpdatePeriod ?? .infinity))
            guard try await stillRecording(id, ended: !manifest.isDynamic, wait: wait) else { return }
        }
    }

    /// The tracks a recording of `manifest` (at `url`, its references against `base`) follows
    /// at `now`, with the segments each lists: the representations `choice` takes (as a pin
    /// does: by default the video's and the default audio's).
    static func tracks(
        of manifest: DASHManifest, url: URL, base: URL, now: Date, choice: RenditionChoice
    ) throws -> [(track: RecordedTrack, segments: [RecordedSegment])] {
        let presentation = manifest.presentation(base: base, now: now)
        let chosen: [(ChosenRendition, DASHPresentation.Representation)]
        do {
            chosen = try choice.representations(of: presentation, url: url)
        } catch {
            throw CacheError(.outOfBounds, error.message)
        }
        return chosen.compactMap { rendition, representation in
            guard let position = rendition.period, position < presentation.periods.count,
                let set = presentation.periods[position].adaptationSets.first(where: {
                    $0.representations.contains { $0.element == representation.element }
                })
            else { return nil }
            let period = presentation.periods[position]
            let track = RecordedTrack(
                key: [period.id, rendition.role.rawValue, rendition.language ?? "", representation.id].joined(
                    separator: "|"), period: period.id,
                periodStart: period.start, timescale: representation.timing.timescale,
                offset: representation.timing.offset,
                initialization: representation.timing.initialization?.absoluteString,
                adaptationSet: manifest.opening(set.element, skipping: segmentInformation.union(["Representation"])),
                representation: manifest.opening(representation.element, skipping: segmentInformation))
            return (track, RecordedTrack.segments(of: representation))
        }
    }

    /// Takes a snapshot of the tracks into `recording`: returns each track's new segments.
    /// A track whose times went back (the origin started its timeline again within a period)
    /// goes on as a new track, so a new period of the recording. Pure.
    static func merge(
        _ snapshot: [(track: RecordedTrack, segments: [RecordedSegment])], into recording: inout DASHRecording,
        ended: Bool,
        now: Date
    ) -> [(track: Int, initialization: URL?, segments: [RecordedSegment])] {
        var tracks = recording.tracks
        var taken: [(track: Int, initialization: URL?, segments: [RecordedSegment])] = []
        for (track, segments) in snapshot {
            var index = tracks.lastIndex { $0.key == track.key || $0.key.hasPrefix(track.key + "~") }
            if let known = index, let last = tracks[known].timeline.lastSequence, let newest = segments.last?.sequence,
                newest < last
            {
                index = nil
            }
            if index == nil {
                var added = track
                let restarts = tracks.filter { $0.key == track.key || $0.key.hasPrefix(track.key + "~") }.count
                if restarts > 0 {
                    added.key += "~\(restarts)"
                    added.period += "~\(restarts)"
                }
                tracks.append(added)
                index = tracks.count - 1
            }
            let new = tracks[index!].timeline.merge(segments, endList: ended)
            taken.append((index!, tracks[index!].initialization.flatMap(URL.init(string:)), new))
        }
        if recording.anchor == nil, !taken.allSatisfy({ $0.segments.isEmpty }) {
            // As if the first segment had begun that long before now that its last one ended now.
            let first = tracks.compactMap { track in track.timeline.segments.first.map(track.start(of:)) }.min() ?? 0
            let last = tracks.compactMap(\.end).max() ?? first
            recording.anchor = now.addingTimeInterval(-(last - first))
        }
        recording.tracks = tracks
        return taken
    }
}
