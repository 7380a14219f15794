// swift-tools-version: 6.1
// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0
// Compiles MediaCache's Apple adapter (Sources/MediaCacheAVFoundation, linked here unchanged)
// against a stand-in of the AVFoundation, Network and UIKit it uses, and drives it with simulated AVPlayer
// loading requests. Linux only, built by .ci/run; it never ships: on Apple platforms the
// adapter builds against the real AVFoundation in the main package.
import PackageDescription

let package = Package(
    name: "AppleCheck",
    dependencies: [
        .package(name: "MediaCache", path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
    ],
    targets: [
        .target(name: "AVFoundation", path: "Sources/AVFoundation"),
        .target(name: "Network", path: "Sources/Network"),
        .target(name: "UIKit", path: "Sources/UIKit"),
        .target(
            name: "CheckedAVFoundationAdapter",
            dependencies: [
                "AVFoundation", "Network", "UIKit",
                .product(name: "MediaCache", package: "MediaCache"),
                .product(name: "MediaCacheProxy", package: "MediaCache"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Sources/CheckedAVFoundationAdapter",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("InternalImportsByDefault"),
            ]
        ),
        .testTarget(
            name: "AppleCheckTests",
            dependencies: [
                "AVFoundation", "Network", "UIKit", "CheckedAVFoundationAdapter",
                .product(name: "MediaCache", package: "MediaCache"),
                .product(name: "MediaCacheHTTP", package: "MediaCache"),
                .product(name: "MediaCacheProxy", package: "MediaCache"),
                .product(name: "MediaCacheTestSupport", package: "MediaCache"),
            ]
        ),
    ]
)
