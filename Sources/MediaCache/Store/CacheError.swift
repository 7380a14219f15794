/// An error from the cache store.
///
/// The code says what went wrong; ``message`` says it in words with what to do, and
/// ``underlyingError`` holds the cause (an I/O or database error) when there is one.
public struct CacheError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: Sendable, Hashable {
        /// The store's folder could not be created or opened.
        case cannotOpenStore
        /// Another process holds the store's folder.
        case storeLocked
        /// The store has been closed.
        case storeClosed
        /// Reading or writing an entry's data file failed (for example, the disk is full).
        case ioFailure
        /// The index could not be read or written.
        case indexFailure
        /// A read asked for bytes that are not cached.
        case notCached
        /// A write or read reached outside the resource's known length, or had a negative offset.
        case outOfBounds
        /// The entry was removed or replaced by a new version while this handle was open.
        case entryInvalidated
        /// Storing the bytes would exceed the size limit even after evicting what can be evicted.
        case capacityExceeded
        /// The origin could not be reached, or its connection failed and could not be resumed.
        case originUnavailable
        /// The URL may not be fetched (its scheme, its host is not on the allow-list, …).
        case originNotAllowed
        /// The origin did not answer in time.
        case originTimedOut
        /// The origin answered with an error status, or with something that cannot be used
        /// (a range other than the one asked for, no length).
        case originRejected
        /// The resource changed at the origin while it was being read; the bytes already
        /// given are all of the old version. Read again to get the new version.
        case resourceChanged
        /// The requested range starts at or beyond the end of the resource.
        case rangeNotSatisfiable
    }

    /// What went wrong.
    public var code: Code
    /// A sentence saying what went wrong and what to do.
    public var message: String
    /// The error that caused this one, if any.
    public var underlyingError: (any Error)?
    /// The resource's total length, with `.rangeNotSatisfiable`.
    public var resourceLength: Int64?

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
