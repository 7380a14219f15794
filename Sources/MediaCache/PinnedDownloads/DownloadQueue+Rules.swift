// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import Synchronization

extension DownloadQueue {
    // MARK: Rules and order

    /// Gives the job `id` rules of its own, over the queue's (``Configuration/rules``): what
    /// `rules` sets replaces what the job had (a window, a network rule, a rate cap); the
    /// rest stays. A running job goes on under them (stopped at once if they forbid it now).
    /// - Throws: ``CacheError`` `.notCached` when there is no such job.
    @discardableResult
    public func setRules(_ id: String, _ rules: DownloadRules) async throws -> DownloadJob {
        let restarts = try state.withLock { state -> Bool in
            guard let job = state.jobs[id] else { throw DownloadJob.missing(id) }
            let changed = (job.rules ?? DownloadRules()).changed(by: rules)
            state.jobs[id]!.rules = changed.isEmpty ? nil : changed
            state.publish(.changed(state.jobs[id]!))
            // A running job starts again under its new rate cap (what it stored stays).
            guard rules.maxBytesPerSecond != nil, let running = state.running[id], !running.isSettling,
                running.stop == nil
            else { return false }
            state.running[id]!.stop = .wait(nil)
            running.task?.cancel()
            return true
        }
        configuration.logger.info("Changed a download's rules", metadata: ["job": "\(id)", "rules": "\(rules)"])
        try await persist(id)
        if !restarts { schedule() }
        return try current(id)
    }

    /// Moves the job `id` to the front of the queue ("download this one now"): it runs first,
    /// a job running in the last slot waiting behind it if need be; or, with `toFront` false,
    /// to the back.
    /// - Throws: ``CacheError`` `.notCached` when there is no such job.
    @discardableResult
    public func move(_ id: String, toFront: Bool = true) async throws -> DownloadJob {
        try state.withLock { state in
            guard state.jobs[id] != nil else { throw DownloadJob.missing(id) }
            let ranks = state.jobs.values.filter { $0.id != id }.map { $0.rank ?? 0 }
            state.jobs[id]!.rank = toFront ? (ranks.min() ?? 0) - 1 : (ranks.max() ?? 0) + 1
            state.publish(.changed(state.jobs[id]!))
        }
        try await persist(id)
        schedule()
        return try current(id)
    }

    /// Tells the queue what the system says of the network (the Apple front door's path
    /// monitor, NetworkManager's metered property on Linux); jobs whose rules forbid it wait.
    public func networkChanged(_ conditions: DownloadRules.NetworkConditions) {
        let changed = state.withLock { state in
            defer { state.network = conditions }
            return state.network != conditions
        }
        if changed {
            configuration.logger.info(
                "The network changed",
                metadata: ["metered": "\(conditions.isMetered)", "low data": "\(conditions.isConstrained)"])
            schedule()
        }
    }

    /// Tells the queue what the system says of the device's power (the Apple front door's
    /// battery and Low Power Mode notices, the power-supply class in sysfs on Linux): jobs
    /// whose power rule forbids it wait, saying "waiting for power", and fills and preloads
    /// stop while the power is low. A player's own reads never wait.
    public func powerChanged(_ conditions: DownloadRules.PowerConditions) {
        let changed = state.withLock { state in
            defer { state.power = conditions }
            return state.power != conditions
        }
        if changed {
            configuration.logger.info("The power changed", metadata: ["power": "\(conditions.words)"])
            schedule()
        }
    }

    /// The device's power as the system last said it.
    public var power: DownloadRules.PowerConditions { state.withLock { $0.power } }

    /// What the user says of the network, over the system ("I am on a hotspot").
    public var networkOverride: DownloadRules.NetworkOverride {
        get { state.withLock { $0.networkOverride } }
        set {
            state.withLock { $0.networkOverride = newValue }
            configuration.logger.info("The network was said to be \(newValue.rawValue)")
            schedule()
        }
    }

    /// The network as downloads go by it (the system's word under the user's), and the system's.
    public var network: (effective: DownloadRules.NetworkConditions, system: DownloadRules.NetworkConditions) {
        state.withLock { ($0.networkOverride.applied(to: $0.network), $0.network) }
    }

    // MARK: Scheduling

