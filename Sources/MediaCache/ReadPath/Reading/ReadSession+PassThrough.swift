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

extension ReadSession {
    /// The next chunk of a body streamed through, cut to the read's range; `nil` where the
    /// body or the range ends.
    func next(from passThrough: PassThrough, cursor: Int64) async throws -> ReadPart? {
        while let chunk = try await passThrough.next() {
            let chunkStart = passThrough.offset
            passThrough.offset += Int64(chunk.readableBytes)
            if let writer = passThrough.currentWriter {
                do {
                    try await writer.write(chunk, at: chunkStart)
                } catch {
                    // Past its share of the store, or the disk refused: it streams on uncached.
                    context.configuration.logger.warning(
                        "Cannot store an answer without a length; streaming it uncached",
                        metadata: ["url": "\(url.absoluteString.prefix(200))", "error": "\(error)"])
                    if let taken = passThrough.takeWriter() { finishWriting(taken, length: nil) }
                }
            }
            let upper = min(passThrough.offset, range.upperBound)
            guard upper > cursor else { continue }  // before the read's offset
            let bytes = chunk.getSlice(at: chunk.readerIndex + Int(cursor - chunkStart), length: Int(upper - cursor))!
            advance(to: upper)
            return .bytes(bytes)
        }
        if let writer = passThrough.takeWriter() { finishWriting(writer, length: passThrough.offset) }
        close()
        return nil
    }

    /// Ends a pass-through write: with the body's `length` the entry is complete; without
    /// (the body did not end, or a write failed) it is removed, since bytes of a resource
    /// whose length is unknown cannot serve a later read. The resource is then free for
    /// another writer.
    func finishWriting(_ writer: CacheEntryHandle, length: Int64?) {
        let context = context
        let key = key
        if let length, var metadata = try? writer.metadata(),
            (try? writer.spans())?.contains(ByteRange(0, length)) == true
        {
            metadata.length = length
            _ = try? writer.updateMetadata(metadata)
            writer.close()
            context.passThroughWriters.withLock { _ = $0.remove(key) }
            return
        }
        writer.close()
        context.owned.run {
            try? await context.store.remove(key)
            context.passThroughWriters.withLock { _ = $0.remove(key) }
        }
    }

}
