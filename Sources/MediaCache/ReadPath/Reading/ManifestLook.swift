// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// How a resource is told to be an HLS playlist, a DASH manifest or media: by its media type, by
/// its size, by how its body starts. Pure rules; the reader carries out the look at the body
/// (``CachingReader/manifestKind(_:_:headers:planned:as:)``).
package enum ManifestLook {
    /// The media types of HLS playlists (RFC 8216 §4 and the older names players still send).
    static let playlistTypes: Set<String> = [
        "application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl",
    ]
    /// The media type of DASH manifests (ISO/IEC 23009-1 Annex C).
    static let manifestTypes: Set<String> = ["application/dash+xml"]

    /// How many of a body's first bytes tell a playlist or a manifest from media.
    package static let sniffedLength: Int64 = 1024

    /// The media type of `metadata`, lower-cased, without parameters.
    static func mediaType(_ metadata: ContentMetadata) -> String? {
        // (Foundation's trimmingCharacters(in:) showed in a cached range's profile.)
        metadata.mimeType.map { MediaType.normalized(mimeType: $0) }
    }

    /// Whether a whole read of the resource must first be looked at as a playlist or a
    /// manifest: its type says it is one, or it has no particular type (or a generic XML one)
    /// and is small enough to be one.
    package static func mayBePlaylist(_ metadata: ContentMetadata) -> Bool {
        // Asked for every cached range a proxy answers: one set look-up for most types.
        if metadata.startIsMedia == true { return false }  // looked at before: not one
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
        for generic in ["application/octet-stream", "text/plain", "binary/octet-stream", "application/xml", "text/xml"]
        { types[generic] = false }
        return types
    }()

    private static func isPlaylistSized(_ metadata: ContentMetadata) -> Bool {
        guard let length = metadata.length else { return false }
        return (7...Int64(max(HLSPlaylist.maximumSize, DASHManifest.maximumSize))).contains(length)
    }

    /// The kind the resource's media type names, if it names one.
    package static func declaredKind(_ metadata: ContentMetadata) -> CachingReader.ManifestKind? {
        guard let type = mediaType(metadata) else { return nil }
        if playlistTypes.contains(type) { return .hls }
        return manifestTypes.contains(type) ? .dash : nil
    }

    /// The kind a body that starts with `first` is, if it looks like a playlist or a manifest.
    package static func sniffedKind(_ first: [UInt8]) -> CachingReader.ManifestKind? {
        if HLSPlaylist.looksLikePlaylist(first) { return .hls }
        return DASHManifest.looksLikeManifest(first) ? .dash : nil
    }
}
