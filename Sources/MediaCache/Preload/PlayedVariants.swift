// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// Which variant of each HLS asset a player last played, so a preload of the asset fetches the
/// variant that player would choose: the proxy tells it each playlist it serves; a master
/// playlist's variants are remembered, and a media playlist that one of them names is the
/// variant played. Bounded: at most ``limit`` variants and assets, the older half forgotten
/// when full (a forgotten asset is preloaded with the first variant).
final class PlayedVariants: Sendable {
    private struct State {
        /// Each variant playlist named by a master: the master and the variant's `BANDWIDTH`.
        var variants: [CacheKey: (master: CacheKey, bandwidth: Int64, order: UInt64)] = [:]
        /// Each master's variant played last, by `BANDWIDTH`.
        var played: [CacheKey: (bandwidth: Int64, order: UInt64)] = [:]
        var next: UInt64 = 0
    }

    static let limit = 4096
    private let state = Mutex(State())

    /// Records that the playlist `playlist` was served for `key`; `resolve` gives the key of a
    /// URI it names.
    func served(_ playlist: HLSPlaylist, key: CacheKey, resolve: (String) -> CacheKey?) {
        state.withLock { state in
            state.next += 1
            if playlist.isMaster {
                for variant in playlist.variants {
                    guard let variantKey = resolve(variant.uri) else { continue }
                    state.variants[variantKey] = (key, variant.bandwidth, state.next)
                }
                Self.trim(&state.variants) { $0.order }
            } else if let variant = state.variants[key] {
                state.played[variant.master] = (variant.bandwidth, state.next)
                Self.trim(&state.played) { $0.order }
            }
        }
    }

    /// The `BANDWIDTH` of the variant of the master playlist `master` a player played last.
    func lastPlayed(_ master: CacheKey) -> Int64? {
        state.withLock { $0.played[master]?.bandwidth }
    }

    private static func trim<Value>(_ table: inout [CacheKey: Value], order: (Value) -> UInt64) {
        guard table.count > limit else { return }
        let cut = table.values.map(order).sorted()[table.count / 2]
        table = table.filter { order($0.value) >= cut }
    }
}
