// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheHTTPFields
import NIOCore
import NIOHTTP1

/// The bytes of an answer's head whose body is framed by its `Content-Length`, written in one
/// pass into one buffer. NIO's `HTTPResponseEncoder` writes each name, separator, value and line
/// end as a write of its own (four capacity and exclusivity checks per field) and looks the
/// framing fields up again: a quarter of a cached range's instructions (issue 79). An answer
/// whose framing NIO's encoder would change (no `Content-Length`, a `Transfer-Encoding`, a status
/// without a body) is not encoded here (`nil`), and goes through NIO's encoder as before.
enum EncodedHead {
    /// `head` as HTTP/1 bytes (RFC 9112 §4, §5), or `nil` when its body is not framed by a
    /// `Content-Length` alone.
    static func encode(_ head: HTTPResponseHead, allocator: ByteBufferAllocator) -> ByteBuffer? {
        guard head.version.major == 1, head.status.mayHaveResponseBody else { return nil }
        // A first pass sizes the head and checks its framing; the second copies every byte in one
        // write: one capacity and exclusivity check for the head, not one per field.
        var statusLine = Self.statusLine(head)
        var size = statusLine.utf8.count + 2
        var hasLength = false
        for (name, value) in head.headers {
            let count = name.utf8.count
            if count == 14, FieldName.matches(name, "content-length") { hasLength = true }
            // Framing by a transfer coding stays NIO's (it removes the field when a length is given).
            if count == 17, FieldName.matches(name, "transfer-encoding") { return nil }
            size += count + value.utf8.count + 4
        }
        guard hasLength else { return nil }
        var buffer = allocator.buffer(capacity: size)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { out in
            var at = 0
            copy(&statusLine, to: out, at: &at)
            for (name, value) in head.headers {
                var (name, value) = (name, value)
                copy(&name, to: out, at: &at)
                out[at] = UInt8(ascii: ":")
                out[at + 1] = UInt8(ascii: " ")
                at += 2
                copy(&value, to: out, at: &at)
                out[at] = UInt8(ascii: "\r")
                out[at + 1] = UInt8(ascii: "\n")
                at += 2
            }
            out[at] = UInt8(ascii: "\r")
            out[at + 1] = UInt8(ascii: "\n")
            return at + 2
        }
        return buffer
    }

    /// Copies `text`'s UTF-8 to `out` at `at`, and moves `at` past it.
    private static func copy(_ text: inout String, to out: UnsafeMutableRawBufferPointer, at: inout Int) {
        text.withUTF8 { bytes in
            UnsafeMutableRawBufferPointer(rebasing: out[at..<at + bytes.count]).copyMemory(
                from: UnsafeRawBufferPointer(bytes))
            at += bytes.count
        }
    }

    /// The status line with its line end, as NIO writes it.
    private static func statusLine(_ head: HTTPResponseHead) -> String {
        switch (head.version.minor, head.status.code) {
        case (1, 206): "HTTP/1.1 206 Partial Content\r\n"
        case (1, 200): "HTTP/1.1 200 OK\r\n"
        default: "HTTP/1.\(head.version.minor) \(head.status.code) \(head.status.reasonPhrase)\r\n"
        }
    }
}
