// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One entry's data file: bytes written at their own offsets, read back with `pread`.
///
/// The calls block, so callers run them on a thread pool (``BlockingIO``), never on an
/// actor's executor or an event loop.
// @unchecked Sendable: the only state is an immutable descriptor; pread, pwrite and
// fdatasync on one descriptor are safe from several threads at once.
final class EntryFile: @unchecked Sendable {
    let path: String
    /// Open for as long as the object lives (closed by `deinit` only).
    let descriptor: CInt

    /// Opens (creating if needed) the file at `path` for reading and writing, never through a
    /// symbolic link (one planted in the folder would point writes elsewhere).
    init(path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw CacheError(
                .ioFailure,
                "Cannot open the data file \(path): \(String(cString: strerror(errno))). Check the cache folder's permissions."
            )
        }
        self.path = path
        self.descriptor = fd
    }

    /// Opens the file at `path` if it exists; else throws, `errno` saying why (`ENOENT`).
    init(existingAt path: String) throws {
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw CacheError(.notCached, "No data file at \(path).") }
        self.path = path
        self.descriptor = fd
    }

    deinit {
        close(descriptor)
    }

    /// Writes all of `buffer`'s readable bytes at `offset`.
    func write(_ buffer: ByteBuffer, at offset: Int64) throws {
        try buffer.withUnsafeReadableBytes { try write($0, at: offset) }
    }

    /// Writes all of `bytes` at `offset`, in one `pwritev` where the system takes it whole.
    func write(_ bytes: GatheredBytes, at offset: Int64) throws {
        if bytes.buffers.count == 1 { return try write(bytes.buffers[0], at: offset) }
        // Each piece's memory stays valid while its storage is retained (NIO's sanctioned way
        // to hold a buffer's bytes outside a closure); released once written.
        let pieces = bytes.buffers.map { buffer in
            buffer.withUnsafeReadableBytesWithStorageManagement { piece, storage in
                (piece, storage.retain())
            }
        }
        defer { for (_, storage) in pieces { storage.release() } }
        try writePieces(pieces.map(\.0), at: offset)
    }

    /// Writes `pieces`, one after another, at `offset`: one `pwritev` of the first `IOV_MAX`
    /// (1,024) of them, then, after a short write, what is left of each piece with `pwrite`.
    private func writePieces(_ pieces: [UnsafeRawBufferPointer], at offset: Int64) throws {
        let vectors = pieces.prefix(1024).map {
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress!), iov_len: $0.count)
        }
        // One call that wrote something (or none at all), with `repeatCall`'s errors.
        var written = try repeatCall(count: 1, doing: "Writing to") { _ in
            pwritev(descriptor, vectors, CInt(vectors.count), off_t(offset))
        }
        var start = offset
        for piece in pieces {
            defer { start += Int64(piece.count) }
            guard written < piece.count else {
                written -= piece.count
                continue
            }
            try write(UnsafeRawBufferPointer(rebasing: piece[written...]), at: start + Int64(written))
            written = 0
        }
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        let written = try repeatCall(count: bytes.count, doing: "Writing to") { done in
            pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
        }
        guard written == bytes.count else {
            throw CacheError(
                .ioFailure, "Writing to the data file \(path) stopped after \(written) of \(bytes.count) bytes.")
        }
    }

    /// Reads exactly `length` bytes at `offset` into a new buffer.
    func read(at offset: Int64, length: Int, allocator: ByteBufferAllocator) throws -> ByteBuffer {
        var buffer = allocator.buffer(capacity: length)
        try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { bytes in
            guard try read(at: offset, into: UnsafeMutableRawBufferPointer(rebasing: bytes[0..<length])) == length
            else {
                throw CacheError(
                    .ioFailure, "The data file \(path) is shorter than its index says; the entry will be dropped.")
            }
            return length
        }
        return buffer
    }

    /// Reads up to `bytes.count` bytes at `offset`; returns how many there were before the
    /// file's end.
    func read(at offset: Int64, into bytes: UnsafeMutableRawBufferPointer) throws -> Int {
        try repeatCall(count: bytes.count, doing: "Reading") { done in
            pread(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
        }
    }

    /// Calls `call` (a `pread` or `pwrite` of the bytes after the first `done`) until `count`
    /// bytes are done or it returns 0 (the file's end), again after `EINTR`; returns the
    /// bytes done.
    private func repeatCall(count: Int, doing operation: String, _ call: (_ done: Int) -> Int) throws -> Int {
        var done = 0
        while done < count {
            let n = call(done)
            if n < 0 {
                if errno == EINTR { continue }
                throw CacheError(
                    .ioFailure, "\(operation) the data file \(path) failed: \(String(cString: strerror(errno))).")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Forces written bytes to the disk.
    ///
    /// On Apple platforms `fsync` hands the bytes to the drive, which may still hold them in
    /// its cache across a power loss; `F_FULLFSYNC` asks it to write them to the medium, and
    /// where a file system does not support it, `fsync` is the fallback.
    func synchronize() throws {
        #if canImport(Darwin)
            if fcntl(descriptor, F_FULLFSYNC) == 0 { return }
            let result = fsync(descriptor)
        #else
            let result = fdatasync(descriptor)
        #endif
        guard result == 0 else {
            throw CacheError(
                .ioFailure, "Flushing the data file \(path) to disk failed: \(String(cString: strerror(errno))).")
        }
    }
}

/// Runs blocking file calls on NIO's shared thread pool, off the cooperative executor.
package enum BlockingIO {
    /// Runs `body`; a cancelled task's call that has not started yet is dropped (for reads).
    package static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(body)
    }

    /// Runs `body` even if the calling task is cancelled meanwhile: for writes, whose bytes
    /// readers may already have taken from memory (they must land, and be claimed, once
    /// fetched), and for opening the file they go to.
    static func runToCompletion<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            NIOThreadPool.singleton.submit { state in
                guard case .active = state else {
                    continuation.resume(throwing: CacheError(.ioFailure, "The I/O thread pool is shut down."))
                    return
                }
                continuation.resume(with: Result(catching: body))
            }
        }
    }
}

// Free functions so that types with their own `open`/`close` methods can reach the system calls.
func openDescriptor(_ path: String, _ flags: CInt) -> CInt {
    open(path, flags, 0o600)
}

func closeDescriptor(_ descriptor: CInt) {
    _ = close(descriptor)
}

/// Writes all of `data` to `descriptor`; `false` when a write fails.
func writeAll(_ data: Data, to descriptor: CInt) -> Bool {
    data.withUnsafeBytes { raw -> Bool in
        var offset = 0
        while offset < raw.count {
            let count = write(descriptor, raw.baseAddress! + offset, raw.count - offset)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }
}

/// The bytes of the file at `path`, never through a link; `nil` when it cannot be opened or
/// read, or holds more than `limit` bytes.
func readAll(_ path: String, limit: Int) -> Data? {
    let descriptor = openDescriptor(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    guard descriptor >= 0 else { return nil }
    defer { closeDescriptor(descriptor) }
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    while data.count <= limit {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { return count == 0 ? data : nil }
        data.append(contentsOf: buffer[..<count])
    }
    return nil
}
