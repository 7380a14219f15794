// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import FoundationNetworking

/// The system's transfer service as the stand-in plays it (not Apple's API; see
/// URLSession.swift): the tasks of every background session identifier, which outlive the
/// app's session objects, run over real HTTP, and have their events delivered to the session
/// object of their identifier, now or when one is next made.
public final class SimulatedTransferService: @unchecked Sendable {
    public static let shared = SimulatedTransferService()

    struct Record {
        let task: URLSessionTask
        /// The downloaded body, once the transfer ended with one.
        var file: URL?
        var error: (any Error)?
        /// The transfer ended; its events wait for a session object unless delivered.
        var ended = false
        var delivered = false
    }

    struct State {
        var sessions: [String: URLSession] = [:]
        var records: [Int: Record] = [:]
        var nextIdentifier = 1
        var holdsTransfers = false
        var inFlight: [Int: Task<Void, Never>] = [:]
        /// Every request the service sent to an origin.
        var sent: [URLRequest] = []
    }

    private let state = Locked(State())
    private let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
        "simulated-nsurlsessiond-\(UUID().uuidString)")

    /// Whether resumed tasks wait for ``simulatedRunHeldTransfers()`` (so a test decides when
    /// the system runs them: while the app is gone, say).
    public var simulatedHoldsTransfers: Bool {
        get { state.withLock { $0.holdsTransfers } }
        set { state.withLock { $0.holdsTransfers = newValue } }
    }

    /// Every request sent to an origin so far.
    public var simulatedSentRequests: [URLRequest] { state.withLock { $0.sent } }

    /// The app is terminated (suspended and purged, or relaunched later): its session objects
    /// get no more events; the tasks go on.
    public func simulatedTerminateApp() {
        state.withLock { $0.sessions = [:] }
    }

    /// The user force-quits the app: the system cancels its background transfers; the
    /// cancellations are delivered at the next launch.
    public func simulatedForceQuit() {
        let cancelled = state.withLock { state -> [Task<Void, Never>] in
            state.sessions = [:]
            for (id, record) in state.records where !record.ended {
                state.records[id]!.ended = true
                state.records[id]!.error = URLError(.cancelled)
            }
            defer { state.inFlight = [:] }
            return Array(state.inFlight.values)
        }
        for task in cancelled { task.cancel() }
    }

    /// Runs every resumed task that waits, and returns when every transfer has ended (their
    /// events delivered, or kept for the next session object).
    public func simulatedRunHeldTransfers() async {
        let waiting = state.withLock { state in
            state.records.values.filter {
                $0.task.state == .running && !$0.ended && state.inFlight[$0.task.taskIdentifier] == nil
            }
            .map(\.task)
        }
        for task in waiting { startTransfer(task) }
        while let (id, next) = state.withLock({ $0.inFlight.first.map { ($0.key, $0.value) } }) {
            await next.value
            state.withLock { _ = $0.inFlight.removeValue(forKey: id) }
        }
    }

    // MARK: For the stand-in's session and tasks

    func attach(_ session: URLSession) {
        let pending = state.withLock { state -> [Int] in
            state.sessions[session.identifier] = session
            return state.records.values.filter { $0.task.identifier == session.identifier && $0.ended && !$0.delivered }
                .map(\.task.taskIdentifier).sorted()
        }
        guard !pending.isEmpty else { return }
        for id in pending { deliver(id, to: session) }
        session.delegateQueue.addOperation {
            session.delegate?.urlSessionDidFinishEvents(forBackgroundURLSession: session)
        }
    }

    func detach(_ session: URLSession) {
        state.withLock { state in
            if state.sessions[session.identifier] === session { state.sessions[session.identifier] = nil }
        }
    }

    func makeTask(in session: URLSession, request: URLRequest) -> URLSessionDownloadTask {
        state.withLock { state in
            let task = URLSessionDownloadTask(
                identifier: session.identifier, taskIdentifier: state.nextIdentifier, request: request)
            state.records[state.nextIdentifier] = Record(task: task)
            state.nextIdentifier += 1
            return task
        }
    }

    /// The tasks of `identifier` that have not completed (one whose events wait is still running).
    func tasks(of identifier: String) -> [URLSessionTask] {
        state.withLock { state in
            state.records.values.filter { $0.task.identifier == identifier && $0.task.state != .completed }
                .map(\.task).sorted { $0.taskIdentifier < $1.taskIdentifier }
        }
    }

    func resume(_ task: URLSessionTask) {
        let runs = task.status.withLock { status -> Bool in
            guard status.state == .suspended else { return false }
            status.state = .running
            return true
        }
        if runs, !simulatedHoldsTransfers { startTransfer(task) }
    }

    func cancel(_ task: URLSessionTask) {
        let (flight, session) = state.withLock { state -> (Task<Void, Never>?, URLSession?) in
            guard let record = state.records[task.taskIdentifier], !record.ended else { return (nil, nil) }
            state.records[task.taskIdentifier]!.ended = true
            state.records[task.taskIdentifier]!.error = URLError(.cancelled)
            return (state.inFlight[task.taskIdentifier], state.sessions[task.identifier])
        }
        task.status.withLock { if $0.state != .completed { $0.state = .canceling } }
        flight?.cancel()
        if let session { deliver(task.taskIdentifier, to: session) }
    }

    private func startTransfer(_ task: URLSessionTask) {
        guard let request = task.originalRequest, let url = request.url else { return }
        let id = task.taskIdentifier
        let flight = Task {
            var sent = FoundationNetworking.URLRequest(url: url)
            for (name, value) in request.allHTTPHeaderFields ?? [:] { sent.setValue(value, forHTTPHeaderField: name) }
            var file: URL?
            var response: HTTPURLResponse?
            var failure: (any Error)?
            do {
                let (data, answer) = try await FoundationNetworking.URLSession.shared.data(for: sent)
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                let saved = folder.appendingPathComponent("CFNetworkDownload_\(id).tmp")
                try data.write(to: saved)
                file = saved
                let http = answer as? FoundationNetworking.HTTPURLResponse
                var fields: [String: String] = [:]
                for (name, value) in http?.allHeaderFields ?? [:] { fields["\(name)"] = "\(value)" }
                response = HTTPURLResponse(url: url, statusCode: http?.statusCode ?? 0, headerFields: fields)
            } catch {
                failure = error
            }
            let session = state.withLock { state -> URLSession? in
                // A cancelled task has ended already: what came is dropped.
                guard state.records[id]?.ended == false else { return nil }
                state.records[id]!.ended = true
                state.records[id]!.file = file
                state.records[id]!.error = failure
                return state.sessions[task.identifier]
            }
            task.status.withLock { $0.response = response }
            if let session { deliver(id, to: session) }
        }
        state.withLock { state in
            state.inFlight[id] = flight
            state.sent.append(request)
        }
    }

    /// Hands the ended task `id`'s events to `session`'s delegate on its queue: the file, then
    /// the completion; the file is deleted when the delegate returns.
    private func deliver(_ id: Int, to session: URLSession) {
        guard
            let record = state.withLock({ state -> Record? in
                guard let record = state.records[id], record.ended, !record.delivered else { return nil }
                state.records[id]!.delivered = true
                return record
            })
        else { return }
        session.delegateQueue.addOperation {
            if let file = record.file, let task = record.task as? URLSessionDownloadTask,
                let delegate = session.delegate as? any URLSessionDownloadDelegate
            {
                delegate.urlSession(session, downloadTask: task, didFinishDownloadingTo: file)
            }
            if let file = record.file { try? FileManager.default.removeItem(at: file) }
            record.task.status.withLock { $0.state = .completed }
            (session.delegate as? any URLSessionTaskDelegate)?.urlSession(
                session, task: record.task, didCompleteWithError: record.error)
        }
    }
}
