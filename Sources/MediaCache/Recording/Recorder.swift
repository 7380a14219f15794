// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import Logging

/// What a recording asks of the queue that runs it: its job's record, read and changed under
/// the queue's lock, and written to disk.
protocol RecordingJobs: Sendable {
    /// The job `id` as it is now.
    func job(_ id: String) -> DownloadJob?
    /// Applies `change` to the recording of the job `id` under the queue's lock; `nil` when
    /// there is no such job or it records nothing.
    @discardableResult
    func updateRecording<T>(of id: String, _ change: (inout Recording) -> T) -> T?
    /// Adds `keys` to the job `id`'s (each once); returns those it did not have, to pin.
    func addKeys(_ keys: [CacheKey], to id: String) -> [CacheKey]
    /// Counts one more resource of `bytes` stored for the job `id`, and says so to watchers.
    func stored(_ bytes: Int64, for id: String)
    /// Writes the job `id` as it is.
    func persist(_ id: String) async throws
}

extension RecordingJobs {
    /// Applies `change` to the job `id`'s recording if it is an HLS one (see `updateRecording`).
    @discardableResult
    func updateHLS<T>(of id: String, _ change: (inout HLSRecording) -> T) -> T? {
        update(id, read: \.hls, write: Recording.hls, change)
    }

    /// Applies `change` to the job `id`'s recording if it is a DASH one (see `updateRecording`).
    @discardableResult
    func updateDASH<T>(of id: String, _ change: (inout DASHRecording) -> T) -> T? {
        update(id, read: \.dash, write: Recording.dash, change)
    }

    /// Applies `change` to the recording of kind `Kind` (`read` takes it out, `write` puts it back).
    private func update<Kind, T>(
        _ id: String, read: (Recording) -> Kind?, write: (Kind) -> Recording, _ change: (inout Kind) -> T
    ) -> T? {
        updateRecording(of: id) { recording -> T? in
            guard var kind = read(recording) else { return nil }
            defer { recording = write(kind) }
            return change(&kind)
        } ?? nil
    }
}

