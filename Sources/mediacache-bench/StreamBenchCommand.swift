// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import NIOCore

/// Streams a large cold resource through the read path (origin → store → reader) and
/// reports throughput and the process's peak memory.
struct StreamBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "Peak memory and throughput while streaming a cold resource through the read path."
    )

    @Option(help: "The resource's size in MiB.")
    var size: Int = 2048

    @Option(help: "A scratch folder for the store (default: a new temporary folder, removed afterwards).")
    var directory: String?

    func validate() throws {
        guard size > 0 else { throw ValidationError("--size must be positive.") }
    }

    func run() async throws {
        let root = URL(fileURLWithPath: directory ?? NSTemporaryDirectory()).appendingPathComponent(
            "mediacache-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let total = Int64(size) << 20
        let origin = try await TestOrigin.start()
        origin.serve(.generated(length: total, seed: 21), at: "/big.mp4")
        var storeConfiguration = CacheStore.Configuration()
        storeConfiguration.maxBytes = total + (64 << 20)
        storeConfiguration.synchronizesData = ProcessInfo.processInfo.environment["MC_NOSYNC"] == nil
        let store = try await CacheStore.open(directory: root, configuration: storeConfiguration)
        let fetcher = HTTPOriginFetcher()
        let reader = CachingReader(store: store, fetcher: fetcher)
        let resource = origin.resource(at: "/big.mp4")!
        let peakBefore = ProcessMemory.peakResidentBytes() ?? 0

        for pass in ["cold (origin → store → reader)", "hot (store → reader)"] {
            let start = ContinuousClock.now
            let stream = try await reader.read(origin.url("/big.mp4"))
            var received: Int64 = 0
            var chunks = 0
            for try await chunk in stream {
                // Check one chunk in 32 byte for byte; checking all would measure the checker.
                if chunks % 32 == 0, resource.firstMismatch(in: chunk, at: received) != nil {
                    throw ValidationError("Wrong bytes at \(received).")
                }
                received += Int64(chunk.readableBytes)
                chunks += 1
            }
            guard received == total else { throw ValidationError("Got \(received) of \(total) bytes.") }
            let seconds = (ContinuousClock.now - start).seconds
            print(
                String(
                    format: "%@: %d MiB in %.2f s, %.0f MiB/s", pass, size, seconds, Double(total) / 1_048_576 / seconds
                ))
        }
        try await store.close()
        try await fetcher.shutdown()
        try await origin.shutdown()
        let peak = ProcessMemory.peakResidentBytes() ?? 0
        print(
            String(
                format: "peak memory (VmHWM): %.1f MiB (%.1f MiB before streaming)", Double(peak) / 1_048_576,
                Double(peakBefore) / 1_048_576))
    }
}
