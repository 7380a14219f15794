import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestSupport
import NIOCore
import ServiceLifecycle

/// Hot throughput and cold time to first byte through the proxy against the same requests
/// sent straight to the test origin, in one run.
struct ProxyBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Proxy vs direct origin: hot full-file throughput and cold time to first byte."
    )

    @Option(help: "The hot resource's size in MiB.")
    var size: Int = 128

    @Option(help: "How many times to repeat each measurement (the best is reported).")
    var rounds: Int = 3

    func validate() throws {
        guard size > 0, rounds > 0 else { throw ValidationError("--size and --rounds must be positive.") }
    }

    func run() async throws {
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("mediacache-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let total = Int64(size) << 20
        let origin = try await TestOrigin.start()
        origin.serve(.generated(length: total, seed: 51), at: "/hot.mp4")
        var storeConfiguration = CacheStore.Configuration()
        storeConfiguration.maxBytes = total * 2 + (256 << 20)
        let store = try await CacheStore.open(directory: root, configuration: storeConfiguration)
        let fetcher = HTTPOriginFetcher()
        let reader = CachingReader(store: store, fetcher: fetcher)
        var proxyConfiguration = ProxyConfiguration()
        proxyConfiguration.port = 0
        proxyConfiguration.logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = ProxyServer.application(reader: reader, configuration: proxyConfiguration) { continuation.yield($0) }
        let group = ServiceGroup(configuration: .init(services: [app], logger: proxyConfiguration.logger))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(decompression: .disabled))

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = await iterator.next()!
            func proxied(_ path: String) -> String {
                "http://127.0.0.1:\(port)/?url=" + origin.url(path).absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            }
            // Warm the cache, then measure.
            _ = try await fetch(client, proxied("/hot.mp4"))
            var direct = Double.infinity
            var hot = Double.infinity
            for _ in 0..<rounds {
                direct = min(direct, try await fetch(client, origin.url("/hot.mp4").absoluteString).seconds)
                hot = min(hot, try await fetch(client, proxied("/hot.mp4")).seconds)
            }
            var directFirstByte = Double.infinity
            var coldFirstByte = Double.infinity
            for round in 0..<max(rounds, 5) {
                let path = "/cold-\(round).mp4"
                origin.serve(.generated(length: 8 << 20, seed: UInt64(100 + round)), at: path)
                directFirstByte = min(directFirstByte, try await fetch(client, origin.url(path).absoluteString, stopAfterFirstByte: true).firstByte)
                coldFirstByte = min(coldFirstByte, try await fetch(client, proxied(path), stopAfterFirstByte: true).firstByte)
            }
            let mib = Double(total) / 1_048_576
            print("Proxy benchmark, \(size) MiB hot resource, best of \(rounds) rounds")
            print(String(format: "hot full file: proxy %.0f MiB/s, direct from origin %.0f MiB/s, ratio %.2f", mib / hot, mib / direct, direct / hot))
            print(String(format: "cold time to first byte: proxy %.2f ms, direct %.2f ms, ratio %.2f", coldFirstByte * 1000, directFirstByte * 1000, coldFirstByte / directFirstByte))
            if let peak = ProcessMemory.peakResidentBytes() {
                print(String(format: "peak memory of the whole run (origin, proxy, client in one process): %.1f MiB", Double(peak) / 1_048_576))
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        try await client.shutdown()
        try await store.close()
        try await fetcher.shutdown()
        try await origin.shutdown()
    }

    /// Reads a URL whole (or to its first byte) and returns the times taken.
    private func fetch(_ client: HTTPClient, _ url: String, stopAfterFirstByte: Bool = false) async throws -> (seconds: Double, firstByte: Double) {
        let start = ContinuousClock.now
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(60))
        guard response.status.code == 200 else { throw ValidationError("\(url) answered \(response.status.code)") }
        var firstByte: Double?
        for try await chunk in response.body where chunk.readableBytes > 0 {
            if firstByte == nil {
                firstByte = (ContinuousClock.now - start).seconds
                if stopAfterFirstByte { break }
            }
        }
        return ((ContinuousClock.now - start).seconds, firstByte ?? .infinity)
    }
}