/// Records live HLS and DASH streams: follows a recording job's playlists or manifest, stores
/// and pins each new segment, marks gaps, and stops at its end, its duration or the pinned
/// quota; writes what it holds as a playlist, a manifest or a folder. The queue
/// (``DownloadQueue``) starts and stops it as any job; it sees the queue only through
/// ``RecordingJobs``.
package struct Recorder: Sendable {
    let jobs: any RecordingJobs
    let reader: CachingReader
    let logger: Logger
    /// Whose work its reads are: a recording's (a running job's, with the job's pacer).
    let requester: Requester

    var store: CacheStore { reader.store }

    func current(_ id: String) throws -> DownloadJob {
        guard let job = jobs.job(id) else { throw DownloadJob.missing(id) }
        return job
    }

    /// The recording `id` as a playlist: of `track` (0 the variant's, 1, 2, … its renditions')
    /// its media playlist, URIs absolute at the origin, `EVENT` while it records and `VOD` once
    /// it stopped; with no track, that of a recording of a media playlist, or for one of a
    /// multivariant playlist the multivariant playlist, each track's URI the one `reference`
    /// gives (`master` says which). `nil` when there is no such recording or track.
    package func playlist(_ id: String, track: Int? = nil, reference: (Int) -> String = { "\($0)" }) -> (
        text: String, base: URL, master: Bool
    )? {
        guard let job = jobs.job(id), let recording = job.recording?.hls else { return nil }
        if track == nil, let master = recording.master {
            return (
                RecordedMaster.playlist(
                    variantLine: master.variantLine, renditions: master.renditions, carried: master.carried,
                    reference: reference), job.url, true
            )
        }
        let index = track ?? 0
        let timelines = recording.timelines
        guard index >= 0, index < timelines.count else { return nil }
        let base = index == 0 ? recording.mediaPlaylist ?? job.url : recording.renditions[index - 1].url
        return (timelines[index].playlist(finished: recording.finished || job.state == .completed), base, false)
    }

    /// Runs the recording `id`: follows its media playlists (or manifest), storing each new
    /// segment, until it is due to stop.
    func run(_ id: String) async throws {
        if try current(id).recording?.isDASH == true { return try await runDASH(id) }
        let playlists = try await recordedPlaylists(id)
        // Segments taken but not stored when the last run was cut (a kill, a crash): fetched now.
        let timelines = jobs.job(id)?.recording?.hls?.timelines ?? []
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
                            let info = try await reader.contentInfo(
                                for: media, maximumAge: .milliseconds(500), as: requester)
                            let (body, metadata) = try await reader.bodies.playlistBody(
                                media, planned: info, as: requester)
                            let playlist = try HLSPlaylist(parsing: body)
                            return (
                                playlist, try RecordedSegment.segments(of: playlist, base: metadata.finalURL ?? media)
                            )
                        })
                else { continue }
                let new =
                    jobs.updateHLS(of: id) { recording -> [RecordedSegment] in
                        var taken: [RecordedSegment] = []
                        recording.update(track) { taken = $0.merge(snapshot, endList: playlist.isFinal) }
                        return taken
                    } ?? []
                // Written before the fetches: a cut run knows what it had taken, and the next one fetches it.
                if !new.isEmpty { try? await jobs.persist(id) }
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
            !segment.gap
                && URL(string: segment.url).map { !reader.held.isHeld(PrefetchItem(url: $0, range: segment.range)) }
                    == true
        }
    }

    /// How long a recording goes on while its origin fails every reload of its playlist or
    /// manifest: past that it fails, saying so.
    static let recordingPatience: TimeInterval = 120

    /// Runs `reload`, a reload of the recording `id`'s playlist or manifest at `url`. An origin
    /// failure is logged, counted and `nil`: the recording goes on (the segments it misses
    /// meanwhile are marked when it sees the window again) until the origin has failed for
    /// ``recordingPatience`` straight (`failingSince`, by the store's clock).
    func reloading<T>(_ id: String, _ url: URL, failingSince: inout Date?, _ reload: () async throws -> T) async throws
        -> T?
    {
        do {
            let value = try await reload()
            failingSince = nil
            return value
        } catch let error as CacheError
            where [.originUnavailable, .originTimedOut, .originRejected, .originAnswered, .resourceChanged].contains(
                error.code)
        {
            let now = store.configuration.clock.now
            let since = failingSince ?? now
            failingSince = since
            CacheMetrics.recordingReloadFailed()
            logger.warning(
                "A recording could not reload its playlist; it tries again",
                metadata: ["job": "\(id)", "url": "\(url.absoluteString.prefix(200))", "reason": "\(error.message)"])
            guard now.timeIntervalSince(since) < Self.recordingPatience else {
                throw CacheError(
                    error.code,
                    "The origin failed every reload for \(Int(Self.recordingPatience)) s; the recording stopped (what it holds stays): \(error.message)"
                )
            }
            return nil
        } catch let error as HLSPlaylistError {
            throw CacheError(
                .originRejected, "The playlist at \(url.absoluteString.prefix(200)) cannot be read: \(error.message)")
        }
    }

    /// Whether the recording `id` goes on (`ended`: the origin said the presentation ended):
    /// if not, it is marked finished; either way persisted; if so, after `wait` seconds.
    func stillRecording(_ id: String, ended: Bool, wait: Double) async throws -> Bool {
        let due = jobs.job(id)?.recording?.until.map { store.configuration.clock.now >= $0 } ?? false
        if due || ended { jobs.updateRecording(of: id) { $0.finished = true } }
        try? await jobs.persist(id)
        if due || ended { return false }
        try await Task.sleep(for: .milliseconds(Int64(wait * 1000)))
        return true
    }

    /// The media playlists the recording `id` follows: its URL, or its chosen variant's and
    /// the renditions chosen with it (the default audio), by track.
    private func recordedPlaylists(_ id: String) async throws -> [URL] {
        let job = try current(id)
        guard let recording = job.recording?.hls else { throw DownloadJob.missing(id) }
        if let known = recording.mediaPlaylist { return [known] + recording.renditions.map(\.url) }
        let (body, metadata) = try await reader.bodies.playlistBody(job.url, as: requester)
        let playlist = try HLSPlaylist(parsing: body)
        guard playlist.isMaster else {
            jobs.updateHLS(of: id) { $0.mediaPlaylist = job.url }
            return [job.url]
        }
        let master = try RecordedMaster(playlist, base: metadata.finalURL ?? job.url, choice: recording.choice)
        jobs.updateHLS(of: id) { recording in
            recording.mediaPlaylist = master.variant
            recording.master = HLSRecording.Master(
                variantLine: master.variantLine, renditions: master.renditions, carried: master.carried)
        }
        return [master.variant] + master.renditions.map(\.url)
    }

    /// Pins and stores `segments` (and the init sections they name, or for a DASH `track` its
    /// `initialization`) for the recording `id`; a segment that cannot be fetched is marked a
    /// gap (logged).
    func keep(_ segments: [RecordedSegment], of id: String, track: Int? = nil, initialization: URL? = nil) async throws
    {
        for segment in segments {
            guard let url = URL(string: segment.url) else { continue }
            // Its init section, and its key in an encrypted store (a key never reaches the disk
            // unencrypted: in a plain store it stays in memory, and the recording plays online only).
            let key = store.isEncrypted ? segment.key.flatMap(Self.uriAttribute) : nil
            let extras = [initialization ?? segment.map.flatMap(Self.uriAttribute), key].compactMap { $0 }
            let keys = [store.key(for: url)] + extras.map(store.key(for:))
            let added = jobs.addKeys(keys, to: id)
            if !added.isEmpty { try await store.pin(added) }
            guard !segment.gap else { continue }
            do {
                for extra in extras { _ = try await reader.prefetch(extra, as: requester) }
                let done = try await reader.prefetch(url, range: segment.range, as: requester)
                if !reader.held.isHeld(PrefetchItem(url: url, range: segment.range)) {
                    let quota = store.configuration.pinnedQuota
                    if store.pinnedBytes + max(done.bytesDone, 1) > quota {
                        // Full: the recording stops here, saying why (what it holds stays playable).
                        throw CacheError(
                            .capacityExceeded,
                            "The recording stopped at the pinned quota: \(ByteCountText.format(store.pinnedBytes)) of \(ByteCountText.format(quota)) are pinned.",
                            remedy: CacheError.Remedy(.raisePinnedQuota))
                    }
                    throw CacheError(.ioFailure, "The segment was fetched but not stored.")
                }
                jobs.stored(done.bytesDone, for: id)
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as CacheError where error.code == .capacityExceeded {
                jobs.updateRecording(of: id) { recording in
                    recording.update(track) { $0.cut(from: segment.sequence) }
                    recording.finished = true
                }
                logger.warning(
                    "A recording stopped at the pinned quota", metadata: ["job": "\(id)", "reason": "\(error.message)"])
                throw error
            } catch let error as RoomWanted {
                throw error
            } catch {
                jobs.updateRecording(of: id) { $0.update(track) { $0.markGap(segment.sequence) } }
                CacheMetrics.recordingGapMarked()
                logger.warning(
                    "A recording could not fetch a segment; it is marked a gap",
                    metadata: ["job": "\(id)", "url": "\(segment.url.prefix(200))", "reason": "\(error)"])
            }
        }
    }

    /// The `URI` of an `EXT-X-MAP` or `EXT-X-KEY` line (made absolute already).
    static func uriAttribute(_ line: String) -> URL? {
        guard let value = line.split(separator: ":", maxSplits: 1).last,
            let attributes = try? HLSPlaylist.attributes(String(value)),
            let uri = attributes["URI"]
        else { return nil }
        return URL(string: uri)
    }

    /// Writes the recording `id` as a folder a player plays offline, with no network: its
    /// segments and init sections under local names and `index.m3u8` (a DASH recording:
    /// `index.mpd`), the recording's playlist (`VOD`, or static, once it stopped) naming them
    /// (with renditions, the multivariant playlist, and each track's as `track0.m3u8`, …).
    /// A gap's segment is not written (its `EXT-X-GAP`, or the hole in the DASH timeline, tells
    /// a player so); a key stored in the cache is written beside them.
    /// - Throws: ``CacheError`` `.notCached` when there is no such recording; `.offline` naming
    ///   what is not stored; `.ioFailure` when the destination cannot be written (an existing
    ///   file or folder is not replaced).
    package func export(_ id: String, to destination: URL) async throws -> ExportSummary {
        guard let job = jobs.job(id), let recording = job.recording else { throw DownloadJob.missing(id) }
        let exporter = Exporter(reading: reader)
        var items: [(url: URL, range: ByteRange?)] = []
        // The files the index and playlists are, given the local name of each resource.
        let write: ([URL: String]) -> [(name: String, text: String)]
        var playlists: [(playlist: HLSPlaylist, base: URL)] = []
        switch recording {
        case .dash(let recording):
            let tracks = recording.tracks
            for track in tracks {
                if let initialization = track.initialization.flatMap(URL.init(string:)) {
                    items.append((initialization, nil))
                }
                for segment in track.timeline.segments where !segment.gap {
                    if let url = URL(string: segment.url) { items.append((url, segment.range)) }
                }
            }
            let now = store.configuration.clock.now
            write = { names in
                let text = DASHRecordingWriter.manifest(
                    tracks, namespaces: recording.namespaces ?? "", finished: true, anchor: now, now: now,
                    name: { URL(string: $0).flatMap { names[$0] } ?? $0 })
                return [("index.mpd", text)]
            }
        case .hls(let recording):
            // Each track's playlist; with renditions, `index.m3u8` is the multivariant playlist
            // naming them as `track0.m3u8`, ….
            for track in recording.timelines.indices {
                guard let (text, base, _) = playlist(id, track: track) else { throw DownloadJob.missing(id) }
                let playlist = try HLSPlaylist(parsing: Array(text.utf8))
                let gaps = Set(try RecordedSegment.segments(of: playlist, base: base).filter(\.gap).map(\.url))
                for segment in playlist.segments where !gaps.contains(segment.uri) {
                    guard let url = URL(string: segment.uri) else { continue }
                    items.append((url, segment.byteRange))
                    if let map = segment.initSection, let mapURL = URL(string: map.uri) {
                        items.append((mapURL, map.byteRange))
                    }
                }
                playlists.append((playlist, base))
            }
            let master = playlist(id, reference: { "track\($0).m3u8" })
            write = { names in
                let texts = playlists.map { playlist, base in
                    playlist.rewritten(base: base) { url, _ in names[url] ?? url.absoluteString }
                }
                guard let master, master.master else { return [("index.m3u8", texts[0])] }
                return [("index.m3u8", master.text)] + texts.enumerated().map { ("track\($0.offset).m3u8", $0.element) }
            }
        }
        guard !FileManager.default.fileExists(atPath: destination.path) else {
            throw CacheError(.ioFailure, "\(destination.path) exists already; choose a new path.")
        }
        try await Exporter.makeFolder(destination)
        // Each resource once, under a local name: whole, or its ranges at their offsets.
        var names: [URL: String] = [:]
        var ranges: [URL: [ByteRange]] = [:]
        var whole: Set<URL> = []
        for (url, range) in items {
            if names[url] == nil { names[url] = Exporter.localName(for: url, index: names.count) }
            if let range { ranges[url, default: []].append(range) } else { whole.insert(url) }
        }
        var bytes: Int64 = 0
        for (url, name) in names.sorted(by: { $0.value < $1.value }) {
            let path = destination.appendingPathComponent(name).path
            if whole.contains(url) {
                bytes += try await exporter.write(url, range: nil, to: path)
            } else {
                for range in Set(ranges[url] ?? []).sorted(by: { $0.lowerBound < $1.lowerBound }) {
                    bytes += try await exporter.write(url, range: range, to: path)
                }
            }
        }
        // An HLS recording's keys stored in the cache (an encrypted store's) are written beside.
        var keys: [URL: String] = [:]
        for (playlist, base) in playlists {
            _ = playlist.rewritten(base: base) { url, tag in
                if names[url] == nil, let tag, HLSPlaylist.keyTags.contains(tag),
                    exporter.reader.cachedContentInfo(for: url) != nil, keys[url] == nil
                {
                    keys[url] = Exporter.localName(for: url, index: 10_000 + keys.count)
                }
                return url.absoluteString
            }
        }
        for (url, name) in keys {
            bytes += try await exporter.write(url, range: nil, to: destination.appendingPathComponent(name).path)
        }
        let files = write(names.merging(keys) { first, _ in first })
        for (name, text) in files {
            try await Exporter.writeFile(Array(text.utf8), to: destination.appendingPathComponent(name).path)
        }
        let index = destination.appendingPathComponent(files[0].name).path
        return ExportSummary(path: index, files: names.count + keys.count + files.count, bytes: bytes)
    }
}
