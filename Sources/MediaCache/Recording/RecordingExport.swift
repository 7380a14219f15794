// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

extension DownloadQueue {
    /// Writes the recording `id` as a folder a player plays offline, with no network: its
    /// segments and init sections under local names and `index.m3u8` (a DASH recording:
    /// `index.mpd`), the recording's playlist (`VOD`, or static, once it stopped) naming them
    /// (with renditions, the multivariant playlist, and each track's as `track0.m3u8`, …).
    /// A gap's segment is not written (its `EXT-X-GAP`, or the hole in the DASH timeline, tells
    /// a player so); a key stored in the cache is written beside them.
    /// - Throws: ``CacheError`` `.notCached` when there is no such recording; `.offline` naming
    ///   what is not stored; `.ioFailure` when the destination cannot be written (an existing
    ///   file or folder is not replaced).
    package func exportRecording(_ id: String, to destination: URL) async throws -> ExportSummary {
        guard let job = state.withLock({ $0.jobs[id] }), let recording = job.recording else { throw Self.noJob(id) }
        let exporter = Exporter(reading: reader)
        var items: [(url: URL, range: ByteRange?)] = []
        // The files the index and playlists are, given the local name of each resource.
        let write: ([URL: String]) -> [(name: String, text: String)]
        var playlists: [(playlist: HLSPlaylist, base: URL)] = []
        if recording.isDASH {
            let tracks = recording.tracks ?? []
            for track in tracks {
                if let initialization = track.initialization.flatMap(URL.init(string:)) { items.append((initialization, nil)) }
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
        } else {
            // Each track's playlist; with renditions, `index.m3u8` is the multivariant playlist
            // naming them as `track0.m3u8`, ….
            for track in recording.playlistTimelines.indices {
                guard let (text, base, _) = recordingPlaylist(id, track: track) else { throw Self.noJob(id) }
                let playlist = try HLSPlaylist(parsing: Array(text.utf8))
                let gaps = Set(try RecordedSegment.segments(of: playlist, base: base).filter(\.gap).map(\.url))
                for segment in playlist.segments where !gaps.contains(segment.uri) {
                    guard let url = URL(string: segment.uri) else { continue }
                    items.append((url, segment.byteRange))
                    if let map = segment.initSection, let mapURL = URL(string: map.uri) { items.append((mapURL, map.byteRange)) }
                }
                playlists.append((playlist, base))
            }
            let master = recordingPlaylist(id, reference: { "track\($0).m3u8" })
            write = { names in
                let texts = playlists.map { playlist, base in playlist.rewritten(base: base) { url, _ in names[url] ?? url.absoluteString } }
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
                if names[url] == nil, let tag, HLSPlaylist.keyTags.contains(tag), exporter.reader.cachedContentInfo(for: url) != nil, keys[url] == nil {
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
