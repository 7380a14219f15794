// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

#if canImport(AVFoundation)
    import AVFoundation
    import Foundation
    @_spi(Adapter) public import MediaCache
    #if canImport(UIKit)
        import UIKit
    #endif

    /// Tells a download queue what the system says of the device's power: the battery's level
    /// and whether it charges (UIKit's battery monitoring, where there is UIKit) and Low Power
    /// Mode (`ProcessInfo`). Jobs whose power rule forbids it wait, saying "waiting for power",
    /// and fills and preloads stop while the power is low
    /// (``MediaCache/DownloadRules/power``); keep the follower as long as the queue.
    ///
    /// ```swift
    /// let downloads = try DownloadQueue(reader: reader)
    /// let power = SystemPowerFollower(downloads)
    /// downloads.start()
    /// ```
    // The observer tokens are set once, in `init`, and only handed back to NotificationCenter
    // (which is safe from any thread) in `deinit`.
    public final class SystemPowerFollower: @unchecked Sendable {
        private let observers: [any NSObjectProtocol]

        /// Starts following the power for `downloads` (battery monitoring is turned on).
        public init(_ downloads: DownloadQueue) {
            var names: [Notification.Name] = [.NSProcessInfoPowerStateDidChange]
            #if canImport(UIKit)
                names += [UIDevice.batteryLevelDidChangeNotification, UIDevice.batteryStateDidChangeNotification]
            #endif
            observers = names.map { name in
                NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) {
                    [weak downloads] _ in
                    guard let downloads else { return }
                    DispatchQueue.main.async { MainActor.assumeIsolated { Self.tell(downloads) } }
                }
            }
            DispatchQueue.main.async { [weak downloads] in
                MainActor.assumeIsolated {
                    #if canImport(UIKit)
                        UIDevice.current.isBatteryMonitoringEnabled = true
                    #endif
                    if let downloads { Self.tell(downloads) }
                }
            }
        }

        deinit {
            for observer in observers { NotificationCenter.default.removeObserver(observer) }
        }

        /// What the system says now, told to the queue (UIKit's device is the main actor's).
        @MainActor private static func tell(_ downloads: DownloadQueue) {
            let lowPowerMode = ProcessInfo.processInfo.isLowPowerModeEnabled
            #if canImport(UIKit)
                let device = UIDevice.current
                let state: DownloadRules.PowerConditions.SystemBattery? =
                    switch device.batteryState {
                    case .unplugged: .unplugged
                    case .charging: .charging
                    case .full: .full
                    default: nil
                    }
                downloads.powerChanged(
                    .init(systemLevel: device.batteryLevel, battery: state, lowPowerMode: lowPowerMode))
            #else
                // No battery to read here (a Mac follows Low Power Mode alone).
                downloads.powerChanged(.init(systemLevel: -1, battery: nil, lowPowerMode: lowPowerMode))
            #endif
        }
    }
#endif
