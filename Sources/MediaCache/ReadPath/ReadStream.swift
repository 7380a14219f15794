public import NIOCore
import Synchronization

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

    /// How many bytes so far came from the cache and how many from the origin.
    public var statistics: ReadStatistics {
        session.statistics
    }

    /// Stops the read: a pending or later `next()` ends with `CancellationError`, and the
    /// origin request nobody else waits on is cancelled.
    public func cancel() {
        session.close()
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(session: session)
    }

    /// The stream's iterator.
    public struct Iterator: AsyncIteratorProtocol {
        let session: ReadSession

        public mutating func next() async throws -> ByteBuffer? {
            try await session.next()
        }
    }
}

/// Where a read's bytes came from.
public struct ReadStatistics: Sendable, Hashable {
    /// Bytes that were already cached when the read reached them.
    public var bytesFromCache: Int64 = 0
    /// Bytes the read had to wait for from the origin (its own download or a shared one).
    public var bytesFromOrigin: Int64 = 0
    /// How many times the read waited for the origin with nothing to give.
    public var stalls = 0

    /// Creates empty statistics.
    public init() {}
}
