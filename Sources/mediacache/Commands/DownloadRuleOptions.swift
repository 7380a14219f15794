// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Dispatch
import Foundation
import Logging
import MediaCache
import MediaCacheProxy

/// `serve`'s rules for every pinned download, and the disk's floor.
struct ServeDownloadOptions: ParsableArguments {
    @Option(
        help:
            "At most this many bytes per second for the pinned downloads together, e.g. 2M (a player's reads are never held back).",
        transform: ByteSize.parse)
    var downloadRate: Int64?

    @Option(
        help:
            "Download pinned jobs only in these hours, local time, e.g. 01:00-06:00 (a job's own --window goes before it)."
    )
    var downloadWindow: String?

    @Option(
        help:
            "The networks pinned jobs download on: any, unmetered (the default: not metered, not in low-data mode) or not-constrained."
    )
    var downloadNetwork: String?

    @Option(
        help:
            "The power pinned jobs download on: any, charging or not-low (the default: not while the battery is low and not charging)."
    )
    var downloadPower: String?

    @Option(
        help:
            "The battery level, in percent, below which the power counts as low when not charging (default 20)."
    )
    var lowBattery: Int = 20

    @Option(
        help:
            "The folder of Linux's power-supply class to read the battery from (default /sys/class/power_supply; none there: the power is unknown and nothing waits for it)."
    )
    var powerSupply: String = SystemPower.defaultFolder

    @Option(
        help:
            "Free space to leave on the cache's disk, e.g. 2G (default: 5% of the disk, at most 1G): streaming entries go first, then pinned jobs wait.",
        transform: ByteSize.parse)
    var minFreeDisk: Int64?

    @Option(
        help:
            "Hours between checks of every pinned entry's stored bytes (read again at a low rate, damaged blocks fetched again); 0: none."
    )
    var scrubInterval: Int = 24

    func validate() throws {
        _ = try rules()
        guard (1...99).contains(lowBattery) else {
            throw ValidationError("--low-battery must be a percentage from 1 to 99.")
        }
        guard (0...24 * 365).contains(scrubInterval) else {
            throw ValidationError("--scrub-interval must be 0 (no scrub) to 8760 hours.")
        }
    }

    func rules() throws -> DownloadRules {
        try DownloadRuleText.rules(
            window: downloadWindow, network: downloadNetwork, rate: downloadRate, power: downloadPower,
            flag: "--download-")
    }

    /// The scrub of pinned entries `--scrub-interval` asks for.
    var scrub: PinScrubber.Configuration {
        var scrub = PinScrubber.Configuration()
        scrub.interval = scrubInterval > 0 ? .seconds(scrubInterval * 3600) : nil
        return scrub
    }
}

/// A job's own rules (`pin`, `downloads set`).
struct JobRuleOptions: ParsableArguments {
    @Option(help: "Download only in these hours, local time, e.g. 01:00-06:00, or any.")
    var window: String?

    @Option(help: "The networks to download on: any (\"this one anyway\"), unmetered or not-constrained.")
    var network: String?

    @Option(help: "At most this many bytes per second for this job, e.g. 500K.", transform: ByteSize.parse)
    var rate: Int64?

    @Option(help: "The power to download on: any (\"this one anyway\"), charging or not-low.")
    var power: String?

    func validate() throws { _ = try rules() }

    func rules() throws -> DownloadRules {
        try DownloadRuleText.rules(window: window, network: network, rate: rate, power: power, flag: "--")
    }

    /// The rules as the admin endpoints take them.
    var text: RulesText { RulesText(window: window, network: network, rate: rate, power: power) }
}

/// Rules from their words, with a clear error for a word that is not one.
enum DownloadRuleText {
    static func rules(window: String?, network: String?, rate: Int64?, power: String?, flag: String) throws
        -> DownloadRules
    {
        do {
            return try DownloadRules.parse(window: window, network: network, rate: rate, power: power, option: flag)
        } catch let error as CacheError {
            throw ValidationError(error.message)
        }
    }
}

/// What the system says of the network: NetworkManager's `Metered` property (over D-Bus, by
/// `busctl`), asked every 30 s. Without NetworkManager the network counts as unmetered.
enum SystemNetwork {
    /// Follows the network until the returned task is cancelled (`serve` does, as it stops).
    static func follow(into downloads: DownloadQueue, logger: Logger) -> Task<Void, Never> {
        return Task.detached {
            var told: DownloadRules.NetworkConditions?
            while !Task.isCancelled {
                let conditions = await ask() ?? .unknown
                if conditions != told {
                    if told != nil || conditions != .unknown {
                        logger.info(
                            "NetworkManager says the network is \(conditions.isMetered ? "metered" : "not metered")")
                    }
                    downloads.networkChanged(conditions)
                    told = conditions
                }
                try? await Task.sleep(for: .seconds(30))
            }
        }
    }

    /// NetworkManager's answer, asked on a thread of its own (a child process is waited for).
    private static func ask() async -> DownloadRules.NetworkConditions? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                process.arguments = [
                    "busctl", "get-property", "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager",
                    "org.freedesktop.NetworkManager", "Metered",
                ]
                let output = Pipe()
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                do {
                    try process.run()
                } catch {
                    return continuation.resume(returning: nil)
                }
                let data = output.fileHandleForReading.readDataToEndOfFile().prefix(256)
                process.waitUntilExit()
                guard process.terminationStatus == 0 else { return continuation.resume(returning: nil) }
                continuation.resume(
                    returning: DownloadRules.NetworkConditions(
                        networkManagerMetered: String(decoding: data, as: UTF8.self)))
            }
        }
    }
}
