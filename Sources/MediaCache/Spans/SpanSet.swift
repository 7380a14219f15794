// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// A set of cached byte ranges (spans) of one resource, kept sorted and merged.
///
/// Spans that touch or overlap are merged into one, so the set's spans are always sorted,
/// disjoint and separated by at least one missing byte. A missing range is a *hole*.
package struct SpanSet: Hashable, Sendable, CustomStringConvertible {
    /// The spans, sorted by offset, disjoint and never touching.
    public private(set) var spans: [ByteRange]

    /// Creates an empty set.
    public init() { spans = [] }

    /// Creates a set holding the union of `ranges`.
    public init(_ ranges: some Sequence<ByteRange>) {
        spans = []
        for range in ranges { insert(range) }
    }

    /// The number of cached bytes.
    public var byteCount: Int64 { spans.reduce(0) { $0 + $1.length } }

    /// Whether no byte is cached.
    public var isEmpty: Bool { spans.isEmpty }

    /// Adds `range`, merging it with every span it touches or overlaps.
    public mutating func insert(_ range: ByteRange) {
        guard !range.isEmpty else { return }
        // First span whose end reaches the new range's start (touching counts).
        let first = firstIndex { $0.upperBound >= range.lowerBound }
        var last = first
        var merged = range
        while last < spans.count, spans[last].lowerBound <= range.upperBound {
            merged = ByteRange(
                min(merged.lowerBound, spans[last].lowerBound), max(merged.upperBound, spans[last].upperBound))
            last += 1
        }
        spans.replaceSubrange(first..<last, with: CollectionOfOne(merged))
    }

    /// Removes every byte in `range` from the set.
    public mutating func remove(_ range: ByteRange) {
        guard !range.isEmpty else { return }
        let first = firstIndex { $0.upperBound > range.lowerBound }
        var last = first
        var remaining: [ByteRange] = []
        while last < spans.count, spans[last].lowerBound < range.upperBound {
            let span = spans[last]
            if span.lowerBound < range.lowerBound { remaining.append(ByteRange(span.lowerBound, range.lowerBound)) }
            if span.upperBound > range.upperBound { remaining.append(ByteRange(range.upperBound, span.upperBound)) }
            last += 1
        }
        spans.replaceSubrange(first..<last, with: remaining)
    }

    /// Whether every byte of `range` is cached.
    public func contains(_ range: ByteRange) -> Bool {
        if range.isEmpty { return true }
        guard let span = span(containing: range.lowerBound) else { return false }
        return span.upperBound >= range.upperBound
    }

    /// The span holding the byte at `offset`, if that byte is cached.
    public func span(containing offset: Int64) -> ByteRange? {
        let index = firstIndex { $0.upperBound > offset }
        guard index < spans.count, spans[index].lowerBound <= offset else { return nil }
        return spans[index]
    }

    /// The set cut to `range`: its cached parts, already sorted and apart (one allocation).
    public func clipped(to range: ByteRange) -> SpanSet {
        var clipped = SpanSet()
        forEachPart(in: range) { clipped.spans.append($0) }
        return clipped
    }

    /// How many bytes of `range` are cached (without listing them).
    public func byteCount(in range: ByteRange) -> Int64 {
        var count: Int64 = 0
        forEachPart(in: range) { count += $0.length }
        return count
    }

    /// The cached parts of `range`, in order.
    public func spans(in range: ByteRange) -> [ByteRange] {
        clipped(to: range).spans
    }

    /// Calls `body` with each cached part of `range`, in order.
    private func forEachPart(in range: ByteRange, _ body: (ByteRange) -> Void) {
        var index = firstIndex { $0.upperBound > range.lowerBound }
        while index < spans.count, spans[index].lowerBound < range.upperBound {
            if let part = spans[index].clamped(to: range) { body(part) }
            index += 1
        }
    }

    /// The missing parts (holes) of `range`, in order.
    public func holes(in range: ByteRange) -> [ByteRange] {
        var result: [ByteRange] = []
        var cursor = range.lowerBound
        for span in spans(in: range) {
            if span.lowerBound > cursor { result.append(ByteRange(cursor, span.lowerBound)) }
            cursor = span.upperBound
        }
        if cursor < range.upperBound { result.append(ByteRange(cursor, range.upperBound)) }
        return result
    }

    /// Splits `range` into consecutive segments, each either wholly cached or wholly missing.
    public func segments(in range: ByteRange) -> [(range: ByteRange, isCached: Bool)] {
        var result: [(range: ByteRange, isCached: Bool)] = []
        var cursor = range.lowerBound
        for span in spans(in: range) {
            if span.lowerBound > cursor { result.append((ByteRange(cursor, span.lowerBound), false)) }
            result.append((span, true))
            cursor = span.upperBound
        }
        if cursor < range.upperBound { result.append((ByteRange(cursor, range.upperBound), false)) }
        return result
    }

    public var description: String { "[" + spans.map(\.description).joined(separator: ", ") + "]" }

    /// Binary search: the first index whose span satisfies `predicate`, which must be
    /// false for a prefix of `spans` and true for the rest.
    private func firstIndex(where predicate: (ByteRange) -> Bool) -> Int {
        var low = 0
        var high = spans.count
        while low < high {
            let mid = (low + high) / 2
            if predicate(spans[mid]) { high = mid } else { low = mid + 1 }
        }
        return low
    }
}

extension SpanSet {
    /// A compact text form, `"a-b,c-d"` with half-open bounds, used by the index.
    var encoded: String {
        spans.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ",")
    }

    /// Parses `encoded`; returns `nil` for malformed text.
    init?(encoded text: String) {
        self.init()
        guard !text.isEmpty else { return }
        for part in text.split(separator: ",") {
            let bounds = part.split(separator: "-")
            guard bounds.count == 2, let lower = Int64(bounds[0]), let upper = Int64(bounds[1]),
                lower >= 0, upper > lower
            else { return nil }
            insert(ByteRange(lower, upper))
        }
    }
}

extension SpanSet {
    /// A picture of which parts of a `length`-byte resource are stored, `width` cells wide:
    /// `█` where a cell is wholly stored, `▒` partly, `░` not at all.
    package func coverageBar(length: Int64, width: Int = 40) -> String {
        guard length > 0, width > 0 else { return String(repeating: isEmpty ? "░" : "█", count: max(0, width)) }
        return String(
            (0..<width).map { cell -> Character in
                let start = length * Int64(cell) / Int64(width)
                let end = max(start + 1, length * Int64(cell + 1) / Int64(width))
                let cellRange = ByteRange(start, min(end, length))
                if contains(cellRange) { return "█" }
                return spans(in: cellRange).isEmpty ? "░" : "▒"
            })
    }
}
