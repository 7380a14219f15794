// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One resource of a rendition a one-file export reads: an init section or a segment (or the
/// part of a file an `EXT-X-BYTERANGE` or DASH range names), how it is encrypted, and its seconds.
struct ExportResource: Equatable {
    var item: PrefetchItem
    var encryption: HLSPlaylist.SegmentEncryption = .none
    var seconds: Double = 0
}

/// The bytes of a rendition's resources in turn, read from the store alone and deciphered
/// where they are encrypted, handed out one resource at a time: a box or packet reader asks
/// for what it needs and never holds more than one piece of the store's read and what it asked.
final class ResourceCursor {
    private let reader: CachingReader
    let resources: [ExportResource]
    /// Each AES-128 key's bytes by its URL.
    private let keys: [URL: [UInt8]]
    /// The resource being read (`-1` before the first).
    private(set) var index = -1
    private var stream: ReadStream?
    private var iterator: ReadStream.AsyncIterator?
    private var decryptor: SegmentDecryptor?
    private var buffer: [UInt8] = []
    private var consumed = 0
    private var ended = true
    /// Where the next byte handed out lies in its resource's file.
    private(set) var position: Int64 = 0

    init(reader: CachingReader, resources: [ExportResource], keys: [URL: [UInt8]]) {
        self.reader = reader
        self.resources = resources
        self.keys = keys
    }

    deinit { stream?.cancel() }

    var current: ExportResource? { resources.indices.contains(index) ? resources[index] : nil }

    /// Moves to the next resource; `false` when there is none.
    func advance() async throws -> Bool {
        stream?.cancel()
        (stream, iterator, decryptor, buffer, consumed) = (nil, nil, nil, [], 0)
        index += 1
        guard let resource = current else { return false }
        let next = try await reader.read(
            resource.item.url, offset: resource.item.range?.lowerBound ?? 0, length: resource.item.range?.length,
            as: .own(.export))
        stream = next
        iterator = next.makeAsyncIterator()
        position = next.range.lowerBound
        ended = false
        if case .aes128(let keyURI, let iv) = resource.encryption {
            guard let key = HLSPlaylist.resolve(keyURI, base: resource.item.url).flatMap({ keys[$0] }) else {
                throw CacheError(.offline, "The key of \(resource.item.url.absoluteString.prefix(200)) is not held.")
            }
            decryptor = try SegmentDecryptor(key: key, iv: iv)
        }
        return true
    }

    /// Bytes available now in the current resource, reading more when none are; empty at its end.
    func next(atMost limit: Int) async throws -> ArraySlice<UInt8> {
        while consumed == buffer.count, !ended { try await fill() }
        let count = min(limit, buffer.count - consumed)
        defer {
            consumed += count
            position += Int64(count)
        }
        return buffer[consumed..<(consumed + count)]
    }

    /// Up to `count` bytes of the current resource (fewer at its end).
    func prefix(_ count: Int) async throws -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(count)
        while result.count < count {
            let piece = try await next(atMost: count - result.count)
            if piece.isEmpty { break }
            result += piece
        }
        return result
    }

    /// Exactly `count` bytes of the current resource.
    /// - Throws: ``MediaParseError`` when it ends first.
    func exactly(_ count: Int) async throws -> [UInt8] {
        let result = try await prefix(count)
        guard result.count == count else { throw MediaParseError("A resource ends inside a box or packet.") }
        return result
    }

    /// Passes over `count` bytes of the current resource (`nil`: the rest of it), writing them
    /// to `output` when given.
    /// - Throws: ``MediaParseError`` when it ends before `count` bytes.
    func pass(_ count: Int64?, to output: ExportOutput? = nil) async throws {
        var left = count ?? .max
        while left > 0 {
            let piece = try await next(atMost: Int(min(left, 1 << 20)))
            if piece.isEmpty {
                guard count == nil else { throw MediaParseError("A resource ends inside a box or packet.") }
                return
            }
            try await output?.write(piece)
            left -= Int64(piece.count)
        }
    }

    /// Whether the current resource has no byte left.
    func atEnd() async throws -> Bool {
        while consumed == buffer.count, !ended { try await fill() }
        return consumed == buffer.count
    }

    private func fill() async throws {
        if consumed > 0 {
            buffer.removeFirst(consumed)
            consumed = 0
        }
        guard let chunk = try await iterator?.next() else {
            ended = true
            if var decryptor {
                buffer += try decryptor.finish()
                self.decryptor = nil
            }
            return
        }
        let bytes = chunk.readableBytesView
        if var decryptor {
            buffer += try decryptor.decrypt(bytes)
            self.decryptor = decryptor
        } else {
            buffer += bytes
        }
    }
}

