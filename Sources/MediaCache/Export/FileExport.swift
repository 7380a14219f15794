// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// Writes the held rendition of an HLS asset or a DASH presentation as one playable file, with
/// no network (`mediacache export --file`): fragmented MP4 (CMAF) segments as one MP4 with every
/// chosen track (``MovieWriter``), MPEG-TS segments as one `.ts` (``TransportStreamWriter``),
/// AES-128 segments deciphered with their held keys, and chosen WebVTT subtitles beside it.
/// Refuses, naming what is missing, what cannot be one file: a rendition not wholly held, a key
/// not held, `SAMPLE-AES` or a DRM system's keys, packed audio.
struct FileExport: Sendable {
    /// The read path, offline.
    let reader: CachingReader

    init(reading reader: CachingReader) {
        self.reader = reader.offlineTwin
    }

    /// What the segments are.
    enum Container: Equatable {
        case movie, transportStream
        /// Packed audio of this kind (`aac`, `mp3`), also the file's extension.
        case packedAudio(String)
    }

    /// A rendition to write: who it is and its resources in order.
    typealias Rendition = (rendition: ChosenRendition, resources: [ExportResource])

    /// Writes `url`'s held renditions that `choice` names (when it names no variant: the best
    /// variant wholly held) as the file `destination`, and chosen subtitles beside it as
    /// `<name>.<language>.vtt`.
    /// - Throws: ``CacheError``: `.offline` naming a rendition or key not held; `.outOfBounds`
    ///   for a plain file, or a name whose extension is not the container's; `.originRejected`
    ///   for segments that cannot be one file (saying why); `.ioFailure` when `destination`
    ///   exists or cannot be written. Nothing is left at `destination` after a failure.
    func export(_ url: URL, to destination: URL, renditions choice: RenditionChoice) async throws -> ExportSummary {
        guard !FileManager.default.fileExists(atPath: destination.path) else {
            throw CacheError(.ioFailure, "\(destination.path) exists already; choose a new path.")
        }
        let metadata = try await reader.contentInfo(for: url, as: .own(.export))
        let chosen: [Rendition]
        switch try await reader.manifestKind(url, metadata, as: .own(.export)) {
        case .hls: chosen = try await ExportChoice(reader: reader).hls(url, choice: choice)
        case .dash: chosen = try await ExportChoice(reader: reader).dash(url, choice: choice)
        default:
            throw CacheError(
                .outOfBounds,
                "\(url.absoluteString.prefix(200)) is a file, not an HLS or DASH asset: it is exported as it is.",
                remedy: CacheError.Remedy(.exportAsStored))
        }
        return try await write(chosen, sideLoaded: choice.sideLoaded, to: destination, source: url.absoluteString)
    }

    /// Writes `chosen`'s video and audio renditions as the file `destination`, and its subtitles
    /// and the `sideLoaded` subtitle files beside it (see ``export(_:to:renditions:)``); `source`
    /// names what they are of, in messages.
    func write(_ chosen: [Rendition], sideLoaded: [SideLoadedSubtitle] = [], to destination: URL, source: String)
        async throws -> ExportSummary
    {
        guard !FileManager.default.fileExists(atPath: destination.path) else {
            throw CacheError(.ioFailure, "\(destination.path) exists already; choose a new path.")
        }
        var media = chosen.filter { $0.rendition.role == .variant || $0.rendition.role == .audio }
        // An `.m4a` of an asset whose audio is a rendition of its own: that audio alone.
        if destination.pathExtension.lowercased() == "m4a", media.contains(where: { $0.rendition.role == .audio }) {
            media.removeAll { $0.rendition.role != .audio }
        }
        let keys = try await self.keys(of: media)
        let container = try await self.container(of: media, keys: keys)
        try Self.checkName(destination, container: container)
        let output = try await ExportOutput(path: destination.path)
        let zero: Int64
        do {
            let cursors = media.map { ResourceCursor(reader: reader, resources: $0.resources, keys: keys) }
            switch container {
            case .movie:
                zero = try await MovieWriter.write(cursors, to: output)
            case .transportStream:
                zero = try await TransportStreamWriter.write(
                    cursors, fresh: { ResourceCursor(reader: reader, resources: media[$0].resources, keys: keys) },
                    to: output)
            case .packedAudio:
                try await PackedAudioWriter.write(cursors[0], to: output)
                zero = 0
            }
            try await output.finish()
        } catch let error as MediaParseError {
            await output.discard()
            throw CacheError(.originRejected, "\(source.prefix(200)) cannot be written as one file: \(error.message)")
        } catch {
            await output.discard()
            throw error
        }
        let subtitles = try await ExportSubtitles(reader: reader).write(
            chosen.filter { $0.rendition.role == .subtitles }, sideLoaded: sideLoaded, beside: destination, zero: zero)
        return ExportSummary(path: destination.path, files: 1 + subtitles.files, bytes: output.offset + subtitles.bytes)
    }

