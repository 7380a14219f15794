// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import Logging
import NIOCore
import Synchronization

/// Pinned downloads that go on while the app does not run: a ``DownloadQueue`` with these
/// (``DownloadQueue/Configuration/backgroundTransfers``) hands every piece a pinned resource
/// still misses to a system transfer session (`BackgroundTransferSession`) as a ranged
/// download tagged with its job, entry and range (`BackgroundTransfer`), and the session
/// hands each finished file back to `importFinished(taskDescription:status:fields:file:)`,
/// which checks it and stores its bytes, and says when each task ended
/// (`transferEnded(taskDescription:error:)`). At launch the session's tasks are reconciled with
/// the jobs: a task for a job that is gone, paused or done is cancelled, a piece no task
/// fetches gets one.
///
/// Create it with the reader before the session (a relaunched app's session delivers the
/// files the system finished as soon as it exists), then `connect(_:)` the session.
public final class BackgroundTransfers: Sendable {
    /// The read path whose store the files go to.
    public let reader: CachingReader
    /// The size of the pieces a resource is asked for in.
    public let pieceSize: Int64
    let logger: Logger

    /// What happened to a transfer, for the job's run.
    enum Event: Sendable {
        case imported(BackgroundTransfer)
        case failed(BackgroundTransfer, String)
    }

    private struct State {
        var session: (any BackgroundTransferSession)?
        /// Each job's run, told only of its own transfers (so others' cannot crowd them out).
        var subscribers: [UInt64: (job: String, continuation: AsyncStream<Event>.Continuation)] = [:]
        var next: UInt64 = 0
        /// What became of the file of a task not yet ended: stored (`nil`), or refused, and why.
        var files: [BackgroundTransfer: String?] = [:]
    }

    private let state = Mutex(State())

    /// Transfers for `reader`'s store, in pieces of `pieceSize` bytes (at least 64 KiB).
    public init(reader: CachingReader, pieceSize: Int64 = 8 << 20, logger: Logger? = nil) {
        self.reader = reader
        self.pieceSize = max(64 << 10, pieceSize)
        self.logger = logger ?? reader.configuration.logger
    }

    /// The session the transfers run on.
    @_spi(Adapter) public func connect(_ session: any BackgroundTransferSession) {
        state.withLock { $0.session = session }
    }

    var session: (any BackgroundTransferSession)? { state.withLock { $0.session } }

