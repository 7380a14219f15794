// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// The slowest answers of a soak run, at most `limit` of them (none when it is 0), with what
/// each asked and when: where a long tail comes from.
struct SlowestAnswers: Sendable {
    let limit: Int
    private var answers: [(seconds: Double, what: String)] = []

    init(limit: Int) {
        self.limit = limit
    }

    mutating func add(_ seconds: Double, _ what: @autoclosure () -> String) {
        guard limit > 0 else { return }
        answers.append((seconds, what()))
        if answers.count > 4 * limit { keepSlowest() }
    }

    mutating func merge(_ other: SlowestAnswers) {
        answers += other.answers
        keepSlowest()
    }

    private mutating func keepSlowest() {
        answers = Array(answers.sorted { $0.seconds > $1.seconds }.prefix(limit))
    }

    func print() {
        for (seconds, what) in answers.sorted(by: { $0.seconds > $1.seconds }).prefix(limit) {
            Swift.print(String(format: "  slow: %.1f ms, ", seconds * 1000) + what)
        }
    }
}

/// How one request of the load went.
enum Read: Sendable {
    /// A `206` with every byte kept right.
    case right
    /// Another status.
    case status(Int)
    /// A wrong or missing byte, or a failure: what it was.
    case wrong(String)
    /// No whole answer within the timeout.
    case timedOut
}

/// `body`'s result, `.timedOut` when it takes longer than `limit` (it is then cancelled), `.wrong`
/// with the error when it throws.
func withDeadline(_ limit: Duration, _ body: @escaping @Sendable () async throws -> Read) async -> Read {
    await withTaskGroup(of: Read?.self) { group in
        group.addTask {
            do { return try await body() } catch { return .wrong("\(error)") }
        }
        group.addTask {
            try? await Task.sleep(for: limit)
            return Task.isCancelled ? nil : .timedOut
        }
        let first = await group.next() ?? .timedOut
        group.cancelAll()
        return first ?? .timedOut
    }
}

/// How many requests the clients of a run have issued, shared among them.
final class IssuedCount: Sendable {
    let count = Atomic<Int>(0)
}
