// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Logging
import Synchronization

extension DownloadQueue {
    // MARK: Recording

    /// Records the live stream at `url`: an HLS media playlist, or a multivariant playlist whose
    /// `variant` is followed, or a DASH manifest (the representation `variant` picks of its
    /// video, and its default audio). A job that fetches each segment as it appears and keeps
    /// it pinned, from the segments the live window shows now, until `duration` has passed or
    /// the presentation ends (`EXT-X-ENDLIST`, a static manifest), or the job is cancelled or
    /// paused. Its playlist (the proxy's `/_mediacache/recording.m3u8?job=ID`, for DASH
    /// `recording.mpd`) plays what it holds from the first segment, while it records and
    /// after. Segments it missed are a discontinuity; one it could not fetch a gap.
    /// - Throws: ``CacheError`` `.originRejected` for what is neither; origin errors.
    @discardableResult
    public func record(_ url: URL, for duration: Duration? = nil, variant: HLSPrefetchOptions.VariantChoice = .first) async throws -> DownloadJob {
        try await record(url, for: duration, renditions: RenditionChoice(variants: [variant]))
    }

    /// Records the live stream at `url` (see ``record(_:for:variant:)``), taking the renditions
    /// `renditions` chooses as a pin does: the variant (or DASH video representation) and the
    /// audio and subtitle languages it names (by default the default audio, no subtitles).
    /// - Throws: ``CacheError`` `.originRejected` for what is neither an HLS playlist nor a DASH
    ///   manifest; `.outOfBounds` (when the recording starts) for a language the stream lacks.
    @discardableResult
    public func record(_ url: URL, for duration: Duration? = nil, renditions: RenditionChoice) async throws -> DownloadJob {
        try reader.checkOrigin(url)
        if let existing = job(matching: url.absoluteString), existing.isRecording, existing.recording?.finished == false { return existing }
        let metadata = try await reader.contentInfo(for: url)
        guard let kind = try await reader.manifestKind(url, metadata) else {
            throw CacheError(
                .originRejected, "\(url.absoluteString.prefix(200)) is neither an HLS playlist nor a DASH manifest; a recording follows a live stream.")
        }
        let now = store.configuration.clock.now
        var job = DownloadJob(id: Self.makeID(), url: url, state: .queued, createdAt: now)
        let seconds = duration.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
        job.recording = Recording(variant: renditions.variants.first ?? .first, until: seconds.map { now.addingTimeInterval($0) })
        job.recording?.choice = renditions
        job.recording?.format = kind == .dash ? .dash : nil
        job.keys = [store.key(for: url)]
        job.resourcesTotal = 0
        // A recording runs whatever the queue's window and network rules say: what it misses is gone.
        job.rules = DownloadRules(window: .anyTime, network: .any)
        try await store.pin(job.keys)
        state.withLock { state in
            state.jobs[job.id] = job
            state.publish(.changed(job))
        }
        configuration.logger.info("Recording", metadata: ["job": "\(job.id)", "url": "\(url.absoluteString.prefix(200))"])
        try await persist(job.id)
        schedule()
        return job
    }

    /// The recording `id` as a playlist: of `track` (0 the variant's, 1, 2, … its renditions')
    /// its media playlist, URIs absolute at the origin, `EVENT` while it records and `VOD` once
    /// it stopped; with no track, that of a recording of a media playlist, or for one of a
    /// multivariant playlist the multivariant playlist, each track's URI the one `reference`
    /// gives (`master` says which). `nil` when there is no such recording or track.
    package func recordingPlaylist(_ id: String, track: Int? = nil, reference: (Int) -> String = { "\($0)" }) -> (text: String, base: URL, master: Bool)? {
        guard let job = state.withLock({ $0.jobs[id] }), let recording = job.recording, !recording.isDASH else { return nil }
        if track == nil, let renditions = recording.renditions, let variantLine = recording.variantLine {
            return (RecordedMaster.playlist(variantLine: variantLine, renditions: renditions, carried: recording.carried ?? [], reference: reference), job.url, true)
        }
        let index = track ?? 0
        let timelines = recording.playlistTimelines
        guard index >= 0, index < timelines.count else { return nil }
        let base = index == 0 ? recording.mediaPlaylist ?? job.url : recording.renditions![index - 1].url
        return (timelines[index].playlist(finished: recording.finished || job.state == .completed), base, false)
    }