    /// Starts and stops jobs as ``DownloadPlanner`` says: the first
    /// ``Configuration/maxConcurrent`` jobs in the queue's order whose rules let them run
    /// now. A job its rules stop is queued with the reason; what it stored stays.
    func schedule() {
        // A play's fill follows the same word on the network (none on a metered or low-data one)
        // and on the power (none while it is low); a preload the power alone.
        let effective = network.effective
        let lowPower = power.isLow(below: configuration.lowBatteryLevel)
        reader.fills.heldBy = FillOnPlay.hold(on: effective, lowPower: lowPower)
        reader.holdPreloads(lowPower ? .power : nil)
        let now = store.configuration.clock.now
        let room = store.diskRoom
        let floor = store.diskFloor
        let planner = DownloadPlanner(maxConcurrent: configuration.maxConcurrent)
        let watches = state.withLock { state -> Bool in
            guard state.isStarted, !state.isShutDown else { return false }
            let conditions = DownloadPlanner.Conditions(
                now: now, timeZone: configuration.timeZone, network: state.networkOverride.applied(to: state.network),
                networkIsOverridden: state.networkOverride != .auto, diskRoom: room, diskFloor: floor,
                power: state.power, lowBatteryLevel: configuration.lowBatteryLevel)
            let jobs = state.ordered.map { job in
                let running = state.running[job.id]
                return DownloadPlanner.Job(
                    id: job.id, state: job.state, rules: (job.rules ?? DownloadRules()).over(configuration.rules),
                    isRunning: running != nil && running?.stop == nil && running?.isSettling == false,
                    bytesLeft: job.bytesTotal.map { max(0, $0 - job.bytesDone) })
            }
            let plan = planner.plan(jobs, conditions)
            state.nextCheck = plan.nextCheck
            // The jobs the plan looked at: one being stopped keeps the wait (and its detail) the
            // pass that stopped it gave, which its settling keeps (clearing them here showed a job
            // waiting for space with no detail until the next pass).
            for job in jobs where job.state == .queued || job.isRunning {
                let wait = plan.waits[job.id]
                guard state.jobs[job.id]?.waiting != wait?.reason || state.jobs[job.id]?.waitingDetail != wait?.detail
                else { continue }
                state.jobs[job.id]!.waiting = wait?.reason
                state.jobs[job.id]!.waitingDetail = wait?.detail
                state.jobs[job.id]!.remedy = wait?.remedy
                if let wait {
                    configuration.logger.info(
                        "A download waits", metadata: ["job": "\(job.id)", "reason": "\(wait.detail)"])
                }
                state.publish(.changed(state.jobs[job.id]!))
            }
            for (id, reason) in plan.stops {
                state.running[id]!.stop = .wait(reason)
                state.running[id]!.task?.cancel()
            }
            for id in plan.starts where state.running[id] == nil { start(id, in: &state) }
            CacheMetrics.recordWaiting(state.jobs.values)
            let unfinished = state.jobs.values.contains { $0.state == .queued || $0.state == .downloading }
            return unfinished && state.watcher == nil
        }
        if watches { watch() }
    }

    /// Starts the job `id`'s task.
    private func start(_ id: String, in state: inout State) {
        guard let job = state.jobs[id] else { return }
        state.running[id] = Running()
        state.jobs[id]!.state = .downloading
        state.jobs[id]!.waiting = nil
        state.jobs[id]!.waitingDetail = nil
        state.jobs[id]!.remedy = nil
        state.publish(.changed(state.jobs[id]!))
        let own = job.rules?.maxBytesPerSecond.map { DownloadRate(bytesPerSecond: $0) }
        let pacer = DownloadPacer(rates: [rate, own].compactMap { $0 }, store: store)
        // A pinned download (or a recording) is the cache's own work: it gives way to players
        // (``TransferPolicy``), within the rate caps.
        let requester = Requester.own(job.isRecording ? .recording : .pin, pacer: pacer)
        state.running[id]!.task = Task { await self.run(id, as: requester) }
    }

    /// While jobs are unfinished, looks at the disk's free space and the time again every
    /// ``Configuration/checkInterval`` (or when a window opens or closes, if sooner), so a
    /// job waiting for space or for its window starts by itself.
    private func watch() {
        let task = Task { [weak self] in
            while let self {
                let next = state.withLock { $0.nextCheck }
                var wait = configuration.checkInterval
                if let next {
                    let seconds = max(0.05, next.timeIntervalSince(store.configuration.clock.now))
                    wait = min(wait, .milliseconds(Int64(seconds * 1000)))
                }
                try? await Task.sleep(for: wait)
                await store.measureDisk()
                let goesOn = state.withLock { state -> Bool in
                    let unfinished = state.jobs.values.contains { $0.state == .queued || $0.state == .downloading }
                    guard unfinished, !state.isShutDown, !Task.isCancelled else {
                        state.watcher = nil
                        return false
                    }
                    return true
                }
                guard goesOn else { return }
                schedule()
            }
        }
        state.withLock { state in
            if state.watcher == nil, !state.isShutDown { state.watcher = task } else { task.cancel() }
        }
    }

    // MARK: Checks

