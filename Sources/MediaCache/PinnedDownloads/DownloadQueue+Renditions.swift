// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Logging
import Synchronization

extension DownloadQueue {
    // MARK: Renditions

    /// Unpins renditions of the asset at `url`: those `renditions` names (variants, audio and
    /// subtitle languages, trick play) leave the job's choice, and the bytes only they used go
    /// back to the streaming cache; the rest stays pinned. An empty choice unpins the whole
    /// asset, as ``unpin(_:)``. Returns whether anything was released.
    /// - Throws: ``CacheError`` `.outOfBounds` when it would leave no variant or no audio
    ///   (unpin the asset instead), or names a language the job does not hold;
    ///   `.notCached` when no job pins `url`.
    @discardableResult
    public func unpin(_ url: URL, renditions: RenditionChoice) async throws -> Bool {
        guard !renditions.isEmpty else { return try await unpin(url) }
        guard let job = job(matching: url.absoluteString), let asset = job.asset else {
            throw CacheError(
                .notCached, "No download job pins renditions of \(url.absoluteString.prefix(200)).",
                remedy: CacheError.Remedy(.listJobs))
        }
        let plan = try await reader.planner(for: .own(.pin)).plan(
            job.url, kind: asset.format,
            options: HLSPrefetchOptions(renditions: asset.renditions, seconds: asset.seconds))
        var choice = asset.renditions
        choice.variants.removeAll { renditions.variants.contains($0) }
        guard !choice.variants.isEmpty else {
            throw CacheError(
                .outOfBounds,
                "That would leave no variant pinned; unpin \(url.absoluteString.prefix(200)) without a rendition to release it all."
            )
        }
        if renditions.trickPlay { choice.trickPlay = false }
        let chosen = plan.renditions.map(\.rendition)
        if let removed = renditions.audio {
            choice.audio = try Self.remaining(chosen.filter { $0.role == .audio }, removing: removed, kind: "audio")
            if choice.audio?.isNone == true, chosen.contains(where: { $0.role == .audio }) {
                throw CacheError(
                    .outOfBounds,
                    "That would leave no audio pinned; unpin \(url.absoluteString.prefix(200)) without a rendition to release it all."
                )
            }
        }
        if let removed = renditions.subtitles {
            choice.subtitles = try Self.remaining(
                chosen.filter { $0.role == .subtitles && !$0.isForced }, removing: removed, kind: "subtitles")
        }
        guard choice != asset.renditions else { return false }
        _ = try await rechoose(job.id, choice)
        return true
    }

    /// The languages of `held` left when `removing` is taken away, named explicitly.
    private static func remaining(_ held: [ChosenRendition], removing: RenditionChoice.Languages, kind: String) throws
        -> RenditionChoice.Languages
    {
        if removing.includesAll { return .none }
        for tag in removing.languages
        where !held.contains(where: { RenditionChoice.Languages.tag(tag, names: $0.language, $0.name) }) {
            throw CacheError(
                .outOfBounds,
                "No \(kind) in \(tag.prefix(64)) is pinned; pinned: \(held.compactMap { $0.language ?? $0.name }.joined(separator: ", "))."
            )
        }
        let kept = held.filter { rendition in
            !removing.languages.contains {
                RenditionChoice.Languages.tag($0, names: rendition.language, rendition.name)
            }
        }
        var tags: [String] = []
        for rendition in kept {
            if let tag = rendition.language ?? rendition.name, !tags.contains(tag) { tags.append(tag) }
        }
        return .languages(tags)
    }

    /// Gives the job `id` a new URL for the same resource (a signed URL that expired): its
    /// download stops, the job is planned again from `url`, the entries the new URL names are
    /// pinned and those only the old one named unpinned, and it is queued to fetch what is
    /// missing. Under a key rule that leaves the signature out of keys
    /// (``CacheStore/Configuration/keyRule``), the keys are the same and every byte held stays.
    /// - Throws: ``CacheError`` `.notCached` when there is no such job; origin errors planning an asset.
    @discardableResult
    public func replaceURL(_ id: String, with url: URL) async throws -> DownloadJob {
        try reader.checkOrigin(url)
        let job = try current(id)
        var keys = [store.key(for: url)]
        var plan: PrefetchPlan?
        if let asset = job.asset {
            plan = try await reader.planner(for: .own(.pin)).plan(
                url, kind: asset.format,
                options: HLSPrefetchOptions(renditions: asset.renditions, seconds: asset.seconds))
            keys += Self.keys(of: plan!, in: store)
        }
        let states = plan.map(renditionStates)
        let (kept, added) = try await retarget(id, keys: keys) { job in
            job.url = url
            if let states { job.renditions = states }
        }
        configuration.logger.info(
            "Gave a download a new URL",
            metadata: [
                "job": "\(id)", "url": "\(url.absoluteString.prefix(200))", "keys kept": "\(kept) of \(kept + added)",
            ])
        return try current(id)
    }

