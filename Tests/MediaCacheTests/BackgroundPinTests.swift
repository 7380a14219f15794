// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

@_spi(Adapter) @testable import MediaCache

/// A system transfer session played by the test: it keeps the tasks it is given, and the
/// test finishes them (with the origin's bytes, or others) when it likes, as the system does
/// while the app is gone.
final class ScriptedTransferSession: BackgroundTransferSession {
    struct State {
        var tasks: [Int: BackgroundTransferRequest] = [:]
        var next = 1
        var started: [BackgroundTransferRequest] = []
        var cancelled: [Int] = []
    }

    let state = Mutex(State())
    private let (changes, changed) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    func tasks() async -> [BackgroundTransferTask] {
        state.withLock {
            $0.tasks.map {
                BackgroundTransferTask(identifier: $0.key, taskDescription: $0.value.transfer.taskDescription)
            }
        }
    }

    func start(_ request: BackgroundTransferRequest) {
        state.withLock { state in
            state.tasks[state.next] = request
            state.next += 1
            state.started.append(request)
        }
        changed.yield()
    }

    func cancel(_ identifier: Int) {
        state.withLock { state in
            if state.tasks.removeValue(forKey: identifier) != nil { state.cancelled.append(identifier) }
        }
        changed.yield()
    }

    /// A task of a job no launch knows (another part of the app, a job removed meanwhile).
    func adoptStray() -> Int {
        let transfer = BackgroundTransfer(job: "00000000", key: CacheKey("x"), range: nil)
        let request = BackgroundTransferRequest(
            transfer: transfer, url: URL(string: "https://x.example/")!, fields: [],
            allowsExpensiveNetworkAccess: false, allowsConstrainedNetworkAccess: false, earliestBeginDate: nil)
        return state.withLock { state in
            defer { state.next += 1 }
            state.tasks[state.next] = request
            return state.next
        }
    }

    /// Waits until `condition` holds of the session.
    func wait(until condition: (State) -> Bool) async {
        var iterator = changes.makeAsyncIterator()
        while !state.withLock({ condition($0) }) { _ = await iterator.next() }
    }

    /// Ends task `id` with `body` (the origin's bytes of its range unless said), answered
    /// `status` with `fields` (a `206` with its `Content-Range` and the origin's ETag unless
    /// said), and hands the file to `transfers`.
    @discardableResult
    func finish(
        _ id: Int, content: DeterministicContent, total: Int64, transfers: BackgroundTransfers,
        body: Data? = nil, fields: [ContentMetadata.HeaderField]? = nil, status: Int = 206
    ) async throws -> Bool {
        let request = try #require(state.withLock { $0.tasks[id] })
        let range = try #require(request.transfer.range)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let bytes = body ?? Data(content.buffer(offset: range.lowerBound, length: Int(range.length)).readableBytesView)
        try bytes.write(to: file)
        let answer =
            fields ?? [
                ContentMetadata.HeaderField(
                    name: "Content-Range", value: "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)"),
                ContentMetadata.HeaderField(name: "ETag", value: "\"v1\""),
            ]
        // As a system session does, the task is listed until its file has been handed over.
        let stored = await transfers.importFinished(
            taskDescription: request.transfer.taskDescription, status: status, fields: answer, file: file)
        state.withLock { _ = $0.tasks.removeValue(forKey: id) }
        transfers.transferEnded(taskDescription: request.transfer.taskDescription, error: nil)
        changed.yield()
        return stored
    }
}

/// Pinned downloads through a system transfer session: every missing piece is a ranged
/// task tagged with its job, entry and range; finished files are checked and stored; a new
/// launch reconciles the session's tasks with the jobs.
@Suite(.stallLimit) struct BackgroundPinTests {
    static let url = URL(string: "https://cdn.example/film.mp4")!
    static let length: Int64 = 2_500_000
    static let content = DeterministicContent(seed: 41)

    struct Setup {
        let harness: ScriptedHarness
        let session = ScriptedTransferSession()
        let transfers: BackgroundTransfers

        init(_ harness: ScriptedHarness) {
            self.harness = harness
            transfers = BackgroundTransfers(reader: harness.reader, pieceSize: 1 << 20)
            transfers.connect(session)
        }

