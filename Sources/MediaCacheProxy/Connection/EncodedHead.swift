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
        // One pass over the fields (each pass copies every name and value out of the table),
        // one capacity check per field.
        var buffer = allocator.buffer(capacity: 1024)
        var hasLength = false
        buffer.writeString(Self.statusLine(head))
        for (name, value) in head.headers {
            let count = name.utf8.count
            if count == 14, FieldName.matches(name, "content-length") { hasLength = true }
            // Framing by a transfer coding stays NIO's (it removes the field when a length is given).
            if count == 17, FieldName.matches(name, "transfer-encoding") { return nil }
            write(name, value, to: &buffer)
        }
        guard hasLength else { return nil }
        buffer.writeStaticString("\r\n")
        return buffer
    }

    /// Writes `name: value` and a line end with one capacity check.
    private static func write(_ name: String, _ value: String, to buffer: inout ByteBuffer) {
        var (name, value) = (name, value)
        name.withUTF8 { nameBytes in
            value.withUTF8 { valueBytes in
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: nameBytes.count + valueBytes.count + 4) {
                    out in
                    var at = 0
                    copy(nameBytes, to: out, at: &at)
                    out[at] = UInt8(ascii: ":")
                    out[at + 1] = UInt8(ascii: " ")
                    at += 2
                    copy(valueBytes, to: out, at: &at)
                    out[at] = UInt8(ascii: "\r")
                    out[at + 1] = UInt8(ascii: "\n")
                    return at + 2
                }
            }
        }
    }

    private static func copy(_ bytes: UnsafeBufferPointer<UInt8>, to out: UnsafeMutableRawBufferPointer, at: inout Int)
    {
        UnsafeMutableRawBufferPointer(rebasing: out[at..<at + bytes.count]).copyMemory(
            from: UnsafeRawBufferPointer(bytes))
        at += bytes.count
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
