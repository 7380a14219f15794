// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// A JSON object written field by field, as `JSONEncoder` writes a synthesized `Codable`
/// value with its default strategies: a `nil` field left out, a `Date` as its seconds since
/// 2001 (`deferredToDate`), a `URL` as its absolute string. `JSONDecoder` reads what it
/// writes back to the same value. For what the store writes at every commit (an entry's
/// metadata and record): `JSONEncoder` took about 100,000 instructions for one metadata,
/// and a new entry's commit wrote it twice (docs/benchmarks.md).
package struct JSONObjectWriter {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    private var empty = true
    /// A number that JSON cannot hold was given (infinite, not a number).
    private var failed = false

    package init() {
        bytes.reserveCapacity(512)
    }

    /// The object, or `nil` when a field was a number JSON cannot hold.
    package consuming func finish() -> [UInt8]? {
        bytes.append(UInt8(ascii: "}"))
        return failed ? nil : bytes
    }

    private mutating func key(_ name: StaticString) {
        if !empty { bytes.append(UInt8(ascii: ",")) }
        empty = false
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// `text` as a JSON string: `"` and `\` escaped, and every control character; the runs
    /// between them copied whole (a record's checksums are hundreds of bytes).
    private mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var start = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                bytes.append(UInt8(ascii: "\\"))
                if byte < 0x20 {
                    // `\u00` and two lower-case hex digits (`a` is 0x61: 10 + 0x57).
                    bytes.append(contentsOf: "u00".utf8)
                    let low = byte & 0xF
                    bytes.append((byte >> 4) + 0x30)
                    bytes.append(low < 10 ? low + 0x30 : low + 0x57)
                } else {
                    bytes.append(byte)
                }
                start = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    package mutating func field(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        string(value)
    }

    package mutating func field(_ name: StaticString, _ value: Int64?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    package mutating func field(_ name: StaticString, _ value: Bool?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// A number, written as Swift describes it: the shortest digits that read back to it.
    package mutating func field(_ name: StaticString, _ value: Double?) {
        guard let value else { return }
        guard value.isFinite else {
            failed = true
            return
        }
        key(name)
        bytes.append(contentsOf: value.description.utf8)
    }

    package mutating func field(_ name: StaticString, _ value: Date?) {
        field(name, value?.timeIntervalSinceReferenceDate)
    }

    package mutating func field(_ name: StaticString, _ value: URL?) {
        field(name, value?.absoluteString)
    }

    package mutating func field(_ name: StaticString, _ values: [String]?) {
        guard let values else { return }
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Header fields, each an object of its `name` and `value`.
    package mutating func field(_ name: StaticString, _ fields: [ContentMetadata.HeaderField]?) {
        guard let fields else { return }
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (index, field) in fields.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: "{\"name\":".utf8)
            string(field.name)
            bytes.append(contentsOf: ",\"value\":".utf8)
            string(field.value)
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A value already written as JSON (an object this writer made).
    package mutating func field(_ name: StaticString, json: [UInt8]) {
        key(name)
        bytes.append(contentsOf: json)
    }
}
