// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Dispatch
import Foundation
import Logging
import MediaCache

/// What Linux says of the device's power: the power-supply class in sysfs (`serve
/// --power-supply`, default `/sys/class/power_supply`), read every 10 s. The reading is thin;
/// what it means is ``DownloadRules/PowerConditions/init(powerSupplies:)``'s. No folder, or no
/// battery in it: the power is unknown and nothing waits for it.
enum SystemPower {
    static let defaultFolder = "/sys/class/power_supply"
    /// How often the supplies are read (sysfs sends no change notices).
    static let interval: Duration = .seconds(10)

    /// Tells `downloads` the power now.
    static func tell(_ downloads: DownloadQueue, folder: String, logger: Logger) async {
        let conditions = await read(folder)
        if conditions.isKnown {
            logger.info(
                "The power supply says \(conditions.batteryLevel.map { "\(Int(($0 * 100).rounded())) %" } ?? "a battery"), \(conditions.isCharging ? "charging" : "not charging")"
            )
        }
        downloads.powerChanged(conditions)
    }

    /// Follows the power until the returned task is cancelled (`serve` does, as it stops).
    static func follow(into downloads: DownloadQueue, folder: String, logger: Logger) -> Task<Void, Never> {
        return Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard !Task.isCancelled else { return }
                downloads.powerChanged(await read(folder))
            }
        }
    }

    /// The supplies in `folder`, read on a thread of their own (file reads block).
    private static func read(_ folder: String) async -> DownloadRules.PowerConditions {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: DownloadRules.PowerConditions(powerSupplies: supplies(in: folder)))
            }
        }
    }

    private static func supplies(in folder: String) -> [DownloadRules.PowerConditions.PowerSupply] {
        typealias Supply = DownloadRules.PowerConditions.PowerSupply
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.sorted().prefix(Supply.maximumCount).map { name in
            let base = URL(fileURLWithPath: folder).appendingPathComponent(name)
            func file(_ file: String) -> String? {
                guard let handle = try? FileHandle(forReadingFrom: base.appendingPathComponent(file)) else {
                    return nil
                }
                defer { try? handle.close() }
                return (try? handle.read(upToCount: Supply.maximumFileSize)).map { String(decoding: $0, as: UTF8.self) }
            }
            return Supply(
                type: file("type"), status: file("status"), capacity: file("capacity"), online: file("online"),
                present: file("present"))
        }
    }
}