        func queue() throws -> DownloadQueue {
            var configuration = DownloadQueue.Configuration()
            configuration.backgroundTransfers = transfers
            let queue = try DownloadQueue(reader: harness.reader, configuration: configuration)
            queue.start()
            return queue
        }

        func finish(_ id: Int, body: Data? = nil, fields: [ContentMetadata.HeaderField]? = nil, status: Int = 206)
            async throws
            -> Bool
        {
            try await session.finish(
                id, content: BackgroundPinTests.content, total: BackgroundPinTests.length, transfers: transfers,
                body: body, fields: fields, status: status)
        }

        func running() -> [Int] { session.state.withLock { $0.tasks.keys.sorted() } }

        /// A started queue with the film pinned, once the session holds the pin's three tasks.
        func pinned() async throws -> (DownloadQueue, DownloadJob) {
            let queue = try queue()
            let job = try await queue.pin(BackgroundPinTests.url)
            await session.wait { $0.tasks.count == 3 }
            return (queue, job)
        }

        /// Finishes every task with the origin's bytes; the job `id` once it settles.
        func finishAll(_ queue: DownloadQueue, _ id: String) async throws -> DownloadJob? {
            let updates = queue.updates()
            async let settled = settled(updates, id)
            for task in running() { #expect(try await finish(task)) }
            return await settled
        }

        /// The job's state once it settles.
        func settled(_ updates: AsyncStream<DownloadQueue.Update>, _ id: String) async -> DownloadJob? {
            for await update in updates {
                if case .changed(let job) = update, job.id == id, job.state.isSettled { return job }
            }
            return nil
        }

        /// Checks that every byte of the file is stored and is the origin's.
        func expectStored() async throws {
            let handle = try harness.store.openEntry(harness.store.key(for: BackgroundPinTests.url))
            defer { handle.close() }
            let bytes = try await handle.read(ByteRange(0, BackgroundPinTests.length))
            #expect(BackgroundPinTests.content.firstMismatch(in: bytes, at: 0) == nil)
        }
    }

    static func withSetup(_ body: (Setup) async throws -> Void) async throws {
        try await ScriptedHarness.with { harness in
            harness.origin.serve(url, length: length, seed: 41)
            try await body(Setup(harness))
        }
    }

