// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import MediaCacheHTTPFields

// The field parsers (MediaCacheHTTPFields, below the engine) speak of bytes as `Range<Int64>`;
// the engine and what is built on it, as `ByteRange`.

extension ByteRange {
    /// The range `bounds` covers.
    package init(_ bounds: Range<Int64>) {
        self.init(bounds.lowerBound, bounds.upperBound)
    }

    /// The range as the field parsers take it.
    package var bounds: Range<Int64> { lowerBound..<upperBound }
}

extension RangeSpecifier {
    /// The bytes this specifier selects in a resource of `length` bytes, or `nil` when it is
    /// unsatisfiable (see ``resolvedBounds(length:)``).
    package func resolve(length: Int64) -> ByteRange? {
        resolvedBounds(length: length).map(ByteRange.init)
    }

    /// The `Range` header value for `range` (see ``headerValue(forBounds:)``).
    package static func headerValue(for range: ByteRange) -> String {
        headerValue(forBounds: range.bounds)
    }
}

extension ContentRange {
    /// A content range of `range` (`nil`: `bytes */total`).
    package init(range: ByteRange?, totalLength: Int64?) {
        self.init(bounds: range?.bounds, totalLength: totalLength)
    }

    /// The bytes the body holds, or `nil` for `bytes */total`.
    package var range: ByteRange? { bounds.map(ByteRange.init) }
}
