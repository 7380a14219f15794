// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheHTTPFields

/// A half-open range of byte offsets in a resource: `lowerBound ..< upperBound`.
///
/// Offsets and lengths are `Int64`, as NIO's file APIs use. A `ByteRange` is never empty
/// when it is a span or a hole.
public struct ByteRange: Hashable, Sendable, CustomStringConvertible {
    /// The largest offset or length the cache accepts from outside (clients, origins,
    /// playlists): 2^60 bytes, an exabyte. Every number from outside is parsed to at most
    /// this, so the sum of two of them, or of one and any configured size, cannot
    /// overflow `Int64`: arithmetic on them never traps.
    public static let maximumOffset: Int64 = HTTPNumber.maximum

    /// The first byte offset in the range.
    public var lowerBound: Int64
    /// The offset one past the last byte in the range.
    public var upperBound: Int64

    /// Creates a range from its bounds.
    /// - Parameters:
    ///   - lowerBound: the first offset, at least 0.
    ///   - upperBound: one past the last offset, at least `lowerBound`.
    public init(_ lowerBound: Int64, _ upperBound: Int64) {
        precondition(lowerBound >= 0 && upperBound >= lowerBound, "invalid byte range \(lowerBound)..<\(upperBound)")
        self.lowerBound = lowerBound
        self.upperBound = upperBound
    }

    /// Creates a range from a position and a length.
    public init(offset: Int64, length: Int64) {
        self.init(offset, offset + length)
    }

    /// The number of bytes in the range.
    public var length: Int64 { upperBound - lowerBound }

    /// Whether the range holds no bytes.
    public var isEmpty: Bool { upperBound == lowerBound }

    /// The part of this range that `other` also covers, or `nil` when they do not overlap.
    public func clamped(to other: ByteRange) -> ByteRange? {
        let lower = Swift.max(lowerBound, other.lowerBound)
        let upper = Swift.min(upperBound, other.upperBound)
        return lower < upper ? ByteRange(lower, upper) : nil
    }

    /// Whether every byte of `other` lies in this range.
    public func contains(_ other: ByteRange) -> Bool {
        other.lowerBound >= lowerBound && other.upperBound <= upperBound
    }

    public var description: String { "\(lowerBound)..<\(upperBound)" }
}
