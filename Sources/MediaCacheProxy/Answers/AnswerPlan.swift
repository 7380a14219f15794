// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import MediaCacheHTTPFields
import NIOHTTP1

/// What the proxy answers to a checked request for a resource whose content information it
/// knows, decided from the request and that information alone (no I/O, no clock), so each
/// case is a row of a table (`AnswerPlanTests`). ``ProxyHandler`` carries it out.
enum AnswerPlan: Equatable, Sendable {
    /// `304`: the player's `If-None-Match` or `If-Modified-Since` matches the version.
    case notModified
    /// `412`: the player's `If-Match` or `If-Unmodified-Since` does not hold.
    case preconditionFailed
    /// `416`: the range lies outside a resource of `total` bytes.
    case unsatisfiable(total: Int64)
    /// The head of an answer for `range` of the resource, without a body (a `HEAD`, or an
    /// empty range); `range` is `nil` when the length is unknown.
    case headOnly(status: HTTPResponseStatus, range: ByteRange?, isPartial: Bool)
    /// The bytes the range picks (`specifier`, `nil` for all) from the version the read
    /// finds: `range` in the version known now. `206` when partial, else `200`.
    case read(range: ByteRange, specifier: RangeSpecifier?)
    /// A resource without a length, streamed as it arrives: from `firstByte` (`length`
    /// bytes, or to the end) when the player asked for a range and the origin serves ranges,
    /// else whole.
    case stream(firstByte: Int64?, length: Int64?)

    /// The plan for `asked` (of a `HEAD` when not `sendsBody`) of the version `metadata`
    /// describes. The player's conditions come first (RFC 9110 §13.2.2); a `Range` whose
    /// `If-Range` names another version is answered with the whole body.
    static func plan(_ asked: ProxyRouter.Asked, metadata: ContentMetadata, sendsBody: Bool) -> AnswerPlan {
        switch asked.conditions.evaluate(against: metadata) {
        case .notModified: return .notModified
        case .preconditionFailed: return .preconditionFailed
        case .proceed: break
        }
        let specifier = asked.conditions.rangeApplies(to: metadata) ? asked.specifier : nil
        guard let total = metadata.length else {
            guard sendsBody else { return .headOnly(status: .ok, range: nil, isPartial: false) }
            // A `206` to the probe said the origin serves ranges of it (a growing resource).
            if specifier != nil, let firstByte = asked.firstByte, metadata.acceptsRanges {
                return .stream(firstByte: firstByte, length: asked.length)
            }
            return .stream(firstByte: nil, length: nil)
        }
        var wanted = ByteRange(0, total)
        if let specifier {
            guard let resolved = specifier.resolve(length: total) else { return .unsatisfiable(total: total) }
            wanted = resolved
        }
        guard sendsBody, !wanted.isEmpty else {
            return .headOnly(
                status: specifier != nil ? .partialContent : .ok, range: wanted, isPartial: specifier != nil)
        }
        return .read(range: wanted, specifier: specifier)
    }
}
