// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTPFields

extension HLSPlaylist {
    /// How a media segment is encrypted (`EXT-X-KEY`, RFC 8216 §4.3.2.4).
    enum SegmentEncryption: Equatable {
        case none
        /// The whole segment, AES-128-CBC with PKCS7 padding, its key at `key`, its IV given or
        /// the segment's media sequence number.
        case aes128(key: String, iv: [UInt8])
        /// Anything a reader cannot undo with a key file: `SAMPLE-AES`, `SAMPLE-AES-CTR`, a
        /// `KEYFORMAT` other than `identity` (a DRM system's), or a method this reader does not know.
        case other(method: String, keyFormat: String?)
    }

    /// Each segment's encryption, in the order of ``segments``.
    /// - Throws: ``HLSPlaylistError`` for an `EXT-X-KEY` that cannot be read (no `METHOD`, a
    ///   key without a `URI`, an `IV` that is not 32 hexadecimal digits).
    func segmentEncryptions() throws -> [SegmentEncryption] {
        var current: [SegmentEncryption] = []
        var result: [SegmentEncryption] = []
        var lastWasKey = false
        // A URI line is a segment as the parser reads it: after an EXTINF, unless a variant's.
        var pendingDuration = false
        var pendingVariant = false
        for line in lines {
            switch line.kind {
            case .tag(name: "EXT-X-KEY", let value):
                let attributes = try Self.attributes(value ?? "")
                guard let method = attributes["METHOD"] else { throw HLSPlaylistError("An EXT-X-KEY without METHOD.") }
                // Keys on consecutive lines apply together (one per key format).
                if !lastWasKey { current = [] }
                lastWasKey = true
                let format = attributes["KEYFORMAT"]
                if method == "NONE" { continue }
                guard method == "AES-128", format == nil || format == "identity" else {
                    current.append(.other(method: method, keyFormat: format))
                    continue
                }
                guard let uri = attributes["URI"], !uri.isEmpty else {
                    throw HLSPlaylistError("An AES-128 EXT-X-KEY without a URI.")
                }
                var iv: [UInt8] = []
                if let text = attributes["IV"] {
                    let digits = Array(text.utf8.dropFirst(2))
                    guard text.lowercased().hasPrefix("0x"), digits.count == 32,
                        let parsed = HexDigit.bytes(digits)
                    else { throw HLSPlaylistError("An EXT-X-KEY IV that is not 32 hexadecimal digits.") }
                    iv = parsed
                }
                current.append(.aes128(key: uri, iv: iv))
            case .tag(let name, _):
                lastWasKey = false
                if name == "EXTINF" { pendingDuration = true }
                if name == "EXT-X-STREAM-INF" { pendingVariant = true }
            case .uri:
                lastWasKey = false
                if pendingVariant {
                    pendingVariant = false
                    continue
                }
                guard pendingDuration else { continue }
                pendingDuration = false
                let sequence = mediaSequence + Int64(result.count)
                result.append(
                    current.first { if case .other = $0 { true } else { false } }
                        ?? current.first.map {
                            guard case .aes128(let key, let iv) = $0, iv.isEmpty else { return $0 }
                            return .aes128(key: key, iv: MovieMerge.bytes(UInt64(max(0, sequence)), width: 16))
                        } ?? .none)
            default:
                break
            }
        }
        return result
    }
}
