// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Text helpers of playlists: percent-encoding a rewritten URI's value, and lines split on bytes.
extension HLSPlaylist {
    /// `text` with every byte but RFC 3986's unreserved ones (letters, digits, `-._~`)
    /// percent-encoded: safe as a query value (a rewritten URI's `url=`). Foundation's
    /// `addingPercentEncoding` was most of the cost of rewriting a long playlist.
    public static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count * 2)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                bytes.append(byte)
            default:
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The lines of `text` with their ends (`\n` or `\r\n`, or a lone `\r` at the very end;
    /// any other lone `\r` is content), split
    /// on bytes (Swift counts `\r\n` as one `Character`).
    static func splitLines(_ text: String) -> [(content: String, ending: String)] {
        var result: [(content: String, ending: String)] = []
        let utf8 = text.utf8
        var start = utf8.startIndex
        while let newline = utf8[start...].firstIndex(of: UInt8(ascii: "\n")) {
            var contentEnd = newline
            if contentEnd > start, utf8[utf8.index(before: contentEnd)] == UInt8(ascii: "\r") {
                contentEnd = utf8.index(before: contentEnd)
            }
            let next = utf8.index(after: newline)
            result.append(
                (
                    String(decoding: utf8[start..<contentEnd], as: UTF8.self),
                    String(decoding: utf8[contentEnd..<next], as: UTF8.self)
                ))
            start = next
        }
        if start < utf8.endIndex {
            // A last line cut after its CR (a CRLF without the LF): the CR is its end, not content.
            var contentEnd = utf8.endIndex
            if utf8[utf8.index(before: contentEnd)] == UInt8(ascii: "\r") {
                contentEnd = utf8.index(before: contentEnd)
            }
            result.append(
                (
                    String(decoding: utf8[start..<contentEnd], as: UTF8.self),
                    String(decoding: utf8[contentEnd...], as: UTF8.self)
                ))
        }
        return result
    }
}
