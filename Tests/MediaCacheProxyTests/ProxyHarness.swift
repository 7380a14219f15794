// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import Logging
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import NIOHTTP1
import RawStructuredFieldValues
import Synchronization
import Testing

/// The proxy on 127.0.0.1 port 0 in front of the test origin, and a client to call it.
struct ProxyHarness {
    let base: Harness
    let port: Int
    let client: HTTPClient
    let proxy: EmbeddedProxy

    var origin: TestOrigin { base.origin }

    /// The proxy URL for the origin's `path`, with extra query text.
    func url(_ path: String, extra: String = "") -> String {
        proxyURL(for: origin.url(path).absoluteString, extra: extra)
    }

    func proxyURL(for originURL: String, extra: String = "") -> String {
        let encoded = originURL.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? originURL
        return "http://127.0.0.1:\(port)/?url=\(encoded)\(extra)"
    }

    struct Reply {
        var status: Int
        var headers: HTTPHeaders
        var body: ByteBuffer
        /// The body as UTF-8 text.
        var text: String { String(buffer: body) }
    }

    /// Sends a request through the proxy and reads the whole answer.
    func get(_ url: String, method: HTTPMethod = .GET, headers: [(String, String)] = []) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await client.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 64 << 20)
        // Every answer says what the cache did (RFC 9211), in the field's grammar.
        let status = response.headers.first(name: "cache-status")
        #expect(status.map(Self.isCacheStatus) == true, "Cache-Status \(status ?? "missing") for \(url)")
        return Reply(status: Int(response.status.code), headers: response.headers, body: body)
    }

    /// Whether `value` is a `Cache-Status` of this cache with the parameters it writes (RFC 9211),
    /// read by the structured-field parser: its last member (each cache adds its own).
    static func isCacheStatus(_ value: String) -> Bool {
        var parser = StructuredFieldValueParser(Array(value.utf8))
        guard let list = try? parser.parseListFieldValue(), case .item(let member)? = list.last,
            case .token("MediaCache") = member.rfc9651BareItem
        else { return false }
        return member.rfc9651Parameters.allSatisfy { name, value in
            switch (name, value) {
            case ("hit", .bool(true)), ("stored", .bool(true)): true
            case ("fwd", .token(let reason)): ["uri-miss", "stale", "partial", "bypass"].contains(reason)
            case ("fwd-status", .integer(let status)): (100...599).contains(status)
            case ("ttl", .integer): true
            case ("detail", .token): true
            default: false
            }
        }
    }

    /// ``with(setup:allowedHosts:token:store:fetcher:reader:configure:_:)`` with one manual clock
    /// for the store, the fetcher and the origin, which the test moves.
    static func withClock(
        reader: CachingReader.Configuration = CachingReader.Configuration(),
        _ body: (ProxyHarness, ManualClock) async throws -> Void
    ) async throws {
        let clock = ManualClock(start: Date())
        var (store, fetcher) = (CacheStore.Configuration(), HTTPOriginFetcher.Configuration())
        (store.clock, fetcher.clock) = (clock, clock)
        try await with(store: store, fetcher: fetcher, reader: reader) { proxy in
            proxy.origin.useClock(clock)
            try await body(proxy, clock)
        }
    }

    static func with(
        setup: TestSetup = TestSetup(scheme: .http, encrypted: false),
        allowedHosts: Set<String> = [],
        token: String? = nil,
        store storeConfiguration: CacheStore.Configuration = CacheStore.Configuration(),
        fetcher fetcherConfiguration: HTTPOriginFetcher.Configuration = HTTPOriginFetcher.Configuration(),
        reader readerConfiguration: CachingReader.Configuration = CachingReader.Configuration(),
        configure: (ProxyConfiguration) -> ProxyConfiguration = { $0 },
        _ body: (ProxyHarness) async throws -> Void
    ) async throws {
        var fetcherConfiguration = fetcherConfiguration
        fetcherConfiguration.allowedHosts = allowedHosts
        try await Harness.with(
            scheme: setup.scheme, store: setup.store(storeConfiguration), reader: readerConfiguration,
            fetcher: fetcherConfiguration
        ) { base in
            var configuration = ProxyConfiguration()
            configuration.port = 0
            configuration.logger = Logger(label: "proxy-test", factory: { _ in SwiftLogNoOpLogHandler() })
            configuration = configure(configuration)
            configuration.token = token
            let proxy = try await EmbeddedProxy.start(reader: base.reader, configuration: configuration)
            // As many connections as a test has players: with the default eight per host, the
            // ninth of sixteen concurrent requests waits for a free connection, and on a loaded
            // machine gave up after the connect timeout (getConnectionFromPoolTimeout).
            var clientConfiguration = HTTPClient.Configuration(decompression: .disabled)
            clientConfiguration.connectionPool = .init(
                idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
            let harness = ProxyHarness(base: base, port: proxy.port, client: client, proxy: proxy)
            do {
                try await body(harness)
            } catch {
                await proxy.stop()
                try? await client.shutdown()
                throw error
            }
            await proxy.stop()
            try await client.shutdown()
        }
    }
}

/// Runs a command-line tool (see ``ChildProcess/run(_:)``).
func runTool(_ arguments: [String]) async throws -> (status: Int32, output: Data, error: String) {
    try await ChildProcess.run(arguments)
}

func toolExists(_ name: String) -> Bool {
    ChildProcess.toolExists(name)
}

/// What `make` gives for `key`, made once per test process: several tests play the same media,
/// and ffmpeg's encodes were a fifth of the suite's processor time. A failure is kept too (each
/// test that asks fails the same way).
func madeOnce<T: Sendable>(_ key: String, _ make: @escaping @Sendable () async throws -> T) async throws -> T {
    let task = madeMedia.withLock { made in
        if let task = made[key] { return task }
        let task = Task<any Sendable, any Error> { try await make() }
        made[key] = task
        return task
    }
    guard let value = try await task.value as? T else { preconditionFailure("\(key) was made as another type") }
    return value
}

private let madeMedia = Mutex<[String: Task<any Sendable, any Error>]>([:])
