// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// The folders of the store when no `--cache-dir` names one: the user's data (the index, pins,
/// the server file) and the user's caches (streaming entries).
enum StoreFolders {
    /// The store's folder without `--cache-dir`: the index, the pinned and recorded entries and
    /// the server file, where the platform keeps the user's data (`$XDG_DATA_HOME/mediacache`,
    /// `~/.local/share/mediacache` on Linux; Application Support on macOS).
    static func store() -> URL {
        let data =
            FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
        return data.appendingPathComponent("mediacache")
    }

    /// The streaming entries' folder without `--cache-dir`, where the platform keeps caches
    /// (`$XDG_CACHE_HOME/mediacache`, `~/.cache/mediacache`): the one folder of stores made
    /// before the two classes, which move out of it by themselves.
    static func streaming() -> URL {
        let caches =
            FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
        return caches.appendingPathComponent("mediacache")
    }
}
