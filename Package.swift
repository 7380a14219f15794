// swift-tools-version: 6.1
// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "MediaCache",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18)],
    products: [
        .library(name: "MediaCache", targets: ["MediaCache"]),
        .library(name: "MediaCacheHTTP", targets: ["MediaCacheHTTP"]),
        .library(name: "MediaCacheProxy", targets: ["MediaCacheProxy"]),
        .library(name: "MediaCacheAVFoundation", targets: ["MediaCacheAVFoundation"]),
        // For the tests of packages built on this one (AppleCheck/): a test origin, traces.
        .library(name: "MediaCacheTestSupport", targets: ["MediaCacheTestSupport"]),
        .executable(name: "mediacache", targets: ["mediacache"]),
        .executable(name: "mediacache-bench", targets: ["mediacache-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-async-algorithms.git", from: "1.1.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // `swift package generate-documentation` (the DocC catalogs; CI builds them).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-http-structured-headers.git", from: "1.7.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
    ],
    targets: [
        // The engine: store, spans, eviction, read path. No server code.
        .target(
            name: "MediaCache",
            dependencies: [
                "MediaCacheHTTPFields",
                "CMediaCacheChecksum",
                "CMediaCacheSystem",
                .product(name: "Crypto", package: "swift-crypto"),
                // AES-128-CBC, for the HLS segments an export writes as one file.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // CRC-32C with the processor's instruction: what Swift cannot reach (every stored block's
        // checksum).
        .target(name: "CMediaCacheChecksum"),
        // System calls Swift's C library module leaves out (Linux `syncfs`).
        .target(name: "CMediaCacheSystem"),
        // Parsers of HTTP fields from outside (Range, Content-Range, Cache-Control, dates,
        // Host, Set-Cookie, CMCD, origin digests; structured fields by the library): pure, at the bottom, shared by the engine, the fetchers and the
        // proxy.
        .target(
            name: "MediaCacheHTTPFields",
            dependencies: [
                .product(name: "StructuredFieldValues", package: "swift-http-structured-headers"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
            ],
            swiftSettings: swiftSettings
        ),
        // Origin fetching on AsyncHTTPClient.
        .target(
            name: "MediaCacheHTTP",
            dependencies: [
                "MediaCache",
                "MediaCacheHTTPFields",
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // The local caching proxy.
        .target(
            name: "MediaCacheProxy",
            dependencies: [
                "MediaCache",
                "MediaCacheHTTPFields",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
            ],
            swiftSettings: swiftSettings
        ),
        // Apple-only adapter: every file is inside `#if canImport(AVFoundation)`.
        .target(
            name: "MediaCacheAVFoundation",
            dependencies: ["MediaCache", "MediaCacheProxy", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        // Deterministic content, a crash-test writer, the test origin (HTTP, and HTTPS with
        // certificates made at run time);
        // shared by the tests and by the CLI's developer commands.
        .target(
            name: "MediaCacheTestSupport",
            dependencies: [
                "MediaCache",
                "MediaCacheHTTP",
                "MediaCacheHTTPFields",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The shipped command-line tool: `serve`. Links no test support.
        .executableTarget(
            name: "mediacache",
            dependencies: [
                "MediaCache",
                "MediaCacheHTTP",
                "MediaCacheHTTPFields",
                "MediaCacheProxy",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Benchmarks, the test origin as a process and the crash-test writer.
        .executableTarget(
            name: "mediacache-bench",
            dependencies: [
                "MediaCache",
                "MediaCacheHTTP",
                "MediaCacheHTTPFields",
                "MediaCacheTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MediaCacheTests",
            dependencies: [
                "MediaCache", "MediaCacheHTTP", "MediaCacheHTTPFields", "MediaCacheTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MediaCacheHTTPTests",
            dependencies: ["MediaCache", "MediaCacheHTTP", "MediaCacheHTTPFields", "MediaCacheTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MediaCacheProxyTests",
            dependencies: [
                "MediaCache", "MediaCacheHTTP", "MediaCacheHTTPFields", "MediaCacheProxy", "MediaCacheTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP field parsers alone, and their fuzz targets. (The fuzz corpus, Tests/FuzzCorpus,
        // is read from the source tree at test time by `Mutator`, not built.)
        .testTarget(
            name: "MediaCacheHTTPFieldsTests",
            dependencies: [
                "MediaCache", "MediaCacheHTTPFields", "MediaCacheTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "mediacacheTests",
            dependencies: [
                "mediacache", "mediacache-bench", "MediaCache", "MediaCacheHTTPFields", "MediaCacheProxy",
                "MediaCacheTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
