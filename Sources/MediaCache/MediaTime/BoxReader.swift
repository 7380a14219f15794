// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Why a media file's structure (boxes, frame headers) cannot be read.
package struct MediaParseError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// Reads big-endian numbers from bytes from outside, never past their end: every read that
/// would pass it throws.
struct BoxReader {
    let bytes: ArraySlice<UInt8>
    private(set) var position: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        position = bytes.startIndex
    }

    var remaining: Int { bytes.endIndex - position }

    mutating func skip(_ count: Int) throws(MediaParseError) {
        guard count >= 0, count <= remaining else { throw MediaParseError("A box ends before its fields do.") }
        position += count
    }

    mutating func uint(_ width: Int) throws(MediaParseError) -> UInt64 {
        guard width <= remaining else { throw MediaParseError("A box ends before its fields do.") }
        var value: UInt64 = 0
        for index in position..<(position + width) { value = value << 8 | UInt64(bytes[index]) }
        position += width
        return value
    }

    mutating func u8() throws(MediaParseError) -> UInt8 { UInt8(try uint(1)) }
    mutating func u16() throws(MediaParseError) -> UInt16 { UInt16(try uint(2)) }
    mutating func u24() throws(MediaParseError) -> UInt32 { UInt32(try uint(3)) }
    mutating func u32() throws(MediaParseError) -> UInt32 { UInt32(try uint(4)) }
    mutating func u64() throws(MediaParseError) -> UInt64 { try uint(8) }

    /// A 64-bit field read as an offset or length: at most ``ByteRange/maximumOffset``.
    mutating func length64() throws(MediaParseError) -> Int64 {
        let value = try u64()
        guard value <= UInt64(ByteRange.maximumOffset) else {
            throw MediaParseError("A 64-bit length is beyond any file.")
        }
        return Int64(value)
    }

    /// A count of entries of `entrySize` bytes each that must all lie in what is left.
    mutating func entryCount(of entrySize: Int) throws(MediaParseError) -> Int {
        let count = Int(try u32())
        guard count <= remaining / entrySize else {
            throw MediaParseError("A table claims more entries than its box holds.")
        }
        return count
    }
}

/// An ISO base media file format box (ISO/IEC 14496-12 §4.2): its type and where its body lies.
struct MP4Box {
    /// The four-character type as a big-endian number (`fourCC("moov")`).
    var type: UInt32
    /// The box's first byte, in the file (or in the buffer it was found in).
    var offset: Int64
    /// The header's size: 8, or 16 with a 64-bit size (`uuid` boxes add 16 more).
    var headerSize: Int64
    /// The whole box's size; `nil` for a last box that runs to the end of the file.
    var size: Int64?

    var end: Int64? { size.map { offset + $0 } }

    /// The header of the box at `index` of `bytes`, whose first byte is at `offset` in the file;
    /// `nil` when `bytes` end before the header does.
    /// - Throws: ``MediaParseError`` for a size smaller than its header.
    static func header(in bytes: ArraySlice<UInt8>, at index: Int, offset: Int64) throws(MediaParseError) -> MP4Box? {
        var reader = BoxReader(bytes[index...])
        guard reader.remaining >= 8 else { return nil }
        let size32 = try reader.u32()
        let type = try reader.u32()
        var headerSize: Int64 = 8
        var size: Int64? = Int64(size32)
        if size32 == 1 {
            guard reader.remaining >= 8 else { return nil }
            size = try reader.length64()
            headerSize = 16
        } else if size32 == 0 {
            size = nil
        }
        if type == fourCC("uuid") { headerSize += 16 }
        if let size, size < headerSize { throw MediaParseError("A box of \(size) bytes is smaller than its header.") }
        return MP4Box(type: type, offset: offset, headerSize: headerSize, size: size)
    }

    /// The boxes directly inside `body` (a container's body), each with its own body; a box that
    /// claims more than `body` holds throws.
    static func children(of body: ArraySlice<UInt8>) throws(MediaParseError) -> [(
        type: UInt32, body: ArraySlice<UInt8>
    )] {
        var result: [(type: UInt32, body: ArraySlice<UInt8>)] = []
        var index = body.startIndex
        while body.endIndex - index >= 8 {
            guard let box = try header(in: body, at: index, offset: Int64(index)) else { break }
            let available = Int64(body.endIndex - index)
            let size = box.size ?? available
            guard size <= available else { throw MediaParseError("A box claims more bytes than its parent holds.") }
            result.append((box.type, body[(index + Int(box.headerSize))..<(index + Int(size))]))
            index += Int(size)
        }
        return result
    }

    /// The body of the first child of `body` of type `type`, if any.
    static func child(_ type: UInt32, of body: ArraySlice<UInt8>) throws(MediaParseError) -> ArraySlice<UInt8>? {
        try children(of: body).first { $0.type == type }?.body
    }
}

/// A four-character code as the big-endian number boxes carry.
func fourCC(_ text: StaticString) -> UInt32 {
    text.withUTF8Buffer { bytes in bytes.prefix(4).reduce(0) { $0 << 8 | UInt32($1) } }
}
