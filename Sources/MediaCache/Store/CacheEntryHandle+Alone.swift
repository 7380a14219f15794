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
