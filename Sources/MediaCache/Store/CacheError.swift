// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// An error from the cache store.
///
/// The code says what went wrong; ``message`` says it in words, ``remedy`` what can be done
/// about it (as data), and ``underlyingError`` holds the cause (an I/O or database error)
/// when there is one.
public struct CacheError: Error, Sendable, CustomStringConvertible {
    /// What went wrong. A struct over a private enum, as `HTTPClientError` is, so that a
    /// new code breaks no one's `switch` (compare with `==`, or `switch` with a `default`).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case cannotOpenStore, storeLocked, storeClosed, ioFailure, indexFailure, notCached, outOfBounds,
                entryInvalidated
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
    /// What the user can do about it, when there is something: data, which a command line,
    /// a server's answer and an app each say in their own terms (a flag, a command, a
    /// setting). The ``message`` says what went wrong, never which of these to use.
    public var remedy: CacheError.Remedy?

    /// Creates an error.
    public init(_ code: Code, _ message: String, underlyingError: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlyingError = underlyingError
    }

    /// Creates an error with what can be done about it.
    public init(_ code: Code, _ message: String, remedy: CacheError.Remedy) {
        self.init(code, message)
        self.remedy = remedy
    }

    public var description: String {
        if let underlyingError { return "\(message) (\(underlyingError))" }
        return message
    }
}

extension CacheError {
    /// What can be done about an error or a waiting download, as data (``CacheError/remedy``,
    /// ``DownloadJob/remedy``): the library names the action and what it is about; whoever
    /// shows it to a user words it (the command line names its flag or command, an app its
    /// setting).
    public struct Remedy: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The action. A struct, so that a new one breaks no one's `switch`.
        public struct Action: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
            public let rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }

            /// Unpin something, or raise the pinned quota (``CacheStore/Configuration/pinnedQuota``).
            public static let raisePinnedQuota = Action(rawValue: "raise-pinned-quota")
            /// Free disk space, or lower the free space the cache keeps (``CacheStore/Configuration/minFreeDiskBytes``).
            public static let freeDiskSpace = Action(rawValue: "free-disk-space")
            /// See which download jobs there are (``DownloadQueue/jobs``).
            public static let listJobs = Action(rawValue: "list-jobs")
            /// Resume the job ``CacheError/Remedy/job`` to fetch what it misses.
            public static let resumeJob = Action(rawValue: "resume-job")
            /// Pin the asset first: only what is wholly stored can be written out.
            public static let pinFirst = Action(rawValue: "pin-first")
            /// Export it as it is stored (a file as the file, an asset as a folder of its
            /// resources and playlists) rather than as one movie file.
            public static let exportAsStored = Action(rawValue: "export-as-stored")
            /// Pin it into an encrypted store, which keeps HLS keys
            /// (``CacheStore/Configuration/encryptionKey``).
            public static let pinIntoEncryptedStore = Action(rawValue: "pin-into-encrypted-store")
            /// Let the job ``CacheError/Remedy/job`` download on any network (``DownloadRules/network``).
            public static let allowAnyNetwork = Action(rawValue: "allow-any-network")
            /// Let the job download on any power (`--power any`).
            public static let allowAnyPower = Action(rawValue: "allow-any-power")

            public var description: String { rawValue }
        }

        public var action: Action
        /// The download job it is about, if any.
        public var job: String?

        public init(_ action: Action, job: String? = nil) {
            self.action = action
            self.job = job
        }

        /// `action` or `action; job=ID`: how a server's answer carries it (`X-MediaCache-Remedy`).
        public var description: String { job.map { "\(action); job=\($0)" } ?? action.rawValue }

        /// Reads ``description``'s form; `nil` for an empty text.
        public init?(parsing text: String) {
            let parts = text.split(separator: ";", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let first = parts.first, !first.isEmpty, first.count <= 64 else { return nil }
            action = Action(rawValue: first)
            job = parts.dropFirst().first.flatMap { $0.hasPrefix("job=") ? String($0.dropFirst(4).prefix(64)) : nil }
        }
    }
}

extension CacheError {
    /// An error carrying the origin's own answer (see ``OriginAnswer``).
    public init(answer: OriginAnswer, url: String) {
        self.init(.originAnswered, "\(url.prefix(200)) answered \(answer.status) \(answer.reason).")
        originAnswer = answer
    }

    /// Whether the origin could not serve now: unreachable, too slow, or a `5xx` answer. A
    /// download resumes after such a failure, and a stale copy may stand in for the answer.
    public var isOriginFailure: Bool {
        code == .originUnavailable || code == .originTimedOut || (originAnswer?.isServerError ?? false)
    }
}
