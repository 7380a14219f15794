// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

extension CacheStore {
    /// What ``storedSnapshot(_:start:)`` found. (Types of their own, not tuples: an optional
    /// tuple is copied and destroyed through the runtime's generic value witnesses, and this is
    /// taken for every cached range a server answers.)
    struct StoredSnapshot {
        let metadata: ContentMetadata
        let region: StoredSpan?
    }

    /// A stored span and the open data file that holds it.
    struct StoredSpan: Sendable {
        let span: ByteRange
        let file: EntryFile
    }
}
