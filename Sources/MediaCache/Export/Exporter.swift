// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What an export wrote.
public struct ExportSummary: Sendable, Codable, Equatable {
    /// The file written, or for an HLS asset the folder's `index.m3u8`, for a DASH one its `index.mpd`.
    public var path: String
    /// Files written (1 for a file; a one-file export counts its subtitle files beside it too).
    public var files: Int
    public var bytes: Int64

    package init(path: String, files: Int, bytes: Int64) {
        (self.path, self.files, self.bytes) = (path, files, bytes)
    }
}

/// Writes what the cache holds outside it, without contacting the origin (`mediacache
/// export`): a file, an HLS asset or a DASH presentation as a folder a player plays with no
/// network. It reads through an offline read path (the store alone, every entry current).
struct Exporter: Sendable {
    /// The read path, offline.
    let reader: CachingReader

    init(reading reader: CachingReader) {
        self.reader = reader.offlineTwin
    }

    /// Writes what the cache holds of `url` outside it, without contacting the origin: a
    /// file as a normal file at `destination` (every byte must be cached); an HLS asset as
    /// a folder at `destination` holding `index.m3u8`, the media playlists and their segments,
    /// init sections and cached keys, under local names, so a player plays it with no network.
    /// Which renditions: those `renditions` and `seconds` choose (as a pin chooses them; a
    /// segment outside the chosen seconds keeps its origin URL), or, when both are left out,
    /// every rendition wholly held. A master playlist is written as the origin's, with only the
    /// renditions written (``HLSPlaylist/filteredMaster(base:isHeld:)``). A DASH presentation is
    /// written as a folder holding `index.mpd`, the manifest with only the chosen (or held)
    /// representations and the adaptation sets that keep one, and their resources at their
    /// origin paths under a folder per origin (`o0`, …); a resource URL with a query cannot be
    /// written so, and `seconds` is refused.
    /// - Throws: ``CacheError`` `.offline` naming what is not cached; `.notCached` when nothing
    ///   is wholly held; `.ioFailure` when the destination cannot be written (an existing file
    ///   or folder is not replaced).
    func export(_ url: URL, to destination: URL, renditions: RenditionChoice, seconds: Double?) async throws
        -> ExportSummary
    {
        let offline = reader
        guard !FileManager.default.fileExists(atPath: destination.path) else {
            throw CacheError(.ioFailure, "\(destination.path) exists already; choose a new path.")
        }
        let metadata = try await offline.contentInfo(for: url, as: .own(.export))
        let kind = try await offline.manifestKind(url, metadata, as: .own(.export))
        // Side-loaded subtitles are written as their own playlists (below), not as files.
        var renditions = renditions
        let sideLoaded = renditions.sideLoaded
        renditions.sideLoaded = []
        let chosen =
            renditions.isEmpty && seconds == nil ? nil : HLSPrefetchOptions(renditions: renditions, seconds: seconds)
        if kind == .dash {
            return try await exportDASH(url, to: destination, options: chosen)
        }
        guard kind == .hls else {
            let bytes = try await write(url, range: nil, to: destination.path, exclusive: true)
            return ExportSummary(path: destination.path, files: 1, bytes: bytes)
        }
        let (body, masterMetadata) = try await offline.bodies.playlistBody(url, as: .own(.export))
        let master = (try? HLSPlaylist(parsing: body, url: url)).flatMap { $0.isMaster ? $0 : nil }
        let masterBase = masterMetadata.finalURL ?? url
        let plan = try await exportPlan(url, master: master, base: masterBase, options: chosen)
        try await Self.makeFolder(destination)
        // Local names: each resource URL once, its ranges written at their offsets.
        var names: [URL: String] = [:]
        var ranges: [URL: [ByteRange]] = [:]
        for item in plan.items {
            if names[item.url] == nil { names[item.url] = Self.localName(for: item.url, index: names.count) }
            if let range = item.range { ranges[item.url, default: []].append(range) } else { ranges[item.url] = nil }
        }
        var files = 0
        var bytes: Int64 = 0
        for (resource, name) in names.sorted(by: { $0.value < $1.value }) {
            let path = destination.appendingPathComponent(name).path
            if let parts = ranges[resource] {
                for part in parts { bytes += try await write(resource, range: part, to: path) }
            } else {
                bytes += try await write(resource, range: nil, to: path)
            }
            files += 1
        }
        // The media playlists, their URIs mapped to the local names (keys when cached).
        var playlistNames: [URL: String] = [:]
        for (index, playlistURL) in plan.playlists.enumerated() {
            let (body, playlistMetadata) = try await offline.bodies.playlistBody(playlistURL, as: .own(.export))
            let playlist: HLSPlaylist
            do {
                playlist = try HLSPlaylist(parsing: body, url: playlistURL, imports: master?.definitions ?? [:])
            } catch let error as HLSPlaylistError {
                throw CacheError(
                    .originRejected,
                    "The cached playlist \(playlistURL.absoluteString.prefix(200)) cannot be read: \(error.message)")
            }
            var keys: [URL] = []
            let text = playlist.rewritten(base: playlistMetadata.finalURL ?? playlistURL) { uri, tag in
                if let name = names[uri] { return name }
                if let tag, HLSPlaylist.keyTags.contains(tag), offline.cachedContentInfo(for: uri) != nil {
                    keys.append(uri)
                    return Self.localName(for: uri, index: 10_000 + keys.count)
                }
                return uri.absoluteString
            }
            for (offset, key) in keys.enumerated() {
                let name = Self.localName(for: key, index: 10_001 + offset)
                bytes += try await write(key, range: nil, to: destination.appendingPathComponent(name).path)
                files += 1
            }
            let name = master == nil ? "index.m3u8" : "media\(index).m3u8"
            try await Self.writeFile(Array(text.utf8), to: destination.appendingPathComponent(name).path)
            playlistNames[playlistURL] = name
            files += 1
        }
        if let master {
            // The origin's master, with only what was written, naming it locally.
            guard let filtered = master.filteredMaster(base: masterBase, isHeld: { playlistNames[$0] != nil }),
                var parsed = try? HLSPlaylist(parsing: Array(filtered.utf8))
            else {
                throw CacheError(.notCached, "No variant of \(url.absoluteString.prefix(200)) was written.")
            }
            if !sideLoaded.isEmpty,
                let first = parsed.variants.first.flatMap({ HLSPlaylist.resolve($0.uri, base: masterBase) })
            {
                let written = try await writeSideLoaded(sideLoaded, timeline: first, to: destination)
                (files, bytes) = (files + written.files, bytes + written.bytes)
                playlistNames.merge(written.names) { old, _ in old }
                if let text = SideLoadedSubtitles.master(parsed, adding: sideLoaded),
                    let augmented = try? HLSPlaylist(parsing: Array(text.utf8))
                {
                    parsed = augmented
                }
            }
            let text = parsed.rewritten(base: masterBase) { uri, _ in playlistNames[uri] ?? uri.absoluteString }
            try await Self.writeFile(Array(text.utf8), to: destination.appendingPathComponent("index.m3u8").path)
            files += 1
        }
        return ExportSummary(path: destination.appendingPathComponent("index.m3u8").path, files: files, bytes: bytes)
    }

