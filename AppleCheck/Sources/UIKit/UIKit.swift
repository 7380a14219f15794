// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

// A stand-in for the part of UIKit that MediaCache's Apple adapter uses for the battery (Low
// Power Mode, Apple's Foundation, is in the AVFoundation stand-in), so that the adapter's
// sources compile and run on Linux unchanged. It is never shipped. Declarations follow Apple's
// documented Swift declarations. The battery is unknown here, as on a device without one.

import Foundation

/// `class UIDevice`
@MainActor
public final class UIDevice {
    /// `enum UIDevice.BatteryState`
    public enum BatteryState: Int, Sendable {
        case unknown, unplugged, charging, full
    }

    /// `class var current: UIDevice { get }`
    public static let current = UIDevice()

    /// `var isBatteryMonitoringEnabled: Bool`
    public var isBatteryMonitoringEnabled = false
    /// `var batteryLevel: Float { get }`: -1, the level unknown.
    public var batteryLevel: Float { -1 }
    /// `var batteryState: UIDevice.BatteryState { get }`
    public var batteryState: BatteryState { .unknown }

    /// `static let batteryLevelDidChangeNotification: NSNotification.Name`
    public nonisolated static let batteryLevelDidChangeNotification = Notification.Name(
        "UIDeviceBatteryLevelDidChangeNotification")
    /// `static let batteryStateDidChangeNotification: NSNotification.Name`
    public nonisolated static let batteryStateDidChangeNotification = Notification.Name(
        "UIDeviceBatteryStateDidChangeNotification")
}
