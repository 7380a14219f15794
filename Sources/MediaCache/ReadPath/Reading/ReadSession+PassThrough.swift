// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import Synchronization

extension ReadSession {
    /// An origin body a read takes straight from the origin (see `CachingReader.passThrough`).
    /// Only the session's iterator uses it, one call at a time.
    final class PassThrough: @unchecked Sendable {
        private var iterator: any AsyncIteratorProtocol<ByteBuffer, any Error>
        /// The resource offset of the next byte the body gives.
        var offset: Int64
        /// The new entry the body is written to as it passes, while every byte so far is in
        /// it; whoever takes it (the end of the body, a failed write, the read's close) ends
        /// the write.
        private let writer: Mutex<CacheEntryHandle?>

        init(body: any AsyncSequence<ByteBuffer, any Error> & Sendable, offset: Int64, writer: CacheEntryHandle?) {
            iterator = body.makeAsyncIterator()
            self.offset = offset
            self.writer = Mutex(writer)
        }

        var currentWriter: CacheEntryHandle? { writer.withLock { $0 } }

        func takeWriter() -> CacheEntryHandle? {
            writer.withLock { writer in
                defer { writer = nil }
                return writer
            }
        }

        func next() async throws -> ByteBuffer? {
            try await iterator.next()
        }
    }
}
