// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import Testing

/// The power rule against the real binary, every flag at its default: a power-supply folder
/// made for the test (`serve --power-supply`) says the battery is at 15 % and not charging. A
/// pin and a preload wait and say "waiting for power" (`downloads`, the status page and
/// `/status.json`), no byte of them moves, a player's read is served as before, and when the
/// folder says charging both go on by themselves.
@Suite(.stallLimit, .endToEnd) struct PowerRuleCommandTests {
    /// Writes a battery `BAT0` and a mains supply `AC` into `folder`.
    static func writeSupplies(_ folder: URL, capacity: Int, charging: Bool) throws {
        let files = [
            "BAT0": ["type": "Battery", "capacity": "\(capacity)", "status": charging ? "Charging" : "Discharging"],
            "AC": ["type": "Mains", "online": charging ? "1" : "0"],
        ]
        for (supply, contents) in files {
            let base = folder.appendingPathComponent(supply)
            try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
            for (name, text) in contents {
                try Data((text + "\n").utf8).write(to: base.appendingPathComponent(name), options: .atomic)
            }
        }
    }

    @Test func aLowBatteryHoldsPinsAndPreloadsNotPlayers() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let size = 2_000_000
        origin.serve(.generated(length: Int64(size), seed: 81), at: "/p/episode.mp3")
        origin.serve(.generated(length: Int64(size), seed: 82), at: "/p/next.mp3")
        origin.serve(.generated(length: Int64(size), seed: 83), at: "/p/now.mp3")
        origin.serve(.generated(length: Int64(size), seed: 84), at: "/p/anyway.mp3")
        try await withTemporaryDirectory { directory in
            let supplies = directory.appendingPathComponent("power_supply")
            try Self.writeSupplies(supplies, capacity: 15, charging: false)
            try await RunningServer.with(["--power-supply", supplies.path], origin: origin) { server in
                let folder = server.folder
                let port = String(server.info.port)
                let episode = origin.url("/p/episode.mp3").absoluteString
                let pinned = try await CacheCommandTests.mediacache(["pin", "--cache-dir", folder, episode])
                #expect(pinned.status == 0 && pinned.output.contains("waiting for power"), "\(pinned)")
                let preloaded = try await CacheCommandTests.mediacache([
                    "preload", "--port", port, "--seconds", "1", origin.url("/p/next.mp3").absoluteString,
                ])
                #expect(preloaded.status == 0, "\(preloaded.error)")
                let listed = try await CacheCommandTests.mediacache(["downloads", "--cache-dir", folder])
                #expect(listed.output.contains("queued (waiting for power)"), "\(listed.output)")
                #expect(listed.output.contains("the battery is at 15 % and not charging"), "\(listed.output)")
                let report = try CacheCommandTests.decoder.decode(
                    StatusReport.self,
                    from: Data(try await DownloadRuleCommandTests.get(server.info, "/status.json").utf8))
                #expect(report.power?.batteryLevel == 0.15 && report.power?.isCharging == false)
                #expect(report.pinned.first { $0.url.absoluteString == episode }?.waiting == .power)
                #expect(report.preloads.first?.waiting == "power" && report.preloads.first?.state == .queued)
                let page = try await DownloadRuleCommandTests.get(server.info, "/status")
                #expect(page.contains("waiting for power") && page.contains("Power: the battery is at 15 %"))
                // A player's read is served as before, every byte the origin's.
                try await DownloadRuleCommandTests.playsRight("/p/now.mp3", seed: 83, length: size, on: server)
                #expect(origin.bodyBytesSent("/p/episode.mp3") == 0 && origin.bodyBytesSent("/p/next.mp3") == 0)
                // "This one anyway": a job set to any power downloads on the low battery.
                let anyway = origin.url("/p/anyway.mp3").absoluteString
                let second = try await CacheCommandTests.mediacache(["pin", "--cache-dir", folder, anyway])
                #expect(second.status == 0 && second.output.contains("waiting for power"), "\(second)")
                let set = try await CacheCommandTests.mediacache([
                    "downloads", "set", anyway, "--power", "any", "--cache-dir", folder,
                ])
                #expect(set.status == 0 && set.output.contains("power any"), "\(set)")
                try await waitUntil {
                    let jobs = try await CacheCommandTests.json(
                        [DownloadJob].self, ["downloads", "--cache-dir", folder])
                    return jobs.first { $0.url.absoluteString == anyway }?.state == .completed
                }
                #expect(origin.bodyBytesSent("/p/episode.mp3") == 0, "the first still waits")
                let refused = try await CacheCommandTests.mediacache([
                    "downloads", "set", anyway, "--power", "sometimes", "--cache-dir", folder,
                ])
                #expect(
                    refused.status != 0 && refused.error.contains("not one of any, charging, not-low"), "\(refused)")

                // Charging begins: both go on by themselves (the folder is read every 10 s).
                try Self.writeSupplies(supplies, capacity: 16, charging: true)
                try await waitUntil {
                    let jobs = try await CacheCommandTests.json(
                        [DownloadJob].self, ["downloads", "--cache-dir", folder])
                    return jobs.first?.state == .completed
                }
                try await waitUntil {
                    let queue = try await CacheCommandTests.json(
                        [PreloadItem.Status].self, ["preload", "--port", port])
                    return queue.first?.state == .done
                }
                #expect(origin.bodyBytesSent("/p/episode.mp3") == Int64(size))
                try await DownloadRuleCommandTests.playsRight("/p/episode.mp3", seed: 81, length: size, on: server)
            }
        }
    }
}
