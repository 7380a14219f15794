// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The bytes of one read, in order, as an async sequence of chunks.
///
/// Iterate it once. Stopping early (or dropping it) releases the origin request that no
/// other reader waits on; the bytes received so far stay cached.
public struct ReadStream: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    /// The resource's content information, as known when the read started.
    public let metadata: ContentMetadata
    /// The bytes this stream yields.
    public let range: ByteRange
    let session: ReadSession
    /// Whether the origin answered with a part of a resource whose length it does not say
    /// (`206` with `bytes a-b/*`, a resource that grows while it is read): ``range`` is that
    /// part, and the body may end before its end.
    package var isPartOfUnknownLength = false

    /// How many bytes so far came from the cache and how many from the origin.
    package var statistics: ReadStatistics {
        session.statistics
    }

    /// Stops the read: a pending or later `next()` ends with `CancellationError`, and the
    /// origin request nobody else waits on is cancelled.
    public func cancel() {
        session.close()
    }

    /// The next part of the read, for servers that can send a file region with `sendfile`:
    /// cached bytes come as a region of the cache's data file (``StoredRegion``), other bytes
    /// as buffers. `nil` at the end. Use either this or the iterator, not both.
    package func nextPart() async throws -> ReadPart? {
        try await session.next(fileRegions: true)
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(session: session)
    }

    /// The stream's iterator.
    public struct Iterator: AsyncIteratorProtocol {
        let session: ReadSession

        public mutating func next() async throws -> ByteBuffer? {
            switch try await session.next(fileRegions: false) {
            case .bytes(let buffer)?: return buffer
            case .file?: preconditionFailure("A byte stream got a file region.")
            case nil: return nil
            }
        }
    }
}

/// A part of a read (see ``ReadStream/nextPart()``).
package enum ReadPart: Sendable {
    /// Bytes in memory.
    case bytes(ByteBuffer)
    /// Stored bytes, in a data file.
    case file(StoredRegion)
}

/// Stored bytes at `range` of an entry's data file, to send from ``descriptor`` with
/// `sendfile`. The descriptor is the store's own, open for as long as a region of its file
/// is held: send from it while holding the region, never close it. (Handing out a
/// duplicate instead cost two system calls per cached range.)
package struct StoredRegion: Sendable {
    let file: EntryFile
    package let range: ByteRange

    package var descriptor: CInt { file.descriptor }
}

/// Where a read's bytes came from.
package struct ReadStatistics: Sendable, Hashable {
    /// Bytes that were already cached when the read reached them.
    package var bytesFromCache: Int64 = 0
    /// Bytes the read had to wait for from the origin (its own download or a shared one).
    package var bytesFromOrigin: Int64 = 0
    /// How many times the read waited for the origin with nothing to give.
    package var stalls = 0
    /// How many times an origin request this read waited on was resumed after a failure
    /// (a dropped connection, a body that ended early).
    package var originRetries = 0

    /// Creates empty statistics.
    package init() {}
}
