// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// Which renditions of an asset a one-file export writes, and their resources: the choice made
/// as a pin makes it; with no variant named, the variant of the highest bandwidth wholly held
/// (with the chosen audio); with no subtitles named, every subtitle rendition wholly held. Only
/// what the store holds counts: a rendition chosen with a resource missing is refused, naming it
/// and what it misses.
struct ExportChoice {
    /// An offline read path.
    let reader: CachingReader

    /// The renditions of the HLS asset at `url`: the first variant chosen, its chosen audio
    /// renditions, its subtitles.
    func hls(_ url: URL, choice: RenditionChoice) async throws -> [FileExport.Rendition] {
        let (body, metadata) = try await reader.bodies.playlistBody(url, as: .own(.export))
        let entry = try? HLSPlaylist(parsing: body, url: url)
        let imports = entry?.definitions ?? [:]
        let bandwidths = Set(entry?.variants.map(\.bandwidth) ?? []).sorted(by: >)
        let base = metadata.finalURL ?? url
        return try await firstHeld(candidates(choice, bandwidths: bandwidths), anySubtitles: choice.subtitles == nil) {
            candidate in
            var chosen = [ChosenRendition(role: .variant, url: url, bandwidth: 0)]
            if let entry, entry.isMaster {
                do {
                    chosen = try candidate.renditions(of: entry, base: base)
                } catch let error as RenditionSelectionError {
                    throw CacheError(.outOfBounds, error.message)
                }
            }
            var result: [FileExport.Rendition] = []
            for rendition in chosen
            where rendition.role == .audio || rendition.role == .subtitles
                || (rendition.role == .variant && !result.contains { $0.rendition.role == .variant })
            {
                do {
                    result.append((rendition, try await mediaResources(rendition, imports: imports)))
                } catch let error as CacheError where error.code == .offline && rendition.role == .subtitles {
                    // Subtitles not named are written only when held.
                    if choice.subtitles != nil { throw error }
                }
            }
            return result
        }
    }

    /// The representations of the DASH presentation at `url`: the first video representation
    /// chosen per period's set, the chosen audio, the subtitles.
    func dash(_ url: URL, choice: RenditionChoice) async throws -> [FileExport.Rendition] {
        let (manifest, base) = try await reader.planner(for: .own(.export)).dashManifest(url)
        let presentation = manifest.presentation(base: base)
        guard presentation.periods.count <= 1 else {
            throw CacheError(
                .originRejected,
                "\(url.absoluteString.prefix(200)) has \(presentation.periods.count) periods; one file is written from a presentation of one period."
            )
        }
        let video = presentation.periods.flatMap(\.adaptationSets).filter { $0.content == .video || $0.content == nil }
        let bandwidths = Set(video.flatMap(\.representations).map(\.bandwidth)).sorted(by: >)
        return try await firstHeld(candidates(choice, bandwidths: bandwidths), anySubtitles: choice.subtitles == nil) {
            candidate in
            let chosen: [(ChosenRendition, DASHPresentation.Representation)]
            do {
                chosen = try candidate.representations(of: presentation, url: url)
            } catch let error as RenditionSelectionError {
                throw CacheError(.outOfBounds, error.message)
            }
            var result: [FileExport.Rendition] = []
            for (rendition, representation) in chosen
            where rendition.role == .audio || rendition.role == .subtitles
                || (rendition.role == .variant && !result.contains { $0.rendition.role == .variant })
            {
                let resources = representation.resources.map {
                    ExportResource(item: PrefetchItem(url: $0.url, range: $0.range), seconds: $0.duration)
                }
                result.append((rendition, resources))
            }
            return result
        }
    }

    /// The choices to try in turn: `choice` itself when it names a variant, else `choice` with
    /// each variant bandwidth from the highest.
    private func candidates(_ choice: RenditionChoice, bandwidths: [Int64]) -> [RenditionChoice] {
        var choice = choice
        if choice.subtitles == nil { choice.subtitles = .all }
        guard choice.variants.isEmpty, !bandwidths.isEmpty else { return [choice] }
        return bandwidths.map { bandwidth in
            var candidate = choice
            candidate.variants = [.atMost(bitsPerSecond: bandwidth)]
            return candidate
        }
    }

