public import AsyncHTTPClient
public import Foundation
public import MediaCache
import NIOCore
import NIOHTTP1

/// Fetches content information and byte ranges from HTTP(S) origins with AsyncHTTPClient.
///
/// Redirects are followed; connect, response-head and idle-read timeouts are set. Bodies
/// stream as they arrive, and dropping a body's iterator closes the origin request.
public final class HTTPOriginFetcher: OriginFetcher {
    /// Options for origin requests.
    public struct Configuration: Sendable {
        /// How long to wait for a connection.
        public var connectTimeout: Duration = .seconds(10)
        /// How long to wait for a response head.
        public var responseTimeout: Duration = .seconds(30)
        /// How long a body may go without a byte.
        public var readTimeout: Duration = .seconds(30)
        /// How many redirects to follow.
        public var maxRedirects = 5
        /// The `User-Agent` sent to origins.
        public var userAgent = "MediaCache/1.0"

        /// Creates the default configuration.
        public init() {}
    }

    let client: HTTPClient
    let configuration: Configuration

    /// Creates a fetcher with its own HTTP client; call ``shutdown()`` when done.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        var clientConfiguration = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: configuration.maxRedirects, allowCycles: false),
            timeout: .init(connect: .init(configuration.connectTimeout), read: .init(configuration.readTimeout)),
            decompression: .disabled
        )
        clientConfiguration.httpVersion = .automatic
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
    }

    /// Closes the HTTP client's connections.
    public func shutdown() async throws {
        try await client.shutdown()
    }

    // MARK: OriginFetcher

    public func contentInfo(for url: URL) async throws -> ContentMetadata {
        var head = try makeRequest(url)
        head.method = .HEAD
        let response = try await execute(head, url: url)
        if (200..<300).contains(response.status.code), let length = response.headers.first(name: "content-length").flatMap(Int64.init) {
            var metadata = Self.metadata(from: response.headers)
            metadata.length = length
            return metadata
        }
        // HEAD refused or without a length: ask for two bytes instead.
        let probe = try await fetch(url, range: ByteRange(0, 2), ifRange: nil)
        return probe.metadata
    }

    public func fetch(_ url: URL, range: ByteRange?, ifRange: String?) async throws -> OriginResponse {
        var request = try makeRequest(url)
        if let range { request.headers.replaceOrAdd(name: "Range", value: RangeSpecifier.headerValue(for: range)) }
        if let ifRange, range != nil { request.headers.replaceOrAdd(name: "If-Range", value: ifRange) }
        let response = try await execute(request, url: url)
        var metadata = Self.metadata(from: response.headers)
        let contentLength = response.headers.first(name: "content-length").flatMap(Int64.init)
        switch response.status.code {
        case 206:
            guard let range,
                  let contentRange = response.headers.first(name: "content-range").flatMap(ContentRange.init(parsing:)),
                  let got = contentRange.range,
                  got.lowerBound == range.lowerBound, got.upperBound <= range.upperBound
            else {
                throw CacheError(.originRejected, "\(url.absoluteString) answered a range request with a different range (\(response.headers.first(name: "content-range") ?? "no Content-Range")).")
            }
            metadata.length = contentRange.totalLength
            metadata.acceptsRanges = true
            return OriginResponse(metadata: metadata, bodyOffset: got.lowerBound, body: response.body)
        case 200..<300:
            metadata.length = contentLength
            if range != nil, ifRange == nil {
                // A range request answered in full: the origin does not do ranges.
                metadata.acceptsRanges = false
            }
            return OriginResponse(metadata: metadata, bodyOffset: 0, body: response.body)
        case 416:
            var error = CacheError(.rangeNotSatisfiable, "\(url.absoluteString) has no bytes at the requested range.")
            error.resourceLength = response.headers.first(name: "content-range").flatMap(ContentRange.init(parsing:))?.totalLength
            throw error
        default:
            throw CacheError(.originRejected, "\(url.absoluteString) answered \(response.status.code) \(response.status.reasonPhrase).")
        }
    }

    // MARK: Helpers

    private func makeRequest(_ url: URL) throws -> HTTPClientRequest {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
            throw CacheError(.originRejected, "Only http and https URLs with a host can be fetched, not \(url.absoluteString).")
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "User-Agent", value: configuration.userAgent)
        request.headers.add(name: "Accept-Encoding", value: "identity")
        return request
    }

    private func execute(_ request: HTTPClientRequest, url: URL) async throws -> HTTPClientResponse {
        do {
            return try await client.execute(request, timeout: .init(configuration.responseTimeout))
        } catch let error as HTTPClientError where [.connectTimeout, .readTimeout, .deadlineExceeded].contains(error) {
            throw CacheError(.originTimedOut, "\(url.host ?? url.absoluteString) did not answer in time.", underlyingError: error)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw CacheError(.originUnavailable, "Cannot reach \(url.host ?? url.absoluteString).", underlyingError: error)
        }
    }

    /// Type, range support and validators from response headers (names in any case).
    static func metadata(from headers: HTTPHeaders) -> ContentMetadata {
        let acceptsRanges = headers[canonicalForm: "accept-ranges"].contains { $0.lowercased() == "bytes" }
        return ContentMetadata(
            length: nil,
            mimeType: headers.first(name: "content-type"),
            acceptsRanges: acceptsRanges,
            etag: headers.first(name: "etag"),
            lastModified: headers.first(name: "last-modified")
        )
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
