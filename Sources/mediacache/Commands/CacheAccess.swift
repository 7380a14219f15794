import AsyncHTTPClient
import Crypto
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// The cache folder as the commands reach it: opened here, or, when a running
/// `mediacache serve` holds it, through that server's admin endpoints (`/_mediacache/…`).
enum CacheAccess {
    case local(store: CacheStore, reader: CachingReader, fetcher: HTTPOriginFetcher)
    case server(ServerInfo)

    /// The file a running server describes itself in, inside its cache folder.
    static func serverFile(in directory: URL) -> URL {
        directory.appendingPathComponent("server.json")
    }

    /// Opens `directory`, or finds the server that holds it.
    /// - Throws: ``CommandFailure`` with a one-line reason.
    static func open(_ directory: URL, encryptionKey: SymmetricKey? = nil) async throws -> CacheAccess {
        do {
            var configuration = CacheStore.Configuration()
            configuration.encryptionKey = encryptionKey
            let store = try await CacheStore.open(directory: directory, configuration: configuration)
            let fetcher = HTTPOriginFetcher()
            return .local(store: store, reader: CachingReader(store: store, fetcher: fetcher), fetcher: fetcher)
        } catch let error as CacheError where error.code == .storeLocked {
            guard let data = try? Data(contentsOf: serverFile(in: directory)), let info = try? JSONDecoder().decode(ServerInfo.self, from: data) else {
                throw CommandFailure("\(error.message) (no server file \(serverFile(in: directory).path) says which server holds it)")
            }
            return .server(info)
        } catch let error as CacheError {
            throw CommandFailure(error.message)
        }
    }

    /// Commits and closes a store opened here.
    func close() async {
        if case .local(let store, _, let fetcher) = self {
            try? await store.close()
            try? await fetcher.shutdown()
        }
    }

    var isServer: Bool {
        if case .server = self { return true }
        return false
    }

    // MARK: Questions and changes

    func entries() async throws -> [CacheEntrySummary] {
        switch self {
        case .local(let store, _, _): return store.entrySummaries()
        case .server(let info): return try await Self.ask(info, .GET, "entries")
        }
    }

    /// The entry for `url`, or `nil` when nothing of it is cached.
    func entry(_ url: URL) async throws -> CacheEntrySummary? {
        switch self {
        case .local(let store, _, _): return store.entrySummary(for: store.key(for: url))
        case .server(let info):
            do {
                return try await Self.ask(info, .GET, "entry", target: url)
            } catch let failure as CommandFailure where failure.status == 404 {
                return nil
            }
        }
    }

    /// The store's counts, with the server's request counts when a server answers.
    func stats() async throws -> AdminStats {
        switch self {
        case .local(let store, let reader, _):
            return AdminStats(store: store.summary(), proxy: ProxyStatistics.Snapshot(), downloadsInFlight: reader.activeDownloads)
        case .server(let info): return try await Self.ask(info, .GET, "stats")
        }
    }

    /// Removes the entry for `url`; whether there was one.
    func remove(_ url: URL) async throws -> Bool {
        switch self {
        case .local(let store, _, _):
            let key = store.key(for: url)
            let existed = store.metadata(for: key) != nil
            try await store.remove(key)
            return existed
        case .server(let info):
            let answer: [String: Bool] = try await Self.ask(info, .POST, "remove", target: url)
            return answer["removed"] ?? false
        }
    }

    /// Removes every entry; how many there were.
    func clear() async throws -> Int {
        switch self {
        case .local(let store, _, _):
            let count = store.summary().entries
            try await store.removeAll()
            return count
        case .server(let info):
            let answer: [String: Int] = try await Self.ask(info, .POST, "clear")
            return answer["removed"] ?? 0
        }
    }

