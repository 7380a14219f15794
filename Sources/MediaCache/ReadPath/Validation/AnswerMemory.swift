// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// Origin answers that are not the resource's bytes but that a cache may reuse while fresh
/// (a `404` or `410` the origin says is fresh for a minute, a `301` with `Last-Modified`:
/// RFC 9111 §3, §4.2), so a player that retries a missing segment does not hammer the origin.
/// Kept in memory only, at most `limit` answers and `byteLimit` body bytes together: when
/// full, the answers that turn stale first are forgotten first. A forgotten answer costs a
/// request, never a wrong one. An answer of the resource's own bytes (or a `304` for them)
/// makes the one remembered for it go.
final class AnswerMemory: Sendable {
    private struct Contents {
        var answers: [CacheKey: OriginAnswer] = [:]
        var bytes = 0
    }
    private let contents = Mutex(Contents())
    let limit: Int
    let byteLimit: Int

    init(limit: Int = 1_000, byteLimit: Int = 16 << 20) {
        self.limit = max(1, limit)
        self.byteLimit = max(0, byteLimit)
    }

    /// Remembers `answer` for `key` while it is fresh; one that is not, or that is larger
    /// than the whole budget, is not kept (and the one before goes).
    func remember(_ answer: OriginAnswer, for key: CacheKey, at now: Date) {
        contents.withLock { contents in
            Self.remove(key, from: &contents)
            guard let freshUntil = answer.freshUntil, freshUntil > now, answer.body.count <= byteLimit else { return }
            // Stale ones first, then those that turn stale soonest, until there is room.
            let byExpiry = contents.answers.sorted {
                ($0.value.freshUntil ?? .distantPast) < ($1.value.freshUntil ?? .distantPast)
            }
            var index = byExpiry.startIndex
            while contents.answers.count >= limit || contents.bytes + answer.body.count > byteLimit,
                index < byExpiry.endIndex
            {
                Self.remove(byExpiry[index].key, from: &contents)
                index += 1
            }
            contents.answers[key] = answer
            contents.bytes += answer.body.count
        }
    }

    /// The answer remembered for `key` if it is still fresh at `now`, with its `Age` as of
    /// `now` (RFC 9111 §5.1); a stale one is forgotten.
    func answer(for key: CacheKey, at now: Date) -> OriginAnswer? {
        contents.withLock { contents in
            guard var answer = contents.answers[key] else { return nil }
            guard let freshUntil = answer.freshUntil, now < freshUntil else {
                Self.remove(key, from: &contents)
                return nil
            }
            answer.headers.removeAll { $0.name.lowercased() == "age" }
            let age = max(0, now.timeIntervalSince(answer.generatedAt ?? now))
            answer.headers.append(
                ContentMetadata.HeaderField(name: "Age", value: String(Int64(min(age, Double(Int32.max))))))
            return answer
        }
    }

    /// Forgets the answer remembered for `key`, if any.
    func forget(_ key: CacheKey) {
        contents.withLock { Self.remove(key, from: &$0) }
    }

    /// How many answers are remembered.
    var count: Int { contents.withLock { $0.answers.count } }

    private static func remove(_ key: CacheKey, from contents: inout Contents) {
        if let old = contents.answers.removeValue(forKey: key) { contents.bytes -= old.body.count }
    }
}