    /// The events of `job`'s transfers from now on; the stream ends when the caller's task is
    /// cancelled.
    func events(of job: String) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(256))
        let id = state.withLock { state in
            defer { state.next += 1 }
            state.subscribers[state.next] = (job, continuation)
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    private func publish(_ event: Event) {
        let job =
            switch event {
            case .imported(let transfer), .failed(let transfer, _): transfer.job
            }
        state.withLock { state in
            for subscriber in state.subscribers.values where subscriber.job == job {
                subscriber.continuation.yield(event)
            }
        }
    }

    /// Stores the file a session downloaded for the task described `taskDescription`, when
    /// the answer (`status`, `fields`) is what was asked for and of the entry's version: its
    /// bytes are written into the entry and committed before this returns, so the session
    /// may delete the file. Returns whether they were stored; a file refused is logged at
    /// warning with the reason and counted (`mediacache_background_transfers_total`), and its
    /// piece is asked for again. The job's run hears of either when the task ends
    /// (`transferEnded(taskDescription:error:)`).
    @discardableResult
    @_spi(Adapter) public func importFinished(
        taskDescription: String?, status: Int, fields: [ContentMetadata.HeaderField], file: URL
    )
        async -> Bool
    {
        guard let transfer = taskDescription.flatMap(BackgroundTransfer.init(taskDescription:)) else {
            reject(nil, "its task carries no MediaCache description (\(taskDescription?.prefix(80) ?? "none"))")
            return false
        }
        let store = reader.store
        do {
            let path = file.path
            let length = try await BlockingIO.run {
                try (FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? -1
            }
            let verdict = BackgroundImport.verdict(for: transfer, status: status, fields: fields, fileLength: length)
            guard case .store(let range, let metadata) = verdict else {
                if case .reject(let reason) = verdict { reject(transfer, reason) }
                return false
            }
            let handle = try store.openEntry(transfer.key)
            defer { handle.close() }
            let known = try handle.metadata()
            if let lie = known.contradiction(with: metadata) {
                reject(transfer, "the origin \(lie)")
                return false
            }
            if !known.isSameVersion(as: metadata), metadata.length != range.length, !(try handle.spans().isEmpty) {
                // A part of another version never replaces the one stored; the piece is asked for
                // again with `If-Range`, so a changed resource comes whole.
                reject(transfer, "a part of another version than the one stored (\(metadata.etag ?? "no ETag"))")
                return false
            }
            if try handle.updateMetadata(metadata) {
                logger.warning(
                    "A background transfer brought another version of a pinned resource: the old bytes were dropped",
                    metadata: ["transfer": "\(transfer)"])
            }
            try await Self.copy(file, range: range, into: handle)
            try await store.flush()
            CacheMetrics.backgroundTransfer(.imported)
            logger.info(
                "Stored a background transfer", metadata: ["transfer": "\(transfer)", "bytes": "\(range.length)"])
            state.withLock { $0.files[transfer] = .some(nil) }
            return true
        } catch {
            reject(transfer, "\(error)")
            return false
        }
    }

    /// A task ended, with `error` when it failed (the origin or the network; cancelled tasks
    /// are not said): call it once the session no longer lists the task. A failure, or a file
    /// `importFinished(taskDescription:status:fields:file:)` refused, is its job's to decide
    /// on (the piece is asked for again, three failures fail the job); a failure is logged
    /// and counted.
    @_spi(Adapter) public func transferEnded(taskDescription: String?, error: String?) {
        guard let transfer = taskDescription.flatMap(BackgroundTransfer.init(taskDescription:)) else { return }
        // Told once the task is gone from the session's list: its job's run, which reads the
        // list and then what is stored, never asks for a piece whose file is being stored.
        let file = state.withLock { $0.files.removeValue(forKey: transfer) }
        if let error {
            CacheMetrics.backgroundTransfer(.failed)
            logger.warning(
                "A background transfer failed", metadata: ["transfer": "\(transfer)", "reason": "\(error.prefix(300))"])
            publish(.failed(transfer, error))
        } else if case .some(.some(let refusal)) = file {
            publish(.failed(transfer, refusal))
        } else if case .some(.none) = file {
            publish(.imported(transfer))
        }
    }

    private func reject(_ transfer: BackgroundTransfer?, _ reason: String) {
        CacheMetrics.backgroundTransfer(.rejected)
        logger.warning(
            "Rejected a background transfer's file",
            metadata: ["transfer": "\(transfer.map(String.init(describing:)) ?? "unknown")", "reason": "\(reason)"])
        if let transfer { state.withLock { $0.files[transfer] = .some("its file was refused: \(reason)") } }
    }

    /// Writes `file` (the bytes `range` of the resource) into `handle`, a mebibyte at a time,
    /// read on the blocking pool.
    private static func copy(_ file: URL, range: ByteRange, into handle: CacheEntryHandle) async throws {
        let reading = try await BlockingIO.run { try FileHandle(forReadingFrom: file) }
        defer { try? reading.close() }
        var offset = range.lowerBound
        while offset < range.upperBound {
            let count = Int(min(1 << 20, range.upperBound - offset))
            let data = try await BlockingIO.run { try reading.read(upToCount: count) ?? Data() }
            guard !data.isEmpty else {
                throw CacheError(.ioFailure, "The file of a background transfer ended at \(offset) of \(range).")
            }
            try await handle.write(ByteBuffer(bytes: data), at: offset)
            offset += Int64(data.count)
        }
    }
}