/// The file a one-file export writes: first under a hidden name beside it, moved to its name
/// only once whole (never over a file that is there), and removed when the export fails.
/// Written in large pieces, off the cooperative pool.
final class ExportOutput {
    let path: String
    private let temporary: String
    private let descriptor: Int32
    private var pending: [UInt8] = []
    /// Bytes written so far (the next byte's offset).
    private(set) var offset: Int64 = 0
    private static let flushSize = 1 << 20

    /// - Throws: ``CacheError`` `.ioFailure` when `path` exists or its folder cannot be written.
    init(path: String) async throws {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent().appendingPathComponent(
            ".\(url.lastPathComponent).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).partial"
        ).path
        guard !FileManager.default.fileExists(atPath: path) else {
            throw CacheError(.ioFailure, "\(path) exists already; choose a new path.")
        }
        descriptor = try await BlockingIO.runToCompletion {
            let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
            guard descriptor >= 0 else {
                throw CacheError(.ioFailure, "Cannot write beside \(path): \(String(cString: strerror(errno))).")
            }
            return descriptor
        }
        (self.path, self.temporary) = (path, temporary)
    }

    func write(_ bytes: some Collection<UInt8>) async throws {
        pending.append(contentsOf: bytes)
        offset += Int64(bytes.count)
        if pending.count >= Self.flushSize { try await flush() }
    }

    /// Writes `bytes` at `at`, before what is pending (a header filled in at the end).
    func write(_ bytes: [UInt8], at: Int64) async throws {
        try await flush()
        try await Self.put(bytes[...], at: at, descriptor: descriptor, path: path)
    }

    func flush() async throws {
        guard !pending.isEmpty else { return }
        let bytes = pending
        pending.removeAll(keepingCapacity: true)
        try await Self.put(bytes[...], at: offset - Int64(bytes.count), descriptor: descriptor, path: path)
    }

    /// Writes what is pending, and gives the file its name.
    /// - Throws: ``CacheError`` `.ioFailure`; a file at `path` made meanwhile is not replaced.
    func finish() async throws {
        try await flush()
        let (descriptor, temporary, path) = (descriptor, temporary, path)
        try await BlockingIO.runToCompletion {
            guard fsync(descriptor) == 0, link(temporary, path) == 0 else {
                throw CacheError(.ioFailure, "Cannot write \(path): \(String(cString: strerror(errno))).")
            }
            unlink(temporary)
            close(descriptor)
        }
    }

    /// Closes and removes what was written.
    func discard() async {
        let (descriptor, temporary) = (descriptor, temporary)
        _ = try? await BlockingIO.runToCompletion {
            close(descriptor)
            unlink(temporary)
        }
    }

    private static func put(_ bytes: ArraySlice<UInt8>, at offset: Int64, descriptor: Int32, path: String) async throws
    {
        try await BlockingIO.runToCompletion {
            try bytes.withUnsafeBytes { try writeAll($0, at: offset, descriptor: descriptor, path: path) }
        }
    }

    /// Writes all of `buffer` at `offset` of the open file `descriptor` (of `path`, for the
    /// error); a blocking call, for a thread made for them.
    /// - Throws: ``CacheError`` `.ioFailure` saying why it cannot.
    static func writeAll(_ buffer: UnsafeRawBufferPointer, at offset: Int64, descriptor: Int32, path: String) throws {
        var done = 0
        while done < buffer.count {
            let written = pwrite(
                descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                throw CacheError(.ioFailure, "Cannot write \(path): \(String(cString: strerror(errno))).")
            }
            done += written
        }
    }
}
