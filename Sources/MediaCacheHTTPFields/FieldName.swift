// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Field names compared as HTTP compares them: without regard to ASCII case (RFC 9110 §5.1).
package enum FieldName {
    /// Whether `name` is `lowercaseName` in any ASCII case, without making a lower-cased copy
    /// (an answer's head compares a few names per field). `lowercaseName` must be lower case.
    package static func matches(_ name: String, _ lowercaseName: StaticString) -> Bool {
        let count = lowercaseName.utf8CodeUnitCount
        guard name.utf8.count == count else { return false }
        var name = name
        return name.withUTF8 { bytes in
            let expected = UnsafeBufferPointer(start: lowercaseName.utf8Start, count: count)
            for (byte, wanted) in zip(bytes, expected) where byte != wanted {
                guard wanted >= UInt8(ascii: "a"), wanted <= UInt8(ascii: "z"), byte == wanted - 0x20 else {
                    return false
                }
            }
            return true
        }
    }
}

/// Field values as HTTP reads them.
package enum FieldValue {
    /// `text` without the optional whitespace around it: spaces and horizontal tabs (RFC 9110
    /// §5.6.3), nothing else. Foundation's `trimmingCharacters(in: .whitespaces)` also takes
    /// other Unicode spaces, which are part of a value, and showed in an origin answer's
    /// checks' profile.
    package static func trimmed(_ text: Substring) -> Substring {
        let bytes = text.utf8
        let isOWS = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !isOWS($0) }), let last = bytes.lastIndex(where: { !isOWS($0) })
        else {
            return text[text.endIndex...]
        }
        return Substring(bytes[first...last])
    }
}