    /// Gives the job `id` the choice `choice`: its download stops, the keys only the old choice
    /// used are unpinned, those of the new one pinned, and it is queued to fetch what is missing.
    func rechoose(_ id: String, _ choice: RenditionChoice) async throws -> DownloadJob {
        let job = try current(id)
        guard var asset = job.asset else { return job }
        asset.renditions = choice.resolved
        let plan = try await reader.planner(for: .own(.pin)).plan(
            job.url, kind: asset.format,
            options: HLSPrefetchOptions(renditions: asset.renditions, seconds: asset.seconds))
        var proposed = job
        var seen: Set<CacheKey> = []
        proposed.keys = ([store.key(for: job.url)] + Self.keys(of: plan, in: store)).filter { seen.insert($0).inserted }
        proposed.bytesTotal = plan.estimatedBytes
        proposed.totalIsEstimate = plan.items.contains { $0.range == nil }
        try checkRoom(for: proposed)
        let states = renditionStates(plan)
        let (kept, added) = try await retarget(id, keys: proposed.keys) { job in
            job.asset = asset
            job.bytesTotal = proposed.bytesTotal
            job.totalIsEstimate = proposed.totalIsEstimate
            job.resourcesTotal = plan.items.count
            job.renditions = states
        }
        configuration.logger.info(
            "Changed the renditions of a pin",
            metadata: ["job": "\(id)", "entries kept": "\(kept)", "added": "\(added)"])
        return try current(id)
    }

    /// Points the job `id` at `keys` (each once) with `change` made to it: its download stops,
    /// the keys only it used before are unpinned (to the streaming cache), the new ones pinned,
    /// and it is queued to fetch what is missing. Returns how many keys were kept and added.
    private func retarget(_ id: String, keys: [CacheKey], change: (inout DownloadJob) -> Void) async throws -> (
        kept: Int, added: Int
    ) {
        var seen: Set<CacheKey> = []
        let keys = keys.filter { seen.insert($0).inserted }
        let job = try current(id)
        if !(job.state == .completed || job.state == .paused || job.state == .failed) { _ = try await pause(id) }
        let (released, added) = state.withLock { state -> ([CacheKey], [CacheKey]) in
            let old = Set(state.jobs[id]?.keys ?? [])
            let others = Set(state.jobs.values.filter { $0.id != id }.flatMap(\.keys))
            if state.jobs[id] != nil { change(&state.jobs[id]!) }
            state.jobs[id]?.keys = keys
            state.jobs[id]?.state = .queued
            state.jobs[id]?.failure = nil
            state.jobs[id]?.remedy = nil
            if let changed = state.jobs[id] { state.publish(.changed(changed)) }
            return (
                old.subtracting(keys).subtracting(others).sorted { $0.rawValue < $1.rawValue },
                keys.filter { !old.contains($0) }
            )
        }
        try await store.pin(added)
        try await store.unpin(released)
        try await persist(id)
        schedule()
        return (keys.count - added.count, added.count)
    }

    /// How much of each rendition in `plan` is stored.
    func renditionStates(_ plan: [(rendition: ChosenRendition, items: [PrefetchItem])]) -> [RenditionState] {
        plan.map { rendition, items in
            RenditionState(
                rendition: rendition, state: reader.held.state(of: items), resources: items.count,
                resourcesHeld: items.filter(reader.held.isHeld).count)
        }
    }

    func renditionStates(_ plan: PrefetchPlan) -> [RenditionState] {
        renditionStates(plan.renditions)
    }
}

extension DownloadQueue: RecordingJobs {
    /// The recordings this queue runs (see ``Recorder``).
    package var recordings: Recorder { recorder(as: .own(.recording)) }

    /// The recordings this queue runs, reading as `requester` (a running job's, with its pacer).
    func recorder(as requester: Requester) -> Recorder {
        Recorder(jobs: self, reader: reader, logger: configuration.logger, requester: requester)
    }

    func job(_ id: String) -> DownloadJob? { state.withLock { $0.jobs[id] } }

    @discardableResult
    func updateRecording<T>(of id: String, _ change: (inout Recording) -> T) -> T? {
        state.withLock { state in
            guard var recording = state.jobs[id]?.recording else { return nil }
            let result = change(&recording)
            state.jobs[id]?.recording = recording
            return result
        }
    }

    func addKeys(_ keys: [CacheKey], to id: String) -> [CacheKey] {
        state.withLock { state in
            let known = Set(state.jobs[id]?.keys ?? [])
            var seen: Set<CacheKey> = []
            let added = keys.filter { !known.contains($0) && seen.insert($0).inserted }
            state.jobs[id]?.keys += added
            return added
        }
    }

    func stored(_ bytes: Int64, for id: String) {
        state.withLock { state in
            guard state.jobs[id] != nil else { return }
            state.jobs[id]!.bytesDone += bytes
            state.jobs[id]!.resourcesDone += 1
            state.jobs[id]!.resourcesTotal += 1
            state.publish(.changed(state.jobs[id]!))
        }
    }
}