    /// Side-loaded subtitle tracks as `subtitlesN.m3u8` and `subtitlesN.vtt` in `destination`,
    /// timed as the proxy times them (the media playlist at `timeline`); returns the playlists'
    /// local names by track URL.
    private func writeSideLoaded(_ tracks: [SideLoadedSubtitle], timeline: URL, to destination: URL) async throws
        -> (names: [URL: String], files: Int, bytes: Int64)
    {
        let (duration, mpegts) = try await reader.bodies.subtitleTimeline(of: timeline, as: .own(.export))
        var names: [URL: String] = [:]
        var bytes: Int64 = 0
        for (index, track) in tracks.enumerated() where names[track.url] == nil {
            let vtt: String
            do {
                vtt = try await reader.bodies.sideLoadedWebVTT(track.url, mpegts: mpegts)
            } catch let error as SubtitleText.Failure {
                throw CacheError(.originRejected, "\(track.url.absoluteString.prefix(200)): \(error.description)")
            }
            let playlist = SideLoadedSubtitles.mediaPlaylist(duration: duration, uri: "subtitles\(index).vtt")
            try await Self.writeFile(
                Array(vtt.utf8), to: destination.appendingPathComponent("subtitles\(index).vtt").path)
            try await Self.writeFile(
                Array(playlist.utf8), to: destination.appendingPathComponent("subtitles\(index).m3u8").path)
            names[track.url] = "subtitles\(index).m3u8"
            bytes += Int64(vtt.utf8.count + playlist.utf8.count)
        }
        return (names, names.count * 2, bytes)
    }

