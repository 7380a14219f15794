// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// The second half of the decision: what the origin's answer to a question (a revalidation
/// of a stored version, or a probe when nothing is stored) means. ``ContentValidator`` sorts
/// the answer into an ``Answer``, gathers what is ``Questioned``, and carries the ``Outcome``
/// out.
extension Validation {
    /// The origin's answer, as far as the decision goes.
    package enum Answer: Equatable, Sendable {
        /// The origin could not answer: unreachable, too slow, or a `5xx`
        /// (``CacheError/isOriginFailure``).
        case failed
        /// The origin answered with an error status of its own (a `404`, a `410`, a `403`).
        case refused(status: Int)
        /// `416`: nothing at the offset asked (an empty file, a read past the end).
        case rangeNotSatisfiable
        /// Another error: an answer the cache refused, the cache offline.
        case otherError
        /// `304 Not Modified`.
        case notModified
        /// A body; `provenSame` when a validator the stored version and the answer both carry
        /// says they are the same version.
        case body(provenSame: Bool)
    }

    /// What is known of the question when its answer comes.
    package struct Questioned: Equatable, Sendable {
        /// It revalidated a stored version (else it probed: nothing was stored).
        package var revalidates = false
        /// A stale version may serve when its origin fails
        /// (``CachingReader/Configuration/servesStaleOnOriginFailure``).
        package var servesStaleOnFailure = true
        /// The stored version requires revalidation: the origin said `must-revalidate` or `no-cache`.
        package var requiresRevalidation = false
        /// The stored version is pinned and holds every byte.
        package var isWholePin = false

        package init() {}
    }

    /// Why an answer fails the request.
    package enum Failure: Equatable, Sendable {
        /// The origin's error, as it came.
        case originError
        /// The origin failed, and stale versions are not served on failures.
        case noStaleOnFailure
        /// The origin failed, and the stored version may not serve stale (`must-revalidate`, `no-cache`).
        case mustRevalidate
    }

    /// What to do with an answer, one case per outcome.
    package enum Outcome: Equatable, Sendable {
        /// Serve the stored version though stale: its origin failed to say whether it is current.
        case serveStale
        /// Serve the pinned copy the origin no longer has (a `404` or `410`): the user kept it.
        case servePinned
        /// The stored version is current: refresh its freshness from the answer and serve it.
        case confirm
        /// Store the answer and serve its body; `newVersion` when it replaces the stored one.
        case adopt(newVersion: Bool)
        /// Ask for the content information alone (a `HEAD`): the answer had nothing to give.
        case askHead
        /// Give the player the origin's `304`: nothing was stored, so the condition was its own.
        case passNotModified
        /// Fail the request.
        case fail(Failure)
    }

    /// What `answer` means for the question `questioned`.
    package static func outcome(of answer: Answer, questioned: Questioned) -> Outcome {
        switch answer {
        case .failed:
            guard questioned.revalidates else { return .fail(.originError) }
            guard questioned.servesStaleOnFailure else { return .fail(.noStaleOnFailure) }
            return questioned.requiresRevalidation ? .fail(.mustRevalidate) : .serveStale
        case .refused(let status):
            let gone = status == 404 || status == 410
            return questioned.revalidates && gone && questioned.isWholePin ? .servePinned : .fail(.originError)
        case .rangeNotSatisfiable:
            return questioned.revalidates ? .fail(.originError) : .askHead
        case .otherError:
            return .fail(.originError)
        case .notModified:
            return questioned.revalidates ? .confirm : .passNotModified
        case .body(let provenSame):
            return .adopt(newVersion: questioned.revalidates && !provenSame)
        }
    }
}

extension Validation.Answer {
    /// What an origin request that failed with `error` answered.
    init(_ error: CacheError) {
        if error.isOriginFailure {
            self = .failed
        } else if error.code == .rangeNotSatisfiable {
            self = .rangeNotSatisfiable
        } else if let status = error.originAnswer?.status {
            self = .refused(status: status)
        } else {
            self = .otherError
        }
    }
}