    /// Why the job `id`'s download, ended without an error, does not hold every byte: room
    /// wanted on the disk, or the store's refusal; `nil` when every byte is stored.
    func shortfall(_ id: String) -> (any Error)? {
        guard let job = state.withLock({ $0.jobs[id] }) else { return nil }
        let plan = state.withLock { $0.running[id]?.plan } ?? []
        let held =
            job.asset == nil
            ? reader.held.isHeld(PrefetchItem(url: job.url, range: nil))
            : renditionStates(plan).allSatisfy { $0.state == .held }
        guard !held else { return nil }
        if let room = store.diskRoom, room < Self.piece {
            return RoomWanted(
                message:
                    "the disk has \(ByteCountText.format(max(0, room))) above the \(ByteCountText.format(store.diskFloor)) it keeps free"
            )
        }
        return CacheError(
            .capacityExceeded,
            "The cache did not store every byte of \(job.url.absoluteString.prefix(200)); resume the job to fetch what is missing."
        )
    }

    /// Why a completed `job`'s bytes are no longer all held (the system cleaned the cache
    /// folder), or `nil` when they are.
    static func vanished(_ job: DownloadJob, in store: CacheStore) -> String? {
        let held = job.keys.reduce(Int64(0)) { $0 + (store.entrySummary(for: $1)?.storedBytes ?? 0) }
        guard held < job.bytesDone else { return nil }
        return
            "Its bytes vanished from the cache folder (\(ByteCountText.format(held)) of \(ByteCountText.format(job.bytesDone)) left: "
            + "the system cleaned the folder, or a crash lost the index's last commits)."
    }

    // MARK: Control

    /// Stops a job; what arrived stays pinned. A queued job is paused before it starts.
    /// - Throws: ``CacheError`` `.notCached` when there is no such job.
    @discardableResult
    public func pause(_ id: String) async throws -> DownloadJob {
        // A job whose download has just ended is not cancelled while its state is written.
        let (task, cancels) = try state.withLock { state -> (Task<Void, Never>?, Bool) in
            guard let job = state.jobs[id] else { throw DownloadJob.missing(id) }
            if let running = state.running[id] {
                if !running.isSettling { state.running[id]!.stop = .pause }
                return (running.task, !running.isSettling)
            }
            if job.state == .queued {
                state.jobs[id]!.state = .paused
                state.publish(.changed(state.jobs[id]!))
            }
            return (nil, false)
        }
        if let task {
            if cancels { task.cancel() }
            await task.value
        } else {
            try await persist(id)
            await forgetBackgroundTasks(of: [id])
        }
        return try current(id)
    }

    /// Queues a paused or failed job again; it resumes with the bytes that are missing.
    @discardableResult
    public func resume(_ id: String) async throws -> DownloadJob {
        try state.withLock { state in
            guard let job = state.jobs[id] else { throw DownloadJob.missing(id) }
            guard job.state == .paused || job.state == .failed else { return }
            state.jobs[id]!.state = .queued
            state.jobs[id]!.failure = nil
            state.jobs[id]!.remedy = nil
            state.publish(.changed(state.jobs[id]!))
        }
        try await persist(id)
        schedule()
        return try current(id)
    }

    /// Stops a job, forgets it and unpins its entries (their bytes stay, as streaming-cache
    /// entries the least-recently-used policy may evict).
    public func cancel(_ id: String) async throws {
        let (task, cancels) = try state.withLock { state -> (Task<Void, Never>?, Bool) in
            guard state.jobs[id] != nil else { throw DownloadJob.missing(id) }
            guard let running = state.running[id] else { return (nil, false) }
            if !running.isSettling { state.running[id]!.stop = .cancel }
            return (running.task, !running.isSettling)
        }
        if cancels { task?.cancel() }
        await task?.value
        let removed = state.withLock { state in
            defer { state.publish(.removed(id: id)) }
            return state.jobs.removeValue(forKey: id)
        }
        guard let job = removed else { return }
        await forgetBackgroundTasks(of: [id])
        try await store.saveJob(id) { nil }
        try await store.unpin(job.keys)
        configuration.logger.info(
            "Unpinned", metadata: ["job": "\(id)", "url": "\(job.url.absoluteString.prefix(200))"])
        schedule()
    }

    /// Stops every running job without changing what is kept (a restart resumes them) and
    /// ends the ``updates()`` streams. Call it before ``CachingReader/shutDown()``.
    public func shutDown() async {
        let (tasks, subscribers, reconciling) = state.withLock { state in
            state.isShutDown = true
            state.watcher?.cancel()
            state.watcher = nil
            let reconciling = state.reconciling
            state.reconciling = nil
            for id in state.running.keys where !state.running[id]!.isSettling { state.running[id]!.stop = .shutDown }
            defer { state.subscribers = [:] }
            return (
                state.running.values.compactMap { running in
                    running.task.map { (task: $0, cancels: !running.isSettling) }
                }, Array(state.subscribers.values), reconciling
            )
        }
        reconciling?.cancel()
        await reconciling?.value
        await scrubber.shutDown()
        // A job whose download has ended is not cancelled: its last state (completed, say) is
        // being written, and a client that saw it settle may close the store next.
        for (task, cancels) in tasks where cancels { task.cancel() }
        for (task, _) in tasks { await task.value }
        for subscriber in subscribers { subscriber.finish() }
    }
}