    /// What an export of the HLS asset at `url` writes: what `options` choose, or, when `nil`,
    /// every media playlist of `master` wholly held (or `url` itself, a media playlist).
    private func exportPlan(_ url: URL, master: HLSPlaylist?, base: URL, options: HLSPrefetchOptions?) async throws
        -> PrefetchPlan
    {
        if let options { return try await reader.planner(for: .own(.export)).hlsPlan(url, options: options) }
        let imports = master?.definitions ?? [:]
        guard let master else {
            return try await reader.planner(for: .own(.export)).hlsPlan(url, options: HLSPrefetchOptions())
        }
        var playlists: [URL] = []
        var items: [PrefetchItem] = []
        var seen: Set<PrefetchItem> = []
        for uri in master.variants.map(\.uri) + master.renditions.map(\.uri) + master.trickPlayPlaylists.map(\.uri) {
            guard let playlist = HLSPlaylist.resolve(uri, base: base), !playlists.contains(playlist),
                let plan = try? await reader.planner(for: .own(.export)).hlsPlan(
                    playlist, options: HLSPrefetchOptions(), imports: imports),
                plan.items.allSatisfy(reader.held.isHeld)
            else { continue }
            playlists.append(playlist)
            for item in plan.items where seen.insert(item).inserted { items.append(item) }
        }
        guard !playlists.isEmpty else {
            throw CacheError(
                .notCached, "No rendition of \(url.absoluteString.prefix(200)) is wholly cached.",
                remedy: CacheError.Remedy(.pinFirst))
        }
        return PrefetchPlan(playlists: playlists, items: items, estimatedBytes: nil)
    }

    /// A DASH presentation as a folder at `destination`: `index.mpd`, the manifest with the
    /// representations `options` choose (or, when `nil`, those wholly held) and the others left out, and
    /// under a folder per origin (`o0`, …) each resource of those at its origin path, which the
    /// manifest's bases, written relative, name.
    private func exportDASH(_ url: URL, to destination: URL, options: HLSPrefetchOptions?) async throws -> ExportSummary
    {
        guard options?.seconds == nil else {
            throw CacheError(
                .outOfBounds,
                "A DASH presentation is exported whole (its templates name every segment): leave out the seconds.")
        }
        let (manifest, base) = try await reader.planner(for: .own(.export)).dashManifest(url)
        let presentation = manifest.presentation(base: base)
        let chosen: [DASHPresentation.Representation]
        if let options {
            do {
                chosen = try options.renditions.representations(of: presentation, url: url).map(\.1)
            } catch {
                throw CacheError(.outOfBounds, error.message)
            }
        } else {
            chosen = presentation.periods.flatMap(\.adaptationSets).flatMap(\.representations).filter {
                $0.resources.map { PrefetchItem(url: $0.url, range: $0.range) }.allSatisfy(reader.held.isHeld)
            }
        }
        guard options != nil || !chosen.isEmpty else {
            throw CacheError(
                .notCached, "No representation of \(url.absoluteString.prefix(200)) is wholly cached.",
                remedy: CacheError.Remedy(.pinFirst))
        }
        let kept = Set(chosen.map(\.element))
        var others: Set<Int> = []
        for set in presentation.periods.flatMap(\.adaptationSets) {
            let gone = set.representations.map(\.element).filter { !kept.contains($0) }
            others.formUnion(gone)
            if gone.count == set.representations.count { others.insert(set.element) }
        }
        var origins: [String: String] = [:]
        func localPath(_ resource: URL) -> String? {
            // A folder's query is inherited by nothing under it; a file's would be lost.
            guard let components = URLComponents(url: resource, resolvingAgainstBaseURL: false),
                components.query == nil || components.path.hasSuffix("/")
            else {
                return nil
            }
            let parts = components.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            // A folder (`…/`) keeps its trailing slash; no part may climb or hide.
            guard parts.dropLast().allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." && !$0.hasPrefix(".") }),
                parts.last.map({ $0 != "." && $0 != ".." && !$0.hasPrefix(".") }) ?? false
            else { return nil }
            let authority = "\(components.scheme ?? "")://\(components.host ?? ""):\(components.port ?? 0)"
            if origins[authority] == nil { origins[authority] = "o\(origins.count)" }
            return origins[authority]! + "/" + parts.joined(separator: "/")
        }
        var ranges: [String: (url: URL, parts: [ByteRange]?)] = [:]
        for resource in chosen.flatMap(\.resources) {
            guard let path = localPath(resource.url), !path.hasSuffix("/") else {
                throw CacheError(
                    .outOfBounds,
                    "\(resource.url.absoluteString.prefix(200)) cannot be written as a file (a query, or a path that is not a file's)."
                )
            }
            if let range = resource.range, ranges[path]?.parts != nil || ranges[path] == nil {
                ranges[path, default: (resource.url, [])].parts?.append(range)
            } else {
                ranges[path] = (resource.url, nil)
            }
        }
        guard !ranges.isEmpty else {
            throw CacheError(
                .originRejected, "The manifest at \(url.absoluteString.prefix(200)) lists no segments to export.")
        }
        let text = manifest.rewritten(base: base, removing: others, relative: true) {
            localPath($0) ?? $0.absoluteString
        }
        try await Self.makeFolder(destination)
        var bytes: Int64 = 0
        for (path, resource) in ranges.sorted(by: { $0.key < $1.key }) {
            let file = destination.appendingPathComponent(path)
            do {
                try await BlockingIO.runToCompletion {
                    try FileManager.default.createDirectory(
                        at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                }
            } catch {
                throw CacheError(
                    .ioFailure, "Cannot create the folder \(file.deletingLastPathComponent().path).",
                    underlyingError: error)
            }
            for part in resource.parts?.map(Optional.some) ?? [nil] {
                bytes += try await write(resource.url, range: part, to: file.path)
            }
        }
        try await Self.writeFile(Array(text.utf8), to: destination.appendingPathComponent("index.mpd").path)
        return ExportSummary(
            path: destination.appendingPathComponent("index.mpd").path, files: ranges.count + 1, bytes: bytes)
    }

    /// Makes the export folder `destination` (it must not exist), off the cooperative pool.
    /// - Throws: ``CacheError`` `.ioFailure` saying it cannot.
    static func makeFolder(_ destination: URL) async throws {
        do {
            try await BlockingIO.runToCompletion {
                try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: false)
            }
        } catch {
            throw CacheError(.ioFailure, "Cannot create the folder \(destination.path).", underlyingError: error)
        }
    }

