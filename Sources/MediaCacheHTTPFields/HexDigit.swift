// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// ASCII hexadecimal digits.
package enum HexDigit {
    /// The value of `byte` as a hexadecimal digit (`0-9`, `a-f`, `A-F`); `nil` for any other byte.
    package static func value(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The bytes two digits each of `digits` spell; `nil` for an odd count or a byte that is not a digit.
    package static func bytes(_ digits: some Collection<UInt8>) -> [UInt8]? {
        guard digits.count % 2 == 0 else { return nil }
        var result: [UInt8] = []
        result.reserveCapacity(digits.count / 2)
        var high: UInt8?
        for digit in digits {
            guard let value = value(of: digit) else { return nil }
            if let first = high {
                result.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return result
    }
}
