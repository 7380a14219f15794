// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

extension DownloadQueue {
    /// Writes the recording `id` as a folder a player plays offline, with no network: its
    /// segments and init sections under local names and `index.m3u8`, the recording's
    /// playlist (`VOD` once it stopped) naming them. A gap's segment is not written (its
    /// `EXT-X-GAP` tells a player so); a key stored in the cache is written beside them.
    /// - Throws: ``CacheError`` `.notCached` when there is no such recording; `.offline` naming
    ///   what is not stored; `.ioFailure` when the destination cannot be written (an existing
    ///   file or folder is not replaced).
    package func exportRecording(_ id: String, to destination: URL) async throws -> ExportSummary {
        guard let (text, base) = recordingPlaylist(id) else { throw Self.noJob(id) }
        let offline = reader.offlineTwin
        let playlist = try HLSPlaylist(parsing: Array(text.utf8))
        guard !FileManager.default.fileExists(atPath: destination.path) else {
            throw CacheError(.ioFailure, "\(destination.path) exists already; choose a new path.")
        }
        do {
            try await BlockingIO.runToCompletion { try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: false) }
        } catch {
            throw CacheError(.ioFailure, "Cannot create the folder \(destination.path).", underlyingError: error)
        }
        // Each resource once: the segments held (their ranges at their offsets), init sections, keys.
        let gaps = Set(try RecordedSegment.segments(of: playlist, base: base).filter(\.gap).map(\.url))
        var names: [URL: String] = [:]
        var ranges: [URL: [ByteRange]] = [:]
        var whole: Set<URL> = []
        for segment in playlist.segments where !gaps.contains(segment.uri) {
            guard let url = URL(string: segment.uri) else { continue }
            if names[url] == nil { names[url] = CachingReader.localName(for: url, index: names.count) }
            if let range = segment.byteRange { ranges[url, default: []].append(range) } else { whole.insert(url) }
            if let map = segment.initSection, let mapURL = URL(string: map.uri), names[mapURL] == nil {
                names[mapURL] = CachingReader.localName(for: mapURL, index: names.count)
                if let range = map.byteRange { ranges[mapURL, default: []].append(range) } else { whole.insert(mapURL) }
            }
        }
        var bytes: Int64 = 0
        for (url, name) in names.sorted(by: { $0.value < $1.value }) {
            let path = destination.appendingPathComponent(name).path
            if whole.contains(url) {
                bytes += try await offline.write(url, range: nil, to: path)
            } else {
                for range in ranges[url] ?? [] { bytes += try await offline.write(url, range: range, to: path) }
            }
        }
        var keys: [URL: String] = [:]
        let local = playlist.rewritten(base: base) { url, tag in
            if let name = names[url] ?? keys[url] { return name }
            if let tag, HLSPlaylist.keyTags.contains(tag), offline.cachedContentInfo(for: url) != nil {
                keys[url] = CachingReader.localName(for: url, index: 10_000 + keys.count)
                return keys[url]!
            }
            return url.absoluteString
        }
        for (url, name) in keys {
            bytes += try await offline.write(url, range: nil, to: destination.appendingPathComponent(name).path)
        }
        let files = names.count + keys.count
        try await CachingReader.writeFile(Array(local.utf8), to: destination.appendingPathComponent("index.m3u8").path)
        return ExportSummary(path: destination.appendingPathComponent("index.m3u8").path, files: files + 1, bytes: bytes)
    }
}