    /// Runs the recording `id`: follows its media playlists (or manifest), storing each new
    /// segment, until it is due to stop.
    func runRecording(_ id: String) async throws {
        if try current(id).recording?.isDASH == true { return try await runDASHRecording(id) }
        let playlists = try await recordedPlaylists(id)
        // Segments taken but not stored when the last run was cut (a kill, a crash): fetched now.
        let timelines = state.withLock { $0.jobs[id]?.recording?.playlistTimelines ?? [] }
        for (track, timeline) in timelines.enumerated() {
            try await keep(unheld(timeline), of: id, track: track)
        }
        var failing: Date?
        while true {
            try Task.checkCancellation()
            var wait = Double.infinity
            var ended = false
            for (track, media) in playlists.enumerated() {
                guard
                    let (playlist, snapshot) = try await reloading(
                        id, media, failingSince: &failing,
                        {
                            let info = try await reader.contentInfo(for: media, maximumAge: .milliseconds(500))
                            let (body, metadata) = try await reader.playlistBody(media, planned: info)
                            let playlist = try HLSPlaylist(parsing: body)
                            return (playlist, try RecordedSegment.segments(of: playlist, base: metadata.finalURL ?? media))
                        })
                else { continue }
                let new = state.withLock { state -> [RecordedSegment] in
                    var taken: [RecordedSegment] = []
                    state.jobs[id]?.recording?.update(track) { taken = $0.merge(snapshot, endList: playlist.isFinal) }
                    return taken
                }
                // Written before the fetches: a cut run knows what it had taken, and the next one fetches it.
                if !new.isEmpty { try? await persist(id) }
                try await keep(new, of: id, track: track)
                if track == 0 { ended = playlist.isFinal }
                // Reloaded after half its target duration (RFC 8216bis 6.3.4 allows no less).
                wait = min(wait, max(0.5, Double(playlist.targetDuration ?? 2) / 2))
            }
            guard try await stillRecording(id, ended: ended, wait: wait.isFinite ? wait : 1) else { return }
        }
    }

    /// The segments of `timeline` taken but not stored.
    func unheld(_ timeline: RecordingTimeline) -> [RecordedSegment] {
        timeline.segments.filter { segment in
            !segment.gap && URL(string: segment.url).map { !reader.held.isHeld(PrefetchItem(url: $0, range: segment.range)) } == true
        }
    }

    /// How long a recording goes on while its origin fails every reload of its playlist or
    /// manifest: past that it fails, saying so.
    static let recordingPatience: TimeInterval = 120

