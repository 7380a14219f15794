// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// The table from MIME types and file extensions to Uniform Type Identifiers.
package enum MediaType {
    /// Lower-cases a MIME type and drops its parameters (`audio/MPEG; x=1` → `audio/mpeg`).
    public static func normalized(mimeType: String) -> String {
        // ASCII (every real type; a leading `;`, which `split` skips, aside): done on the
        // bytes in place, without a copy when nothing changes (a cached range's answer asks
        // for its type's normalized form on every request).
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
        var text = mimeType
        let ascii = text.withUTF8 { bytes -> String? in
            guard bytes.first != UInt8(ascii: ";"), bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
            var base = bytes[...]
            if let semicolon = base.firstIndex(of: UInt8(ascii: ";")) { base = base[..<semicolon] }
            while let first = base.first, isSpace(first) { base.removeFirst() }
            while let last = base.last, isSpace(last) { base.removeLast() }
            if base.count == bytes.count, !base.contains(where: { (0x41...0x5A).contains($0) }) { return mimeType }
            return String(decoding: base.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
        }
        if let ascii { return ascii }
        let base = mimeType.split(separator: ";", maxSplits: 1).first.map(String.init) ?? mimeType
        return base.trimmingWhitespace().lowercased()
    }

    /// The UTI AVFoundation expects for a MIME type, or `nil` when the type is not in the table.
    public static func uniformTypeIdentifier(forMIMEType mimeType: String) -> String? {
        mimeTypeToUTI[normalized(mimeType: mimeType)]
    }

    /// The UTI for a file extension such as `mp3` or `M4A`, or `nil` when unknown.
    public static func uniformTypeIdentifier(forPathExtension ext: String) -> String? {
        extensionToMIMEType[ext.lowercased()].flatMap { mimeTypeToUTI[$0] }
    }

    /// The MIME type for a file extension such as `mp3`, or `nil` when unknown.
    public static func mimeType(forPathExtension ext: String) -> String? {
        extensionToMIMEType[ext.lowercased()]
    }

    static let mimeTypeToUTI: [String: String] = [
        "audio/mpeg": "public.mp3",
        "audio/mp3": "public.mp3",
        "audio/x-mp3": "public.mp3",
        "audio/mpeg3": "public.mp3",
        "audio/mp4": "com.apple.m4a-audio",
        "audio/x-m4a": "com.apple.m4a-audio",
        "audio/m4a": "com.apple.m4a-audio",
        "audio/aac": "public.aac-audio",
        "audio/aacp": "public.aac-audio",
        "audio/x-aac": "public.aac-audio",
        "video/mp4": "public.mpeg-4",
        "application/mp4": "public.mpeg-4",
        "video/x-m4v": "com.apple.m4v-video",
        "video/quicktime": "com.apple.quicktime-movie",
        "audio/wav": "com.microsoft.waveform-audio",
        "audio/x-wav": "com.microsoft.waveform-audio",
        "audio/wave": "com.microsoft.waveform-audio",
        "audio/vnd.wave": "com.microsoft.waveform-audio",
        "audio/flac": "org.xiph.flac",
        "audio/x-flac": "org.xiph.flac",
        "audio/ogg": "org.xiph.ogg-audio",
        "audio/vorbis": "org.xiph.ogg-audio",
        "application/ogg": "org.xiph.ogg",
        "video/ogg": "org.xiph.ogv",
        "audio/opus": "org.xiph.opus",
        "video/webm": "org.webmproject.webm",
        "audio/webm": "org.webmproject.webm",
        "video/mp2t": "public.mpeg-2-transport-stream",
        "video/mpeg": "public.mpeg",
        "application/vnd.apple.mpegurl": "public.m3u-playlist",
        "application/x-mpegurl": "public.m3u-playlist",
        "audio/mpegurl": "public.m3u-playlist",
        "audio/x-mpegurl": "public.m3u-playlist",
        "audio/aiff": "public.aiff-audio",
        "audio/x-aiff": "public.aiff-audio",
        "audio/ac3": "public.ac3-audio",
        "audio/3gpp": "public.3gpp",
        "video/3gpp": "public.3gpp",
    ]

    static let extensionToMIMEType: [String: String] = [
        "mp3": "audio/mpeg",
        "m4a": "audio/mp4",
        "m4b": "audio/mp4",
        "aac": "audio/aac",
        "mp4": "video/mp4",
        "m4v": "video/x-m4v",
        "mov": "video/quicktime",
        "wav": "audio/wav",
        "flac": "audio/flac",
        "ogg": "audio/ogg",
        "oga": "audio/ogg",
        "ogv": "video/ogg",
        "opus": "audio/opus",
        "webm": "video/webm",
        "ts": "video/mp2t",
        "m3u8": "application/vnd.apple.mpegurl",
        "aif": "audio/aiff",
        "aiff": "audio/aiff",
        "3gp": "video/3gpp",
    ]
}