    /// The AES-128 keys the renditions need, read from the store; refuses any other encryption.
    private func keys(of renditions: [Rendition]) async throws -> [URL: [UInt8]] {
        var keys: [URL: [UInt8]] = [:]
        for resource in renditions.flatMap(\.resources) {
            switch resource.encryption {
            case .none:
                continue
            case .other(let method, let format):
                let segment = resource.item.url.absoluteString.prefix(200)
                guard let format else {
                    throw CacheError(
                        .originRejected,
                        "\(segment) is encrypted sample by sample (\(method.prefix(40))), which only a player undoes as it decodes: it cannot be written as one file.",
                        remedy: CacheError.Remedy(.exportAsStored))
                }
                throw CacheError(
                    .originRejected,
                    "\(segment) is encrypted for the key system \(format.prefix(80)) (DRM), whose keys only a licensed player gets: it cannot be written as one file."
                )
            case .aes128(let uri, _):
                guard let key = HLSPlaylist.resolve(uri, base: resource.item.url), keys[key] == nil else { continue }
                guard reader.cachedContentInfo(for: key) != nil else {
                    throw CacheError(
                        .offline,
                        "The AES-128 key \(key.absoluteString.prefix(200)) is not held: a store keeps HLS keys only when it is encrypted.",
                        remedy: CacheError.Remedy(.pinIntoEncryptedStore))
                }
                let stream = try await reader.read(key, offset: 0, length: nil, as: .own(.export))
                var bytes: [UInt8] = []
                for try await chunk in stream where bytes.count <= 64 { bytes += chunk.readableBytesView }
                guard bytes.count == 16 else {
                    throw CacheError(
                        .originRejected,
                        "The AES-128 key \(key.absoluteString.prefix(200)) is \(bytes.count) bytes, not 16.")
                }
                keys[key] = bytes
            }
        }
        return keys
    }

    /// What the renditions' segments are, from each one's first bytes.
    private func container(of renditions: [Rendition], keys: [URL: [UInt8]]) async throws -> Container {
        var found: Container?
        for rendition in renditions {
            let cursor = ResourceCursor(reader: reader, resources: rendition.resources, keys: keys)
            guard try await cursor.advance() else { continue }
            let head = Array(try await cursor.exactly(min(8, Int(rendition.resources[0].item.range?.length ?? 8))))
            let kind: Container
            if head.first == 0x47 {
                kind = .transportStream
            } else if head.count == 8, head[4..<8].allSatisfy({ (0x20...0x7E).contains($0) }),
                PackedAudioWriter.tagLength(head + [0, 0]) == nil
            {
                kind = .movie
            } else if let audio = try await PackedAudioWriter.kind(
                of: ResourceCursor(reader: reader, resources: rendition.resources, keys: keys))
            {
                guard renditions.count == 1 else {
                    throw CacheError(
                        .originRejected,
                        "The audio of \(Self.describe(rendition.rendition)) is packed audio (\(audio.uppercased()) segments), which one file holds only alone: export the audio rendition alone, or the asset as it is stored.",
                        remedy: CacheError.Remedy(.exportAsStored))
                }
                kind = .packedAudio(audio)
            } else {
                throw CacheError(
                    .originRejected,
                    "The segments of \(Self.describe(rendition.rendition)) are neither fragmented MP4, MPEG-TS nor packed audio: they cannot be written as one file."
                )
            }
            guard found == nil || found == kind else {
                throw CacheError(
                    .originRejected, "The renditions mix fragmented MP4 and MPEG-TS segments: they cannot be one file.")
            }
            found = kind
        }
        guard let found else { throw CacheError(.notCached, "The chosen renditions name no segment.") }
        return found
    }

    /// Refuses a name whose extension says another container.
    private static func checkName(_ destination: URL, container: Container) throws {
        let ext = destination.pathExtension.lowercased()
        let movie = ["mp4", "m4a", "m4v", "mov", "cmfv", "cmfa"]
        if container == .movie, ext == "ts" || ext == "mts" {
            throw CacheError(
                .outOfBounds, "The asset's segments are fragmented MP4: name the file .mp4 (or .m4a for audio).")
        }
        if container == .transportStream, movie.contains(ext) {
            throw CacheError(.outOfBounds, "The asset's segments are MPEG-TS: name the file .ts.")
        }
        if case .packedAudio(let audio) = container, ext != audio {
            throw CacheError(
                .outOfBounds, "The asset's segments are packed \(audio.uppercased()) audio: name the file .\(audio).")
        }
    }

    /// A rendition in words, for messages: "the variant 720p at 1500000 bit/s (URL)".
    static func describe(_ rendition: ChosenRendition) -> String {
        var words: String
        switch rendition.role {
        case .variant:
            words = "the variant" + (rendition.height.map { " \($0)p" } ?? "")
            if rendition.bandwidth > 0 { words += " at \(rendition.bandwidth) bit/s" }
        case .audio: words = "the audio rendition"
        case .subtitles: words = "the subtitles"
        case .iFrames, .images: words = "the trick-play rendition"
        }
        if rendition.role != .variant, let name = rendition.language ?? rendition.name {
            words += " \(name.prefix(64))"
        }
        if let id = rendition.representation { words += " (representation \(id.prefix(64)))" }
        return words + " (\(rendition.url.absoluteString.prefix(200)))"
    }
}

extension String {
    /// The text with its first letter capitalised (a message that starts with a description).
    var capitalizingFirst: String { prefix(1).uppercased() + dropFirst() }
}