    /// The renditions of the first candidate whose every resource is held (with `anySubtitles`,
    /// subtitles not held are left out); else the refusal of the first, naming its first
    /// rendition not held.
    private func firstHeld(
        _ candidates: [RenditionChoice], anySubtitles: Bool,
        renditions: (RenditionChoice) async throws -> [FileExport.Rendition]
    ) async throws -> [FileExport.Rendition] {
        var refusal: (any Error)?
        for candidate in candidates {
            do {
                var chosen = try await renditions(candidate)
                if anySubtitles {
                    chosen.removeAll {
                        $0.rendition.role == .subtitles && !$0.resources.allSatisfy { reader.held.isHeld($0.item) }
                    }
                }
                if let (rendition, missing) = chosen.lazy.compactMap({ rendition in
                    let missing = rendition.resources.filter { !reader.held.isHeld($0.item) }
                    return missing.isEmpty ? nil : (rendition, missing)
                }).first {
                    let total = Set(rendition.resources.map(\.item)).count
                    throw CacheError(
                        .offline,
                        "\(FileExport.describe(rendition.rendition).capitalizingFirst) is not held: \(Set(missing.map(\.item)).count) of its \(total) resources are missing (the first: \(missing[0].item.url.absoluteString.prefix(200))).",
                        remedy: CacheError.Remedy(.pinFirst))
                }
                guard chosen.contains(where: { $0.rendition.role == .variant || $0.rendition.role == .audio }) else {
                    throw CacheError(.notCached, "The choice names no video or audio rendition.")
                }
                return chosen
            } catch let error as CacheError where error.code == .offline || error.code == .notCached {
                refusal = refusal ?? error
            }
        }
        throw refusal ?? CacheError(.notCached, "Nothing of the asset is held.", remedy: CacheError.Remedy(.pinFirst))
    }

    /// A media playlist's init sections and segments, in order, each with its encryption.
    private func mediaResources(_ rendition: ChosenRendition, imports: [String: String]) async throws
        -> [ExportResource]
    {
        let body: [UInt8]
        let base: URL
        do {
            let (text, metadata) = try await reader.bodies.playlistBody(rendition.url, as: .own(.export))
            (body, base) = (text, metadata.finalURL ?? rendition.url)
        } catch let error as CacheError where error.code == .offline || error.code == .notCached {
            throw CacheError(
                .offline,
                "\(FileExport.describe(rendition).capitalizingFirst) is not held: its playlist is not in the cache.",
                remedy: CacheError.Remedy(.pinFirst))
        }
        let playlist: HLSPlaylist
        let encryptions: [HLSPlaylist.SegmentEncryption]
        do {
            playlist = try HLSPlaylist(parsing: body, url: rendition.url, imports: imports)
            encryptions = try playlist.segmentEncryptions()
        } catch let error as HLSPlaylistError {
            throw CacheError(
                .originRejected,
                "The cached playlist \(rendition.url.absoluteString.prefix(200)) cannot be read: \(error.message)")
        }
        return try Self.resources(of: playlist, base: base, encryptions: encryptions)
    }

    /// A parsed media playlist's init sections and segments, in order, each with its encryption
    /// (``HLSPlaylist/segmentEncryptions()``); the segments whose URI is in `skipping` left out.
    static func resources(
        of playlist: HLSPlaylist, base: URL, encryptions: [HLSPlaylist.SegmentEncryption], skipping: Set<String> = []
    ) throws -> [ExportResource] {
        guard encryptions.count == playlist.segments.count else {
            throw CacheError(.originRejected, "A playlist of \(base.absoluteString.prefix(200)) cannot be read whole.")
        }
        var resources: [ExportResource] = []
        var lastSection: HLSPlaylist.InitSection?
        for (segment, encryption) in zip(playlist.segments, encryptions) where !skipping.contains(segment.uri) {
            if let section = segment.initSection, section != lastSection,
                let url = HLSPlaylist.resolve(section.uri, base: base)
            {
                resources.append(
                    ExportResource(item: PrefetchItem(url: url, range: section.byteRange), encryption: encryption))
                lastSection = section
            }
            guard let url = HLSPlaylist.resolve(segment.uri, base: base) else { continue }
            resources.append(
                ExportResource(
                    item: PrefetchItem(url: url, range: segment.byteRange), encryption: encryption,
                    seconds: segment.duration))
        }
        return resources
    }
}