    /// Prefetches `url` as `request` says, reporting progress; cancel the task to stop.
    func prefetch(_ url: URL, _ request: PrefetchRequest, progress: @escaping @Sendable (PrefetchProgress) -> Void) async throws -> PrefetchProgress {
        switch self {
        case .local(_, let reader, _):
            do {
                return try await request.run(url, reader: reader, progress: progress)
            } catch let error as CacheError {
                throw CommandFailure(error.message)
            }
        case .server(let info):
            var query = [URLQueryItem(name: "target", value: url.absoluteString)]
            if let range = request.range { query.append(URLQueryItem(name: "range", value: "\(range.lowerBound)-\(range.upperBound - 1)")) }
            if let seconds = request.seconds { query.append(URLQueryItem(name: "seconds", value: String(seconds))) }
            switch request.variant {
            case .first: break
            case .lowestBandwidth: query.append(URLQueryItem(name: "variant", value: "lowest"))
            case .highestBandwidth: query.append(URLQueryItem(name: "variant", value: "highest"))
            case .atMost(let bps): query.append(URLQueryItem(name: "variant", value: String(bps)))
            }
            let response = try await HTTPClient.shared.execute(try Self.request(info, .POST, "prefetch", query: query), timeout: .hours(24))
            guard response.status == .ok else { throw try await Self.failure(response) }
            var pending: [UInt8] = []
            for try await chunk in response.body {
                pending += chunk.readableBytesView
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = Data(pending[..<newline])
                    pending.removeSubrange(...newline)
                    if let update = try? JSONDecoder().decode(PrefetchProgress.self, from: line) {
                        progress(update)
                    } else if let done = try? JSONDecoder().decode([String: PrefetchProgress].self, from: line), let result = done["done"] {
                        return result
                    } else if let failed = try? JSONDecoder().decode([String: String].self, from: line), let message = failed["error"] {
                        throw CommandFailure(message)
                    }
                }
            }
            throw CommandFailure("The server at \(info.baseURL) ended the prefetch without a result.")
        }
    }

    // MARK: Talking to the server

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()

    private static func request(_ info: ServerInfo, _ method: HTTPMethod, _ name: String, query: [URLQueryItem]) throws -> HTTPClientRequest {
        // Every byte outside RFC 3986's unreserved set is encoded (`+` and `&` in a URL too).
        let text = query.map { $0.name + "=" + HLSPlaylist.percentEncoded($0.value ?? "") }.joined(separator: "&")
        var request = HTTPClientRequest(url: info.baseURL + "/_mediacache/" + name + (text.isEmpty ? "" : "?" + text))
        request.method = method
        if let token = info.token { request.headers.add(name: "X-MediaCache-Token", value: token) }
        if method == .POST { request.headers.add(name: "X-MediaCache-Admin", value: "1") }
        return request
    }

    private static func ask<T: Decodable>(_ info: ServerInfo, _ method: HTTPMethod, _ name: String, target: URL? = nil) async throws -> T {
        let query = target.map { [URLQueryItem(name: "target", value: $0.absoluteString)] } ?? []
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(try request(info, method, name, query: query), timeout: .seconds(60))
        } catch let failure as CommandFailure {
            throw failure
        } catch {
            throw CommandFailure("The server that holds the cache folder (\(info.baseURL), process \(info.pid)) does not answer: \(error).")
        }
        guard response.status == .ok else { throw try await failure(response) }
        let body = try await response.body.collect(upTo: 256 << 20)
        do {
            return try decoder.decode(T.self, from: Data(buffer: body))
        } catch {
            throw CommandFailure("The server at \(info.baseURL) answered /_mediacache/\(name) with something unreadable: \(error).")
        }
    }

    private static func failure(_ response: HTTPClientResponse) async throws -> CommandFailure {
        let body = try await response.body.collect(upTo: 64 << 10)
        let message = String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines)
        return CommandFailure("The server answered \(response.status.code): \(message)", status: Int(response.status.code))
    }
}

/// A command that cannot do what it was asked, with a one-line reason (exit status 1).
struct CommandFailure: Error, CustomStringConvertible {
    var message: String
    var status: Int?
    init(_ message: String, status: Int? = nil) {
        self.message = message
        self.status = status
    }
    var description: String { message }
}