    /// Runs `reload`, a reload of the recording `id`'s playlist or manifest at `url`. An origin
    /// failure is logged, counted and `nil`: the recording goes on (the segments it misses
    /// meanwhile are marked when it sees the window again) until the origin has failed for
    /// ``recordingPatience`` straight (`failingSince`, by the store's clock).
    func reloading<T>(_ id: String, _ url: URL, failingSince: inout Date?, _ reload: () async throws -> T) async throws -> T? {
        do {
            let value = try await reload()
            failingSince = nil
            return value
        } catch let error as CacheError
            where [.originUnavailable, .originTimedOut, .originRejected, .originAnswered, .resourceChanged].contains(error.code)
        {
            let now = store.configuration.clock.now
            let since = failingSince ?? now
            failingSince = since
            CacheMetrics.recordingReloadFailed()
            configuration.logger.warning(
                "A recording could not reload its playlist; it tries again",
                metadata: ["job": "\(id)", "url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            guard now.timeIntervalSince(since) < Self.recordingPatience else {
                throw CacheError(
                    error.code, "The origin failed every reload for \(Int(Self.recordingPatience)) s; the recording stopped (what it holds stays): \(error.message)")
            }
            return nil
        } catch let error as HLSPlaylistError {
            throw CacheError(.originRejected, "The playlist at \(url.absoluteString.prefix(200)) cannot be read: \(error.message)")
        }
    }

    /// Whether the recording `id` goes on (`ended`: the origin said the presentation ended):
    /// if not, it is marked finished; either way persisted; if so, after `wait` seconds.
    func stillRecording(_ id: String, ended: Bool, wait: Double) async throws -> Bool {
        let due = state.withLock { state in
            state.jobs[id]?.recording?.until.map { store.configuration.clock.now >= $0 } ?? false
        }
        if due || ended { state.withLock { $0.jobs[id]?.recording?.finished = true } }
        try? await persist(id)
        if due || ended { return false }
        try await Task.sleep(for: .milliseconds(Int64(wait * 1000)))
        return true
    }

    /// The media playlists the recording `id` follows: its URL, or its chosen variant's and
    /// the renditions chosen with it (the default audio), by track.
    private func recordedPlaylists(_ id: String) async throws -> [URL] {
        let job = try current(id)
        guard let recording = job.recording else { throw Self.noJob(id) }
        if let known = recording.mediaPlaylist { return [known] + (recording.renditions ?? []).map(\.url) }
        let (body, metadata) = try await reader.playlistBody(job.url)
        let playlist = try HLSPlaylist(parsing: body)
        guard playlist.isMaster else {
            state.withLock { $0.jobs[id]?.recording?.mediaPlaylist = job.url }
            return [job.url]
        }
        let master = try RecordedMaster(playlist, base: metadata.finalURL ?? job.url, choice: recording.choice)
        state.withLock { state in
            state.jobs[id]?.recording?.mediaPlaylist = master.variant
            state.jobs[id]?.recording?.renditions = master.renditions
            state.jobs[id]?.recording?.variantLine = master.variantLine
            state.jobs[id]?.recording?.carried = master.carried
        }
        return [master.variant] + master.renditions.map(\.url)
    }

    /// Pins and stores `segments` (and the init sections they name, or for a DASH `track` its
    /// `initialization`) for the recording `id`; a segment that cannot be fetched is marked a
    /// gap (logged).
    func keep(_ segments: [RecordedSegment], of id: String, track: Int? = nil, initialization: URL? = nil) async throws {
        for segment in segments {
            guard let url = URL(string: segment.url) else { continue }
            // Its init section, and its key in an encrypted store (a key never reaches the disk
            // unencrypted: in a plain store it stays in memory, and the recording plays online only).
            let key = store.isEncrypted ? segment.key.flatMap(Self.uriAttribute) : nil
            let extras = [initialization ?? segment.map.flatMap(Self.uriAttribute), key].compactMap { $0 }
            let keys = [store.key(for: url)] + extras.map(store.key(for:))
            let added = state.withLock { state -> [CacheKey] in
                let known = Set(state.jobs[id]?.keys ?? [])
                let added = keys.filter { !known.contains($0) }
                state.jobs[id]?.keys += added
                return added
            }
            if !added.isEmpty { try await store.pin(added) }
            guard !segment.gap else { continue }
            do {
                for extra in extras { _ = try await reader.prefetch(extra) }
                let done = try await reader.prefetch(url, range: segment.range)
                if !reader.held.isHeld(PrefetchItem(url: url, range: segment.range)) {
                    let quota = store.configuration.pinnedQuota
                    if store.pinnedBytes + max(done.bytesDone, 1) > quota {
                        // Full: the recording stops here, saying why (what it holds stays playable).
                        throw CacheError(
                            .capacityExceeded,
                            "The recording stopped at the pinned quota: \(ByteCountText.format(store.pinnedBytes)) of \(ByteCountText.format(quota)) are pinned. "
                                + "Unpin something or raise --max-pinned-size, and record again.")
                    }
                    throw CacheError(.ioFailure, "The segment was fetched but not stored.")
                }
                state.withLock { state in
                    guard state.jobs[id] != nil else { return }
                    state.jobs[id]!.bytesDone += done.bytesDone
                    state.jobs[id]!.resourcesDone += 1
                    state.jobs[id]!.resourcesTotal += 1
                    state.publish(.changed(state.jobs[id]!))
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as CacheError where error.code == .capacityExceeded {
                state.withLock { state in
                    state.jobs[id]?.recording?.update(track) { $0.cut(from: segment.sequence) }
                    state.jobs[id]?.recording?.finished = true
                }
                configuration.logger.warning("A recording stopped at the pinned quota", metadata: ["job": "\(id)", "reason": "\(error.message)"])
                throw error
            } catch let error as RoomWanted {
                throw error
            } catch {
                state.withLock { $0.jobs[id]?.recording?.update(track) { $0.markGap(segment.sequence) } }
                CacheMetrics.recordingGapMarked()
                configuration.logger.warning(
                    "A recording could not fetch a segment; it is marked a gap", metadata: ["job": "\(id)", "url": "\(segment.url.prefix(200))", "reason": "\(error)"])
            }
        }
    }

    /// The `URI` of an `EXT-X-MAP` or `EXT-X-KEY` line (made absolute already).
    static func uriAttribute(_ line: String) -> URL? {
        guard let value = line.split(separator: ":", maxSplits: 1).last, let attributes = try? HLSPlaylist.attributes(String(value)),
            let uri = attributes["URI"]
        else { return nil }
        return URL(string: uri)
    }
}
