// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// An error from the cache store.
///
/// The code says what went wrong; ``message`` says it in words with what to do, and
/// ``underlyingError`` holds the cause (an I/O or database error) when there is one.
public struct CacheError: Error, Sendable, CustomStringConvertible {
    /// What went wrong. A struct over a private enum, as `HTTPClientError` is, so that a
    /// new code breaks no one's `switch` (compare with `==`, or `switch` with a `default`).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case cannotOpenStore, storeLocked, storeClosed, ioFailure, indexFailure, notCached, outOfBounds, entryInvalidated
            case capacityExceeded, originUnavailable, originNotAllowed, originTimedOut, originRejected, resourceChanged
            case rangeNotSatisfiable, encryptionKeyRequired, originAnswered, offline
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// The store's folder could not be created or opened.
        public static let cannotOpenStore = Code(.cannotOpenStore)
        /// Another process holds the store's folder.
        public static let storeLocked = Code(.storeLocked)
        /// The store has been closed.
        public static let storeClosed = Code(.storeClosed)
        /// Reading or writing an entry's data file failed (for example, the disk is full).
        public static let ioFailure = Code(.ioFailure)
        /// The index could not be read or written.
        public static let indexFailure = Code(.indexFailure)
        /// A read asked for bytes that are not cached.
        public static let notCached = Code(.notCached)
        /// A write or read reached outside the resource's known length, or had a negative offset.
        public static let outOfBounds = Code(.outOfBounds)
        /// The entry was removed or replaced by a new version while this handle was open.
        public static let entryInvalidated = Code(.entryInvalidated)
        /// Storing the bytes would exceed the size limit even after evicting what can be evicted.
        public static let capacityExceeded = Code(.capacityExceeded)
        /// The origin could not be reached, or its connection failed and could not be resumed.
        public static let originUnavailable = Code(.originUnavailable)
        /// The URL may not be fetched (its scheme, its host is not on the allow-list, …).
        public static let originNotAllowed = Code(.originNotAllowed)
        /// The origin did not answer in time.
        public static let originTimedOut = Code(.originTimedOut)
        /// The origin answered with something that cannot be used (a range other than the
        /// one asked for, contradictory lengths, a malformed answer, a refused redirect).
        public static let originRejected = Code(.originRejected)
        /// The origin answered with something other than the resource's bytes (a `404`, a
        /// `503`, a `304` to a player's own condition): ``CacheError/originAnswer`` holds it,
        /// for a front door to pass on as it is.
        public static let originAnswered = Code(.originAnswered)
        /// The resource changed at the origin while it was being read; the bytes already
        /// given are all of the old version. Read again to get the new version.
        public static let resourceChanged = Code(.resourceChanged)
        /// The requested range starts at or beyond the end of the resource.
        public static let rangeNotSatisfiable = Code(.rangeNotSatisfiable)

        /// The store's folder is encrypted and was opened without a key.
        public static let encryptionKeyRequired = Code(.encryptionKeyRequired)
        /// The read path is offline (``CachingReader/Configuration/isOffline``) and the store
        /// does not hold what was asked for.
        public static let offline = Code(.offline)

        public var description: String { base.rawValue }
    }

    /// What went wrong.
    public var code: Code
    /// A sentence saying what went wrong and what to do.
    public var message: String
    /// The error that caused this one, if any.
    public var underlyingError: (any Error)?
    /// The resource's total length, with `.rangeNotSatisfiable`.
    public var resourceLength: Int64?
    /// The origin's answer, with `.originAnswered`.
    public var originAnswer: OriginAnswer?

    /// Creates an error.
    public init(_ code: Code, _ message: String, underlyingError: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlyingError = underlyingError
    }

    public var description: String {
        if let underlyingError { return "\(message) (\(underlyingError))" }
        return message
    }
}
