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
                guard wanted >= UInt8(ascii: "a"), wanted <= UInt8(ascii: "z"), byte == wanted - 0x20 else { return false }
            }
            return true
        }
    }
}
