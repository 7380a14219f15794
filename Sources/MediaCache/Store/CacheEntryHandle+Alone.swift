// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

extension CacheEntryHandle {
    /// Returns once this handle is the only one open on its entry (every other was closed), or
    /// the task is cancelled: woken by the closes, never by polling. A change that must not
    /// cut the reads under way short (dropping a representation) waits here for them to end.
    func untilAlone() async {
        let (id, key) = (id, key)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                store.state.withLock { state in
                    let others = state.records[key]?.openBy.subtracting([id]) ?? []
                    if others.isEmpty || Task.isCancelled {
                        continuation.resume()
                    } else {
                        state.aloneWaiters[id] = (key, continuation)
                    }
                }
            }
        } onCancel: {
            store.state.withLock { $0.aloneWaiters.removeValue(forKey: id) }?.continuation.resume()
        }
    }
}

extension CacheStore.State {
    /// Wakes the handles of `key` waiting in ``CacheEntryHandle/untilAlone()`` that are now
    /// the only one open on it. Called under the store's lock when a handle of `key` closes.
    mutating func wakeAloneWaiters(of key: CacheKey) {
        guard !aloneWaiters.isEmpty else { return }
        let open = records[key]?.openBy ?? []
        for (id, waiter) in aloneWaiters where waiter.key == key && open.subtracting([id]).isEmpty {
            aloneWaiters.removeValue(forKey: id)
            waiter.continuation.resume()
        }
    }
}

extension CacheEntryHandle {
    /// Returns once no cut of this entry's data file (a trim, carried out after its commit)
    /// reaches below `end`: a write past the cut waits for it rather than be refused, and the
    /// bytes it brings are stored, not fetched again later. A cut is one `ftruncate`; it always
    /// ends and wakes the writes that wait (``CacheStore/cutTrimmedFiles(_:)``).
    func waitForCut(before end: Int64) async {
        let key = key
        // Nearly always no cut: no lock and no suspension then. (A cut counted after this look
        // is one this write's lock finds, and is refused by, as before.)
        guard store.cutsUnderWay.load(ordering: .relaxed) > 0,
            store.state.withLock({ state in state.cutting[key].map { end > $0 } ?? false })
        else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waits = store.state.withLock { state -> Bool in
                guard let cut = state.cutting[key], end > cut else { return false }
                state.cutWaiters[key, default: []].append(continuation)
                return true
            }
            if !waits { continuation.resume() }
        }
    }
}