    /// `index` and the URL's extension (letters and digits, at most 5), e.g. `r0003.m4s`.
    static func localName(for url: URL, index: Int) -> String {
        let ext = url.pathExtension.filter { $0.isASCII && ($0.isLetter || $0.isNumber) }.prefix(5)
        return String(format: "r%04d", index) + (ext.isEmpty ? "" : "." + ext)
    }

    /// Writes `range` of `url` (all of it when `nil`), read from the store alone, at its own
    /// offset in the file at `path` (created when missing; when `exclusive`, it must not exist);
    /// returns the bytes written. A link at `path` is never followed.
    func write(_ url: URL, range: ByteRange?, to path: String, exclusive: Bool = false) async throws -> Int64 {
        let stream = try await reader.read(
            url, offset: range?.lowerBound ?? 0, length: range?.length, as: .own(.export))
        defer { stream.cancel() }
        // File work on a thread made for blocking, never on the cooperative pool's.
        let descriptor = try await BlockingIO.runToCompletion {
            let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (exclusive ? O_EXCL : 0), 0o644)
            guard descriptor >= 0 else {
                throw CacheError(.ioFailure, "Cannot write \(path): \(String(cString: strerror(errno))).")
            }
            return descriptor
        }
        defer { close(descriptor) }
        var offset = stream.range.lowerBound
        for try await chunk in stream {
            try await BlockingIO.runToCompletion { [offset] in
                try chunk.withUnsafeReadableBytes {
                    try ExportOutput.writeAll($0, at: offset, descriptor: descriptor, path: path)
                }
            }
            offset += Int64(chunk.readableBytes)
        }
        return offset - stream.range.lowerBound
    }

    static func writeFile(_ bytes: [UInt8], to path: String) async throws {
        do {
            try await BlockingIO.runToCompletion {
                try Data(bytes).write(to: URL(fileURLWithPath: path), options: .withoutOverwriting)
            }
        } catch {
            throw CacheError(.ioFailure, "Cannot write \(path).", underlyingError: error)
        }
    }
}
