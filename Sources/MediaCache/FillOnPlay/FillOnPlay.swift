// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// The fills under way (see ``FillPolicy``): which download a play's transfer goes on with to
/// the end of its file, whether the network allows it now, and what each has stored. A
/// transfer asks ``admits`` when the origin answers a player's request, and says when the
/// fill ends; nothing here fetches.
package final class FillOnPlay: Sendable {
    /// A fill under way, for the status page.
    package struct Progress: Sendable, Equatable, Codable {
        package var url: String
        package var position: Int64
        package var length: Int64
    }

    private struct State {
        var allowed = true
        var active: [ObjectIdentifier: (download: SharedDownload, length: Int64)] = [:]
    }

    let policy: FillPolicy
    private let state = Mutex(State())

    init(policy: FillPolicy) {
        self.policy = policy
    }

    /// Whether fills may start: not on a metered network (the download rules' judgement),
    /// where only what players read, and its lead, is fetched. A fill under way when it turns
    /// `false` stops at its next chunk.
    package var isAllowed: Bool {
        get { state.withLock { $0.allowed } }
        set { state.withLock { $0.allowed = newValue } }
    }

    /// Whether a player's download of `url` whose origin answered `metadata` fills its file.
    func admits(_ metadata: ContentMetadata, url: URL) -> Bool {
        isAllowed
            && policy.covers(mimeType: metadata.mimeType, length: metadata.length, path: url.path)
    }

    /// Records that `download` fills its file of `length` bytes.
    func started(_ download: SharedDownload, length: Int64) {
        state.withLock {
            $0.active[ObjectIdentifier(download)] = (download, length)
        }
        CacheMetrics.fill(.started)
    }

    /// Records that the fill of `download` ended: the file whole, or not.
    func ended(_ download: SharedDownload, whole: Bool) {
        let removed = state.withLock { $0.active.removeValue(forKey: ObjectIdentifier(download)) != nil }
        if removed { CacheMetrics.fill(whole ? .completed : .stopped) }
    }

    /// The fills under way, their positions now.
    package var progress: [Progress] {
        state.withLock { Array($0.active.values) }.map {
            Progress(url: $0.download.url.absoluteString, position: $0.download.position, length: $0.length)
        }
        .sorted { $0.url < $1.url }
    }
}
