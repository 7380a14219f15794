// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore

/// Sequential write and read throughput of the store against plain `FileHandle` I/O of the
/// same bytes, in the same run, and the process's peak memory.
struct StoreBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Store throughput vs plain FileHandle writes and reads, and peak memory."
    )

    @Option(help: "The resource's size in MiB.")
    var size: Int = 256

    @Option(help: "The size of each write and read in KiB.")
    var chunk: Int = 1024

    @Option(help: "How many times to repeat each measurement (the best run is reported).")
    var rounds: Int = 3

    @Option(help: "A scratch folder (default: a new temporary folder, removed afterwards).")
    var directory: String?

    func validate() throws {
        guard size > 0, chunk > 0, rounds > 0 else {
            throw ValidationError("--size, --chunk and --rounds must be positive.")
        }
        guard (size << 10) % chunk == 0 else { throw ValidationError("--size must be a multiple of --chunk.") }
    }

    func run() async throws {
        let root = URL(fileURLWithPath: directory ?? NSTemporaryDirectory()).appendingPathComponent(
            "mediacache-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }

        let total = Int64(size) << 20
        let chunkBytes = chunk << 10
        // One chunk of content, written at every offset: generation stays out of the timing.
        let block = DeterministicContent(seed: 7).buffer(offset: 0, length: chunkBytes)
        let blockData = Data(block.readableBytesView)

        var results: [String: Double] = [:]
        func record(_ name: String, _ seconds: Double) {
            results[name] = min(results[name] ?? .infinity, seconds)
        }
        for round in 0..<rounds {
            let plainPath = root.appendingPathComponent("plain-\(round)").path
            record(
                "plain write",
                try time {
                    FileManager.default.createFile(atPath: plainPath, contents: nil)
                    let handle = try FileHandle(forWritingAtPath: plainPath).unwrap()
                    for _ in 0..<(total / Int64(chunkBytes)) { try handle.write(contentsOf: blockData) }
                    try handle.close()
                })
            record(
                "plain read",
                try time {
                    let handle = try FileHandle(forReadingAtPath: plainPath).unwrap()
                    var count = 0
                    while let data = try handle.read(upToCount: chunkBytes), !data.isEmpty { count += data.count }
                    try handle.close()
                    precondition(count == total)
                })
            try FileManager.default.removeItem(atPath: plainPath)

            for synchronizes in [true, false] {
                var configuration = CacheStore.Configuration()
                configuration.maxBytes = total * 2
                configuration.synchronizesData = synchronizes
                let label = synchronizes ? "store write (fdatasync before commit)" : "store write (no fdatasync)"
                let storeDirectory = root.appendingPathComponent("store-\(round)-\(synchronizes)")
                let store = try await CacheStore.open(directory: storeDirectory, configuration: configuration)
                let key = CacheKey("bench")
                let handle = try store.openEntry(key)
                try handle.updateMetadata(ContentMetadata(length: total, mimeType: "video/mp4", acceptsRanges: true))
                record(
                    label,
                    try await time {
                        var offset: Int64 = 0
                        while offset < total {
                            try await handle.write(block, at: offset)
                            offset += Int64(chunkBytes)
                        }
                    })
                if !synchronizes {
                    record(
                        "store read",
                        try await time {
                            var offset: Int64 = 0
                            var count = 0
                            while offset < total {
                                let bytes = try await handle.read(ByteRange(offset: offset, length: Int64(chunkBytes)))
                                count += bytes.readableBytes
                                offset += Int64(chunkBytes)
                            }
                            precondition(count == total)
                        })
                }
                handle.close()
                try await store.close()
                try FileManager.default.removeItem(at: storeDirectory)
            }
        }

        func mbps(_ name: String) -> Double { Double(total) / 1_048_576 / results[name]! }
        print("Store benchmark: \(size) MiB resource, \(chunk) KiB chunks, best of \(rounds) rounds")
        print(pad("measurement", 40) + pad("MiB/s", 10) + "ratio vs FileHandle")
        for (name, baseline) in [
            ("plain write", "plain write"), ("store write (fdatasync before commit)", "plain write"),
            ("store write (no fdatasync)", "plain write"), ("plain read", "plain read"), ("store read", "plain read"),
        ] {
            print(
                pad(name, 40) + pad(String(format: "%.0f", mbps(name)), 10)
                    + String(format: "%.2f", mbps(name) / mbps(baseline)))
        }
        if let peak = ProcessMemory.peakResidentBytes() {
            print(String(format: "peak memory (VmHWM): %.1f MiB", Double(peak) / 1_048_576))
        }
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    private func time(_ body: () throws -> Void) throws -> Double {
        let start = ContinuousClock.now
        try body()
        return (ContinuousClock.now - start).seconds
    }

    private func time(_ body: () async throws -> Void) async throws -> Double {
        let start = ContinuousClock.now
        try await body()
        return (ContinuousClock.now - start).seconds
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension Optional {
    func unwrap() throws -> Wrapped {
        guard let self else { throw ValidationError("Cannot open a scratch file.") }
        return self
    }
}
