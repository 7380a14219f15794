// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Writes a rendition of packed audio segments (RFC 8216 §3.4: AAC in ADTS, MP3, each segment
/// led by an ID3 tag carrying its timestamp) as one `.aac` or `.mp3`: the segments' frames one
/// after another, each segment's leading ID3 tag left out (its timestamp means nothing in one file).
enum PackedAudioWriter {
    /// The audio a frame header (at least 2 bytes) starts: `aac` (ADTS: sync and layer 0),
    /// `mp3` (MPEG audio sync and another layer), else `nil`.
    static func kind(of head: some Collection<UInt8>) -> String? {
        let bytes = Array(head.prefix(2))
        guard bytes.count == 2, bytes[0] == 0xFF, bytes[1] & 0xE0 == 0xE0 else { return nil }
        if bytes[1] & 0xF0 == 0xF0, bytes[1] & 0x06 == 0 { return "aac" }
        return bytes[1] & 0x06 == 0 ? nil : "mp3"
    }

    /// The whole length of the ID3v2 tag `header` (its first 10 bytes) starts: its size, its
    /// header, and its footer when it says it has one; `nil` when `header` starts none.
    static func tagLength(_ header: some Collection<UInt8>) -> Int? {
        let bytes = Array(header.prefix(10))
        guard bytes.count == 10, bytes.starts(with: Array("ID3".utf8)), bytes[6..<10].allSatisfy({ $0 < 0x80 }) else {
            return nil
        }
        let size = bytes[6..<10].reduce(0) { $0 << 7 | Int($1) }  // 28 bits: at most 256 MiB
        return 10 + size + (bytes[5] & 0x10 != 0 ? 10 : 0)
    }

    /// What the rendition's first segment holds (`aac` or `mp3`), its leading tag skipped; `nil`
    /// when it is no packed audio.
    static func kind(of cursor: ResourceCursor) async throws -> String? {
        guard try await cursor.advance() else { return nil }
        var head = try await cursor.prefix(10)
        if let length = tagLength(head) {
            try await cursor.pass(Int64(length - head.count))
            head = try await cursor.prefix(2)
        }
        return kind(of: head)
    }

    /// Writes every segment of `cursor`, without its leading ID3 tag, to `output`.
    static func write(_ cursor: ResourceCursor, to output: ExportOutput) async throws {
        while try await cursor.advance() {
            let head = try await cursor.prefix(10)
            if let length = tagLength(head) {
                try await cursor.pass(Int64(length - head.count))
            } else {
                try await output.write(head)
            }
            try await cursor.pass(nil, to: output)
        }
    }
}
