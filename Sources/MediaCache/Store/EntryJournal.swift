// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// The entries' records in one file (`entries/.journal`), appended to at each commit: a frame
/// per record written or removed, each framed by its length and a CRC-32C, so a frame cut short
/// by a crash (or a failed write) is found and the file read up to it. The last frame of a name
/// wins. A record per file cost a new inode per entry (on ext4, about a fifth of a cold miss's
/// CPU time); the journal costs one append per commit.
///
/// The file is rewritten with the live frames alone (beside, then renamed over) when it has
/// grown to twice its size after the last rewrite (at least 4 MiB); at open, a cut tail is
/// dropped before anything is appended after it.
final class EntryJournal: Sendable {
    let path: String
    /// Told of the file when it is made (``CacheStore/Configuration/markCreated``).
    let markCreated: (@Sendable (URL) -> Void)?
    /// The size past which the next append rewrites the file.
    private let rewriteAt = Mutex<Int64>(minimumRewrite)

    static let minimumRewrite: Int64 = 4 << 20
    /// The largest frame read (a record is a few KiB; more is damage).
    static let maximumFrame = 4 << 20
    /// The largest journal read (past it, none is read: its entries are forgotten on a
    /// rebuild, never served wrong).
    static let maximumSize: Int64 = 1 << 30

    init(path: String, markCreated: (@Sendable (URL) -> Void)?) {
        self.path = path
        self.markCreated = markCreated
    }

    /// Whether the file is missing or empty.
    var isEmpty: Bool {
        var status = stat()
        return stat(path, &status) != 0 || status.st_size == 0
    }

    /// One record's frame, or a removal's (`payload` `nil`).
    struct Frame: Equatable {
        var name: String
        var payload: Data?
    }

    /// The frames of `frames`, encoded: `[length][CRC-32C][kind][name length][name][payload]`,
    /// the numbers big-endian, length and checksum over what follows them.
    static func encode(_ frames: [Frame]) -> Data {
        var data = Data()
        for frame in frames {
            var body = Data([frame.payload == nil ? 2 : 1])
            let name = Data(frame.name.utf8)
            body.append(contentsOf: [UInt8(name.count >> 8), UInt8(name.count & 0xFF)])
            body.append(name)
            if let payload = frame.payload { body.append(payload) }
            let checksum = body.withUnsafeBytes { CRC32C.checksum($0) }
            for value in [UInt32(body.count), checksum] {
                withUnsafeBytes(of: value.bigEndian) { data.append(contentsOf: $0) }
            }
            data.append(body)
        }
        return data
    }

    /// The frames `data` holds, in order, and how many of its bytes they span: reading stops at
    /// the first frame that is cut short or fails its checksum.
    static func decode(_ data: Data) -> (frames: [Frame], validLength: Int) {
        var frames: [Frame] = []
        var offset = data.startIndex
        func number(at index: Data.Index) -> UInt32 {
            data[index..<index + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        while data.endIndex - offset >= 8 {
            let length = Int(number(at: offset))
            guard length >= 3, length <= maximumFrame, data.endIndex - offset - 8 >= length else { break }
            let body = data[(offset + 8)..<(offset + 8 + length)]
            guard body.withUnsafeBytes({ CRC32C.checksum($0) }) == number(at: offset + 4) else { break }
            let kind = body[body.startIndex]
            let nameLength = Int(body[body.startIndex + 1]) << 8 | Int(body[body.startIndex + 2])
            let nameStart = body.startIndex + 3
            guard kind == 1 || kind == 2, body.endIndex - nameStart >= nameLength,
                let name = String(data: body[nameStart..<(nameStart + nameLength)], encoding: .utf8)
            else { break }
            let payload = kind == 1 ? Data(body[(nameStart + nameLength)...]) : nil
            frames.append(Frame(name: name, payload: payload))
            offset += 8 + length
        }
        return (frames, offset - data.startIndex)
    }

    /// Appends `frames` in one write; a write that fails or falls short is cut off again, so
    /// what follows it is read. Rewrites the file when it has grown past its bound.
    func append(_ frames: [Frame]) {
        guard !frames.isEmpty else { return }
        let existed = access(path, F_OK) == 0
        let descriptor = openDescriptor(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return }
        if !existed { markCreated?(URL(fileURLWithPath: path)) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            closeDescriptor(descriptor)
            return
        }
        let written = writeAll(Self.encode(frames), to: descriptor)
        if !written { _ = ftruncate(descriptor, status.st_size) }
        var after = stat()
        let size = fstat(descriptor, &after) == 0 ? Int64(after.st_size) : 0
        closeDescriptor(descriptor)
        if size > rewriteAt.withLock({ $0 }) { rewrite() }
    }

    /// Every live frame (the last of each name, removals dropped), in the order they were last
    /// written; a cut tail is dropped from the file, and a file past its bound is rewritten.
    func load() -> [Frame] {
        guard let data = Self.read(path) else { return [] }
        let (frames, validLength) = Self.decode(data)
        let live = Self.live(frames)
        if validLength < data.count { _ = truncate(path, off_t(validLength)) }
        let size = Int64(validLength)
        if size > rewriteAt.withLock({ $0 }) || size > 2 * Int64(Self.encode(live).count) + Self.minimumRewrite {
            replace(with: live)
        } else {
            rewriteAt.withLock { $0 = max(Self.minimumRewrite, 2 * size) }
        }
        return live
    }

    /// The last frame of each name, removals dropped, ordered as written.
    static func live(_ frames: [Frame]) -> [Frame] {
        var last: [String: Int] = [:]
        for (index, frame) in frames.enumerated() { last[frame.name] = index }
        return frames.enumerated().compactMap { index, frame in
            last[frame.name] == index && frame.payload != nil ? frame : nil
        }
    }

    /// The file rewritten with its live frames.
    private func rewrite() {
        guard let data = Self.read(path) else { return }
        replace(with: Self.live(Self.decode(data).frames))
    }

    /// Writes `frames` beside the file, flushes them to the disk, and renames them over it.
    private func replace(with frames: [Frame]) {
        let temporary = path + ".new"
        let encoded = Self.encode(frames)
        let descriptor = openDescriptor(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return }
        let written = writeAll(encoded, to: descriptor) && fsync(descriptor) == 0
        closeDescriptor(descriptor)
        guard written, rename(temporary, path) == 0 else {
            unlink(temporary)
            return
        }
        markCreated?(URL(fileURLWithPath: path))
        rewriteAt.withLock { $0 = max(Self.minimumRewrite, 2 * Int64(encoded.count)) }
    }

    /// The file's bytes, never through a link; `nil` when there is none or it is past
    /// ``maximumSize`` (its records are then forgotten on a rebuild, never served wrong).
    private static func read(_ path: String) -> Data? { readAll(path, limit: Int(maximumSize)) }
}