    @Test func aPinIsFetchedBySessionTasksAndStoredPieceByPiece() async throws {
        try await Self.withSetup { setup in
            let (queue, job) = try await setup.pinned()
            let started = setup.session.state.withLock { $0.started }
            #expect(
                started.map { $0.fields.first { $0.name == "Range" }?.value } == [
                    "bytes=0-1048575", "bytes=1048576-2097151", "bytes=2097152-2499999",
                ])
            #expect(started.allSatisfy { $0.url == Self.url && $0.transfer.job == job.id })
            #expect(
                started.allSatisfy {
                    $0.fields.contains(ContentMetadata.HeaderField(name: "If-Range", value: "\"v1\""))
                })
            #expect(started.allSatisfy { !$0.allowsExpensiveNetworkAccess }, "unmetered networks only, by default")
            #expect(try await setup.finishAll(queue, job.id)?.state == .completed)
            try await setup.expectStored()
            #expect(setup.harness.origin.exchanges.isEmpty, "the app itself fetched no byte")
            await queue.shutDown()
        }
    }

    @Test func aFileThatIsNotWhatWasAskedForIsRejectedAndAskedForAgain() async throws {
        try await Self.withSetup { setup in
            let (queue, job) = try await setup.pinned()
            let first = setup.running()[0]
            // Short by a byte, then of another length under the same ETag: neither is stored.
            #expect(try await setup.finish(first, body: Data(count: 100)) == false)
            await setup.session.wait { $0.started.count == 4 }
            let again = try #require(setup.running().last)
            let lie = [
                ContentMetadata.HeaderField(name: "Content-Range", value: "bytes 0-1048575/9999999"),
                ContentMetadata.HeaderField(name: "ETag", value: "\"v1\""),
            ]
            #expect(try await setup.finish(again, fields: lie) == false)
            await setup.session.wait { $0.started.count == 5 }
            #expect(setup.harness.store.spans(for: setup.harness.store.key(for: Self.url)).isEmpty)
            #expect(try await setup.finishAll(queue, job.id)?.state == .completed)
            try await setup.expectStored()
            await queue.shutDown()
        }
    }

    @Test func aChangedResourceComesWholeAndReplacesTheVersionStored() async throws {
        try await Self.withSetup { setup in
            let (queue, job) = try await setup.pinned()
            let tasks = setup.running()
            #expect(try await setup.finish(tasks[0]))
            // The origin changed: a part of the new version is refused, and asked for again
            // with `If-Range`, whose answer is the new version whole.
            let changed = DeterministicContent(seed: 99)
            let part = Data(changed.buffer(offset: 1 << 20, length: 1 << 20).readableBytesView)
            let partFields = [
                ContentMetadata.HeaderField(name: "Content-Range", value: "bytes 1048576-2097151/\(Self.length)"),
                ContentMetadata.HeaderField(name: "ETag", value: "\"v2\""),
            ]
            #expect(try await setup.finish(tasks[1], body: part, fields: partFields) == false)
            await setup.session.wait { $0.started.count == 4 }
            let again = try #require(setup.session.state.withLock { $0.started.last })
            #expect(again.fields.contains(ContentMetadata.HeaderField(name: "If-Range", value: "\"v1\"")))
            let updates = queue.updates()
            async let settled = setup.settled(updates, job.id)
            let whole = Data(changed.buffer(offset: 0, length: Int(Self.length)).readableBytesView)
            let wholeFields = [
                ContentMetadata.HeaderField(name: "ETag", value: "\"v2\""),
                ContentMetadata.HeaderField(name: "Content-Length", value: "\(Self.length)"),
            ]
            let retry = try #require(setup.running().last)
            #expect(try await setup.finish(retry, body: whole, fields: wholeFields, status: 200))
            #expect(await settled?.state == .completed)
            await setup.session.wait { $0.tasks.isEmpty }
            // The old version's last piece is cancelled, and only it: the job heard of the retry's
            // file once the session no longer listed its task.
            #expect(setup.session.state.withLock { $0.cancelled } == [tasks[2]])
            let handle = try setup.harness.store.openEntry(setup.harness.store.key(for: Self.url))
            defer { handle.close() }
            #expect(try handle.metadata().etag == "\"v2\"")
            #expect(changed.firstMismatch(in: try await handle.read(ByteRange(0, Self.length)), at: 0) == nil)
            await queue.shutDown()
        }
    }

    @Test func aPieceThatFailsThreeTimesFailsTheJobAndPausingCancelsItsTasks() async throws {
        try await Self.withSetup { setup in
            let (queue, job) = try await setup.pinned()
            let paused = try await queue.pause(job.id)
            #expect(paused.state == .paused)
            #expect(setup.running().isEmpty && setup.session.state.withLock { $0.cancelled.count } == 3)
            _ = try await queue.resume(job.id)
            await setup.session.wait { $0.tasks.count == 3 }
            let updates = queue.updates()
            async let settled = setup.settled(updates, job.id)
            let piece = try #require(setup.session.state.withLock { $0.tasks.values.first?.transfer })
            for attempt in 1...3 {
                setup.session.state.withLock { state in
                    for (id, request) in state.tasks where request.transfer == piece { state.tasks[id] = nil }
                }
                setup.transfers.transferEnded(taskDescription: piece.taskDescription, error: "timed out (\(attempt))")
                if attempt < 3 { await setup.session.wait { $0.tasks.values.contains { $0.transfer == piece } } }
            }
            let failed = await settled
            #expect(failed?.state == .failed && failed?.failure?.contains("failed three times: timed out (3)") == true)
            #expect(setup.running().isEmpty, "a failed job's tasks are cancelled")
            await queue.shutDown()
        }
    }

    @Test func aNewLaunchReconcilesTheTasksTheSystemKept() async throws {
        try await Self.withSetup { setup in
            let (first, job) = try await setup.pinned()
            await first.shutDown()
            #expect(setup.running().count == 3, "a shutdown leaves the transfers to the system")
            // While no queue runs, the system finishes one; another part of the app left a task.
            #expect(try await setup.finish(setup.running()[0]))
            let stray = setup.session.adoptStray()
            let second = try setup.queue()
            await setup.session.wait { $0.cancelled.contains(stray) }
            #expect(try await setup.finishAll(second, job.id)?.state == .completed)
            #expect(setup.session.state.withLock { $0.started.count } == 3, "the two left running were not asked again")
            try await setup.expectStored()
            await second.shutDown()
        }
    }
}
