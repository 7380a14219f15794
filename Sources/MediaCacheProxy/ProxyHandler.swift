import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MediaCache
import MediaCacheHTTP
import NIOCore

/// Answers one proxy request: checks it, resolves the range, streams the bytes.
struct ProxyHandler: Sendable {
    let reader: CachingReader
    let configuration: ProxyConfiguration

    func respond(to request: Request, sendsBody: Bool) async -> Response {
        let started = ContinuousClock.now
        let rangeHeader = request.headers[.range]
        var log = RequestLog(method: sendsBody ? "GET" : "HEAD", range: rangeHeader, started: started, logger: configuration.logger)
        do {
            let url = try checkedOriginURL(request)
            log.url = url.absoluteString
            let metadata = try await reader.contentInfo(for: url)
            guard let total = metadata.length else {
                throw CacheError(.originRejected, "The origin does not say how long the resource is.")
            }
            // RFC 9110: a Range that is not a valid bytes range is ignored; we say so instead.
            var wanted = ByteRange(0, total)
            var isPartial = false
            if let rangeHeader {
                let specifier: RangeSpecifier
                switch RangeSpecifier.parse(rangeHeader) {
                case .invalid:
                    return log.finish(Self.error(.badRequest, "Malformed Range header \"\(rangeHeader.prefix(100))\": use bytes=a-b, bytes=a- or bytes=-n."))
                case .single(let one): specifier = one
                case .multiple(let first): specifier = first  // answered with the first range only
                }
                guard let resolved = specifier.resolve(length: total) else {
                    return log.finish(Self.unsatisfiable(total: total))
                }
                wanted = resolved
                isPartial = true
            }
            var headers = HTTPFields()
            headers[.contentType] = metadata.mimeType ?? "application/octet-stream"
            headers[.acceptRanges] = "bytes"
            headers[.contentLength] = String(wanted.length)
            if let etag = metadata.etag { headers[.eTag] = etag }
            if let lastModified = metadata.lastModified { headers[.lastModified] = lastModified }
            if isPartial { headers[.contentRange] = ContentRange(range: wanted, totalLength: total).headerValue }
            let status: HTTPResponse.Status = isPartial ? .partialContent : .ok
            guard sendsBody, !wanted.isEmpty else {
                return log.finish(Response(status: status, headers: headers, body: ResponseBody()))
            }
            let stream = try await reader.read(url, offset: wanted.lowerBound, length: wanted.length)
            log.status = status.code
            let started = log
            let body = ResponseBody(contentLength: Int(wanted.length)) { writer in
                var log = started
                do {
                    for try await chunk in stream {
                        if log.firstByte == nil { log.firstByte = ContinuousClock.now }
                        try await writer.write(chunk)
                    }
                    try await writer.finish(nil)
                    log.end(stream.statistics, error: nil)
                } catch {
                    // The head is sent: all the player can be told is a cut connection.
                    log.end(stream.statistics, error: error)
                    throw error
                }
            }
            return Response(status: status, headers: headers, body: body)
        } catch {
            return log.finish(Self.response(for: error))
        }
    }

    /// The origin URL from `url=`, after the scheme, allow-list and token checks.
    private func checkedOriginURL(_ request: Request) throws -> URL {
        let query = request.uri.queryParameters
        if let token = configuration.token {
            let given = query.get("token") ?? request.headers[HTTPField.Name("X-MediaCache-Token")!]
            guard given == token else { throw ProxyRequestError(status: .forbidden, "Missing or wrong access token.") }
        }
        guard let text = query.get("url"), !text.isEmpty else {
            throw ProxyRequestError(status: .badRequest, "Missing url: ask for /?url=<percent-encoded http or https URL>.")
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw ProxyRequestError(status: .badRequest, "Malformed url \"\(text.prefix(200))\".")
        }
        guard scheme == "http" || scheme == "https" else {
            throw ProxyRequestError(status: .badRequest, "Only http and https URLs can be proxied, not \(scheme).")
        }
        if !configuration.allowedHosts.isEmpty, !configuration.allowedHosts.contains(where: { $0.lowercased() == host.lowercased() }) {
            throw ProxyRequestError(status: .forbidden, "The host \(host) is not on this proxy's allow-list.")
        }
        return url
    }

    // MARK: Error responses

    static func response(for error: any Error) -> Response {
        if let error = error as? ProxyRequestError { return Self.error(error.status, error.message) }
        guard let error = error as? CacheError else {
            return Self.error(.badGateway, "The origin request failed.")
        }
        switch error.code {
        case .rangeNotSatisfiable:
            if let total = error.resourceLength { return unsatisfiable(total: total) }
            return Self.error(.rangeNotSatisfiable, error.message)
        case .originTimedOut:
            return Self.error(.gatewayTimeout, error.message)
        case .originUnavailable, .originRejected, .resourceChanged:
            return Self.error(.badGateway, error.message)
        default:
            return Self.error(.internalServerError, error.message)
        }
    }

    static func unsatisfiable(total: Int64) -> Response {
        var response = Self.error(.rangeNotSatisfiable, "The range is outside the \(total)-byte resource.")
        response.headers[.contentRange] = ContentRange(range: nil, totalLength: total).headerValue
        return response
    }

    static func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        let line = message.replacingOccurrences(of: "\n", with: " ") + "\n"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: line)))
    }
}

/// A request the proxy refuses, with its status.
struct ProxyRequestError: Error {
    var status: HTTPResponse.Status
    var message: String
    init(status: HTTPResponse.Status, _ message: String) {
        self.status = status
        self.message = message
    }
}

/// The one log line per request: method, range, status, bytes from cache and origin, time
/// to first byte.
struct RequestLog: Sendable {
    var method: String
    var range: String?
    var started: ContinuousClock.Instant
    var logger: Logger
    var url = "-"
    var status = 0
    var firstByte: ContinuousClock.Instant?

    func finish(_ response: Response) -> Response {
        var line = self
        line.status = response.status.code
        line.firstByte = ContinuousClock.now
        line.end(ReadStatistics(), error: nil)
        return response
    }

    func end(_ statistics: ReadStatistics, error: (any Error)?) {
        let ttfb = firstByte.map { ($0 - started).formatted(.units(allowed: [.milliseconds], fractionalPart: .show(length: 1))) } ?? "-"
        var metadata: Logger.Metadata = [
            "range": "\(range ?? "-")", "status": "\(status)", "cache": "\(statistics.bytesFromCache)",
            "origin": "\(statistics.bytesFromOrigin)", "ttfb": "\(ttfb)", "url": "\(url)",
        ]
        if let error { metadata["error"] = "\(error)" }
        logger.info("\(method)", metadata: metadata)
    }
}
