// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@_spi(Adapter) @testable import MediaCache

extension ParserFuzzTests {
    /// A background task's description reads only when it is exactly what a transfer writes
    /// (it writes back the same text, its range within bounds); a finished file is stored only
    /// for the range asked, with a `Content-Range` that says exactly that range.
    @Test func backgroundTaskDescriptionsAndFinishedFilesReadOnlyAsWritten() throws {
        let asked = ByteRange(1_048_576, 2_097_152)
        let outcomes = try Mutator.run("background-task", share: 2) { input in
            var label = "refused"
            if let transfer = BackgroundTransfer(taskDescription: input) {
                guard transfer.taskDescription == input else {
                    return ("changed", "\(input) wrote \(transfer.taskDescription)")
                }
                if let range = transfer.range, !(0 <= range.lowerBound && range.lowerBound < range.upperBound) {
                    return ("bounds", "\(input) read as \(range)")
                }
                label = "read"
            }
            let transfer = BackgroundTransfer(job: "j", key: CacheKey("k"), range: asked)
            let fields = [ContentMetadata.HeaderField(name: "Content-Range", value: input)]
            let verdict = BackgroundImport.verdict(for: transfer, status: 206, fields: fields, fileLength: asked.length)
            if case .store(let range, let metadata) = verdict {
                // The model: the value, trimmed, is `bytes FIRST-LAST/TOTAL` with these numbers.
                // HTTP's digits may start with zeros (`01048576`, found with
                // `MEDIACACHE_FUZZ_SEED=4`), and the unit's name is case-insensitive (RFC 9110,
                // 14.1: `Bytes`, found with `MEDIACACHE_FUZZ_SEED=2`).
                let value = input.trimmingCharacters(in: .init(charactersIn: " \t"))
                let numbers =
                    value.lowercased().hasPrefix("bytes ")
                    ? value.dropFirst(6).split(separator: "-", maxSplits: 1).flatMap { $0.split(separator: "/") }
                        .map { String($0.drop { $0 == "0" }) } : []
                guard range == asked, let total = metadata.length, numbers == ["1048576", "2097151", String(total)],
                    total >= asked.upperBound
                else { return ("stored", "\(input) stored as \(range), \(String(describing: metadata.length))") }
                label = "stored"
            }
            return (label, nil)
        }
        try Mutator.expectVaried(outcomes, ["read", "refused"])
    }
}
