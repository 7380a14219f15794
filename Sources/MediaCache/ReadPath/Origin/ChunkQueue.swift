// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOCore
import Synchronization

/// The chunks read from an origin body and not yet stored, between the transfer's two
/// stages. The reader pushes (and waits while `limit` bytes are queued); the writer takes
/// everything queued at once.
final class ChunkQueue: Sendable {
    private struct State {
        var chunks: [ByteBuffer] = []
        var bytes = 0
        var isFinished = false
        var isStopped = false
        var taker: CheckedContinuation<Void, Never>?
        var pusher: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    private let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Queues `chunk`; waits while the queue is full. `false` once the writer has stopped.
    func push(_ chunk: ByteBuffer) async -> Bool {
        while true {
            let (accepted, wake) = state.withLock { state -> (Bool?, CheckedContinuation<Void, Never>?) in
                if state.isStopped { return (false, nil) }
                guard state.bytes < limit else { return (nil, nil) }
                state.chunks.append(chunk)
                state.bytes += chunk.readableBytes
                defer { state.taker = nil }
                return (true, state.taker)
            }
            wake?.resume()
            if let accepted { return accepted }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    guard !state.isStopped, state.bytes >= limit else { return true }
                    state.pusher = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    /// No more chunks come; the writer takes what is queued and then ends.
    func finish() {
        let wake = state.withLock { state in
            state.isFinished = true
            defer { state.taker = nil }
            return state.taker
        }
        wake?.resume()
    }

    /// The writer stops: pushes fail from now on.
    func stop() {
        let wake = state.withLock { state in
            state.isStopped = true
            state.chunks = []
            state.bytes = 0
            defer { state.pusher = nil }
            return state.pusher
        }
        wake?.resume()
    }

    /// Everything queued, in the order pushed (at least one chunk); waits while the queue is
    /// empty. `nil` at the end.
    func takeAll() async -> [ByteBuffer]? {
        while true {
            let (taken, isOver, wake) = state.withLock {
                state -> ([ByteBuffer], Bool, CheckedContinuation<Void, Never>?) in
                let taken = state.chunks
                guard !taken.isEmpty else { return ([], state.isFinished || state.isStopped, nil) }
                state.chunks = []
                state.bytes = 0
                defer { state.pusher = nil }
                return (taken, false, state.pusher)
            }
            wake?.resume()
            if !taken.isEmpty { return taken }
            if isOver { return nil }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    guard state.chunks.isEmpty, !state.isFinished, !state.isStopped else { return true }
                    state.taker = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }
}
