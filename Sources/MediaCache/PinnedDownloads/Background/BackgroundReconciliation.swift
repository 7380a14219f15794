// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// What a system transfer session should run, from what the jobs want and what it runs:
/// pure, so a relaunch's decisions are tested without a session.
package enum BackgroundReconciliation {
    /// What to do with a session's tasks.
    package struct Plan: Sendable, Equatable {
        /// Tasks to cancel: a job that no longer wants them (removed, paused, finished), a
        /// range stored meanwhile, a task that is not one of ours, a second task for one range.
        package var cancel: [Int] = []
        /// Transfers no task runs yet.
        package var start: [BackgroundTransfer] = []
    }

    /// Decides for the jobs `deciding`: each task of theirs is kept when `wanted` names its
    /// transfer (one task per transfer), cancelled otherwise; each transfer of `wanted` no
    /// task runs is started. A task of a job not in `known` (a job removed while the app was
    /// not running) and a task whose description is not ours are cancelled; the tasks of the
    /// other known jobs are left as they are (their own runs decide).
    package static func plan(
        wanted: [BackgroundTransfer], deciding: Set<String>, known: Set<String>, running: [BackgroundTransferTask]
    ) -> Plan {
        var plan = Plan()
        let wantedSet = Set(wanted)
        var runs: Set<BackgroundTransfer> = []
        for task in running.sorted(by: { $0.identifier < $1.identifier }) {
            guard let transfer = task.taskDescription.flatMap(BackgroundTransfer.init(taskDescription:)),
                known.contains(transfer.job) || deciding.contains(transfer.job)
            else {
                plan.cancel.append(task.identifier)
                continue
            }
            guard deciding.contains(transfer.job) else { continue }
            if wantedSet.contains(transfer), runs.insert(transfer).inserted { continue }
            plan.cancel.append(task.identifier)
        }
        var started: Set<BackgroundTransfer> = []
        plan.start = wanted.filter { deciding.contains($0.job) && !runs.contains($0) && started.insert($0).inserted }
        return plan
    }

    /// The pieces of `range` (of a resource of `length` bytes, when `range` is `nil`) to ask
    /// for: those of a fixed grid of `pieceSize` bytes from the range's start that still have
    /// a byte missing from `spans`, whole (a task's range does not change as players fill part
    /// of it, so a relaunch finds the same pieces). `[nil]` (the whole resource) when neither
    /// range nor length is known and nothing is stored.
    package static func pieces(range: ByteRange?, length: Int64?, spans: SpanSet, pieceSize: Int64) -> [ByteRange?] {
        guard let whole = range ?? length.map({ ByteRange(0, $0) }) else { return spans.isEmpty ? [nil] : [] }
        let size = max(1, pieceSize)
        var pieces: [ByteRange?] = []
        var start = whole.lowerBound
        while start < whole.upperBound {
            let end = start + min(size, whole.upperBound - start)
            let piece = ByteRange(start, end)
            if !spans.holes(in: piece).isEmpty { pieces.append(piece) }
            start = end
        }
        return pieces
    }
}
