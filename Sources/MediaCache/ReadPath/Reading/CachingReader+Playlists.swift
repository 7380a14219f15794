// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// Telling HLS playlists from media, by what the origin says and sends, never by the URL.
extension CachingReader {
    /// The media types of HLS playlists (RFC 8216 §4 and the older names players still send).
    static let playlistTypes: Set<String> = ["application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl"]
    /// The media type of DASH manifests (ISO/IEC 23009-1 Annex C).
    static let manifestTypes: Set<String> = ["application/dash+xml"]

    /// What kind of manifest a resource is.
    public enum ManifestKind: String, Sendable, Equatable, Codable {
        /// An HLS playlist.
        case hls
        /// A DASH manifest (MPD).
        case dash
    }

    /// The media type of `metadata`, lower-cased, without parameters.
    static func mediaType(_ metadata: ContentMetadata) -> String? {
        // (Foundation's trimmingCharacters(in:) cost a twentieth of a cached range's answer.)
        metadata.mimeType.map { MediaType.normalized(mimeType: $0) }
    }

    /// Whether a whole read of the resource must first be looked at as a playlist or a
    /// manifest: its type says it is one, or it has no particular type (or a generic XML one)
    /// and is small enough to be one.
    package static func mayBePlaylist(_ metadata: ContentMetadata) -> Bool {
        // Asked for every cached range a proxy answers: one set look-up for most types.
        guard let type = mediaType(metadata) else { return isPlaylistSized(metadata) }
        switch typesLookedAt[type] {
        case true?: return true
        case false?: return isPlaylistSized(metadata)
        case nil: return false
        }
    }

    /// Playlist and manifest types (`true`), and the generic types a playlist may be sent
    /// with (`false`).
    private static let typesLookedAt: [String: Bool] = {
        var types = Dictionary(uniqueKeysWithValues: playlistTypes.union(manifestTypes).map { ($0, true) })
        for generic in ["application/octet-stream", "text/plain", "binary/octet-stream", "application/xml", "text/xml"] { types[generic] = false }
        return types
    }()

    private static func isPlaylistSized(_ metadata: ContentMetadata) -> Bool {
        guard let length = metadata.length else { return false }
        return (7...Int64(max(HLSPlaylist.maximumSize, DASHManifest.maximumSize))).contains(length)
    }

    /// Whether the resource is an HLS playlist or a DASH manifest: by its media type, or (for
    /// a small resource of no particular type) by how its body starts, read through the cache.
    /// - Parameter planned: see ``read(_:offset:length:headers:planned:)``.
    package func manifestKind(_ url: URL, _ metadata: ContentMetadata, headers: RequestHeaders = [], planned: ContentMetadata? = nil) async throws -> ManifestKind? {
        guard Self.mayBePlaylist(metadata) else { return nil }
        if let declared = Self.declaredKind(metadata) { return declared }
        // A look, not the read that answers: the probe's download stays held for that one.
        let stream = try await read(url, headers: headers, planned: planned, lengthless: (0, Self.sniffedLength), takesReservation: false) { total in
            ByteRange(0, min(total, Self.sniffedLength))
        }
        var first: [UInt8] = []
        for try await chunk in stream { first += chunk.readableBytesView }
        return Self.sniffedKind(first)
    }

    /// How many of a body's first bytes tell a playlist or a manifest from media.
    package static let sniffedLength: Int64 = 1024

    /// Whether the bytes a look at the body's start reads (``sniffedLength``) are stored, so
    /// that the look costs no origin request.
    package func holdsStart(of url: URL, _ metadata: ContentMetadata) -> Bool {
        guard let length = metadata.length else { return false }
        return length == 0 || storedSpans(of: url).contains(ByteRange(0, min(length, Self.sniffedLength)))
    }

    /// The kind the resource's media type names, if it names one.
    package static func declaredKind(_ metadata: ContentMetadata) -> ManifestKind? {
        guard let type = mediaType(metadata) else { return nil }
        if playlistTypes.contains(type) { return .hls }
        return manifestTypes.contains(type) ? .dash : nil
    }

    /// The kind a body that starts with `first` is, if it looks like a playlist or a manifest.
    package static func sniffedKind(_ first: [UInt8]) -> ManifestKind? {
        if HLSPlaylist.looksLikePlaylist(first) { return .hls }
        return DASHManifest.looksLikeManifest(first) ? .dash : nil
    }

    /// Whether the resource `metadata` describes is an HLS playlist: by its media type, or
    /// (for a small resource of no particular type) by a body that starts with `#EXTM3U`,
    /// read through the cache.
    /// - Parameter planned: see ``read(_:offset:length:headers:planned:)``.
    package func isPlaylist(_ url: URL, _ metadata: ContentMetadata, headers: RequestHeaders = [], planned: ContentMetadata? = nil) async throws -> Bool {
        try await manifestKind(url, metadata, headers: headers, planned: planned) == .hls
    }

    /// The whole body of `url` through the cache, refused past ``HLSPlaylist/maximumSize``,
    /// and the metadata of the version it is.
    /// - Throws: ``CacheError``: the read's errors; `.originRejected` for a body too large.
    package func playlistBody(_ url: URL, headers: RequestHeaders = [], planned: ContentMetadata? = nil) async throws -> (body: [UInt8], metadata: ContentMetadata) {
        try await storedBody(of: url, headers: headers, limit: max(HLSPlaylist.maximumSize, DASHManifest.maximumSize), planned: planned)
    }
}
