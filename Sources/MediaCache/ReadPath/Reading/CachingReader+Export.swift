// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation

/// What the cache holds written outside it, with no network: as a folder (``Exporter``) or as one
/// playable file (``FileExport``).
extension CachingReader {
    /// Writes what the cache holds of `url` at `destination` without contacting the origin
    /// (see ``Exporter``); `renditions` and `seconds` choose what of an HLS or DASH asset, as a
    /// pin does, else every rendition wholly held is written.
    @discardableResult
    package func export(
        _ url: URL, to destination: URL, renditions: RenditionChoice = RenditionChoice(), seconds: Double? = nil
    ) async throws -> ExportSummary {
        try await Exporter(reading: self).export(url, to: destination, renditions: renditions, seconds: seconds)
    }

    /// Writes the held rendition of the HLS asset or DASH presentation at `url` as one playable
    /// file at `destination`, without contacting the origin: fragmented MP4 segments as one MP4
    /// (video and the chosen audio as two tracks; `.m4a` for audio alone), MPEG-TS segments as
    /// one `.ts` (a separate audio rendition in the same programme), AES-128 segments deciphered
    /// with their held keys. Chosen WebVTT subtitles are written beside it as
    /// `<name>.<language>.vtt`. `renditions` chooses as a pin does; when it names no variant,
    /// the variant of the highest bandwidth wholly held is written. Memory stays flat however
    /// long the asset.
    /// - Throws: ``CacheError``: `.offline` naming a rendition or key that is not held (remedy
    ///   ``CacheError/Remedy/Action/pinFirst``); `.originRejected` for what cannot be one file
    ///   (`SAMPLE-AES`, a DRM system's keys, packed audio, an init section that changes midway);
    ///   `.outOfBounds` for a plain file, or a name whose extension is another container's;
    ///   `.ioFailure` when `destination` exists or cannot be written. A failed export leaves no file.
    @discardableResult
    public func exportFile(_ url: URL, to destination: URL, renditions: RenditionChoice = RenditionChoice())
        async throws -> ExportSummary
    {
        try await FileExport(reading: self).export(url, to: destination, renditions: renditions)
    }
}
