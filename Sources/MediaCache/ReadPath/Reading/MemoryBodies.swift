// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// The bodies ``WholeBodies/memoryOnlyBody(of:headers:as:)`` keeps, oldest first out.
struct MemoryBodies: Sendable {
    struct Entry: Sendable {
        var body: [UInt8]
        var metadata: ContentMetadata
    }

    static let capacity = 256
    private(set) var entries: [CacheKey: Entry] = [:]
    private var order: [CacheKey] = []

    mutating func keep(_ entry: Entry, for key: CacheKey) {
        if entries.updateValue(entry, forKey: key) == nil { order.append(key) }
        while order.count > Self.capacity { entries[order.removeFirst()] = nil }
    }
}
