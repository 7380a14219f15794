// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Crypto
public import MediaCache

/// How a test reaches its test origin. The suites that check origin behaviour (the read
/// path, freshness, the proxy contract) run once for each, so every behaviour they check
/// holds over plain HTTP, over TLS with HTTP/1.1, and over TLS with HTTP/2.
public enum OriginScheme: String, CaseIterable, Sendable, CustomStringConvertible {
    /// Plain HTTP/1.1.
    case http
    /// HTTPS with HTTP/1.1 (the origin offers only `http/1.1` in ALPN).
    case https
    /// HTTPS with HTTP/2 (the origin offers `h2` first).
    case http2

    /// How the origin presents itself over TLS, or `nil` for plain HTTP; its certificate is
    /// from ``TestCertificateAuthority/shared``, which the harness's fetcher trusts.
    public func tlsOptions() throws -> TestOrigin.TLSOptions? {
        switch self {
        case .http: nil
        case .https: try .trusted(applicationProtocols: ["http/1.1"])
        case .http2: try .trusted(applicationProtocols: ["h2", "http/1.1"])
        }
    }

    /// The HTTP version the origin sees requests in.
    public var requestVersion: String {
        self == .http2 ? "HTTP/2.0" : "HTTP/1.1"
    }

    public var description: String { rawValue }
}

/// What sends the read path's requests to the origin.
public enum FetcherKind: String, Sendable {
    /// ``HTTPOriginFetcher``.
    case asyncHTTPClient
    /// ``URLSessionOriginFetcher``, on swift-corelibs-foundation here.
    case urlSession
}

/// The origin's scheme and the fetcher that reaches it. The read-path contract runs over
/// AsyncHTTPClient for every scheme, and over URLSession for plain HTTP: Linux's URLSession
/// (libcurl underneath) takes its trusted roots from the system only, so it cannot trust the
/// test CA, and HTTP/2 needs TLS.
public struct FetcherSetup: Sendable, CustomStringConvertible {
    public var scheme: OriginScheme
    public var fetcher: FetcherKind

    public init(_ scheme: OriginScheme, _ fetcher: FetcherKind) {
        self.scheme = scheme
        self.fetcher = fetcher
    }

    public static let all =
        OriginScheme.allCases.map { FetcherSetup($0, .asyncHTTPClient) } + [FetcherSetup(.http, .urlSession)]

    public var description: String { fetcher == .urlSession ? "\(scheme), URLSession" : scheme.rawValue }
}

/// How a suite's harness is set up: the origin's scheme and whether the store is encrypted.
/// The proxy-contract suite runs once for each scheme and once more over an encrypted store,
/// so every behaviour it checks holds with encryption at rest too.
public struct TestSetup: Sendable, CustomStringConvertible {
    public var scheme: OriginScheme
    public var encrypted: Bool

    public init(scheme: OriginScheme, encrypted: Bool) {
        self.scheme = scheme
        self.encrypted = encrypted
    }

    /// Each scheme over an unencrypted store, and plain HTTP over an encrypted one.
    public static let all =
        OriginScheme.allCases.map { TestSetup(scheme: $0, encrypted: false) } + [
            TestSetup(scheme: .http, encrypted: true)
        ]

    /// The key of the tests' encrypted stores.
    public static var encryptionKey: SymmetricKey { SymmetricKey(data: (0..<32).map { UInt8($0) ^ 0xa5 }) }

    /// `configuration`, encrypted with ``encryptionKey`` when the setup says so.
    public func store(_ configuration: CacheStore.Configuration = CacheStore.Configuration())
        -> CacheStore.Configuration
    {
        var configuration = configuration
        if encrypted { configuration.encryptionKey = Self.encryptionKey }
        return configuration
    }

    public var description: String { encrypted ? "\(scheme), encrypted store" : scheme.rawValue }
}
