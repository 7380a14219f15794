// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCache
import MediaCacheHTTPFields
import NIOCore
import NIOHTTP1

/// What the proxy answers to one request: a status, headers and where the body comes from.
struct ProxyResponse {
    enum Body {
        case none
        case text(String)
        case bytes([UInt8])
        /// Lines sent as they come, each flushed (chunked: no length); the stream's end ends the body.
        case lines(AsyncStream<String>)
        /// The bytes of a read, in order; `log` is finished when the body ends.
        case stream(ReadStream, log: RequestLog)
        /// Stored bytes, the whole body, sent from the data file; `log` is finished when they
        /// are in the socket.
        case file(StoredRegion, log: RequestLog)
    }

    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    var body: Body
    /// What the cache did, for the `Cache-Status` field (``ProxyHandler/finish(_:for:router:)``
    /// writes it; `nil`: an answer the proxy made itself).
    var cacheStatus: CacheStatus? = nil
}

extension ProxyResponse.Body {
    /// A body as the connection writes it (``ResponseSender``): at hand, or in parts that come.
    enum Parts {
        case atHand(AtHand)
        case later(LaterParts)
    }

    /// A whole body at hand.
    enum AtHand {
        case empty
        case buffer(ByteBuffer)
        /// Stored bytes; `log` ends once they are in the socket (the others' ended when the
        /// answer was made).
        case region(StoredRegion, log: RequestLog)
    }

    /// A body that comes in parts: a read's, or a feed's lines.
    struct LaterParts {
        private enum Source {
            case read(ReadStream)
            case lines(AsyncStream<String>.Iterator, ByteBufferAllocator)
        }

        private var source: Source
        /// The log line the body ends, if it has one of its own.
        let log: RequestLog?

        fileprivate init(read stream: ReadStream, log: RequestLog) {
            (source, self.log) = (.read(stream), log)
        }

        fileprivate init(lines: AsyncStream<String>, allocator: ByteBufferAllocator) {
            (source, log) = (.lines(lines.makeAsyncIterator(), allocator), nil)
        }

        /// How its writing goes (see ``ResponseWriter``).
        var writer: ResponseWriter {
            switch source {
            case .read(let stream): ResponseWriter(range: stream.range)
            case .lines: .feed
            }
        }

        /// The next part; `nil` at the end.
        mutating func next() async throws -> ReadPart? {
            switch source {
            case .read(let stream):
                return try await stream.nextPart()
            case .lines(var lines, let allocator):
                defer { source = .lines(lines, allocator) }
                return await lines.next().map { .bytes(allocator.buffer(string: $0)) }
            }
        }

        /// Where a read's bytes came from.
        var statistics: ReadStatistics {
            if case .read(let stream) = source { stream.statistics } else { ReadStatistics() }
        }

        /// Stops a read (it has given its last byte, or the answer failed).
        func cancel() {
            if case .read(let stream) = source { stream.cancel() }
        }
    }

    /// The body as the connection writes it; `allocator` makes the buffers of a text or bytes.
    func parts(_ allocator: ByteBufferAllocator) -> Parts {
        switch self {
        case .none: .atHand(.empty)
        case .text(let text): .atHand(.buffer(allocator.buffer(string: text)))
        case .bytes(let bytes): .atHand(.buffer(allocator.buffer(bytes: bytes)))
        case .file(let region, let log): .atHand(.region(region, log: log))
        case .lines(let lines): .later(LaterParts(lines: lines, allocator: allocator))
        case .stream(let stream, let log): .later(LaterParts(read: stream, log: log))
        }
    }
}

extension ProxyResponse {
    /// The head of an answer carrying `range` of the resource `metadata` describes, at `now`:
    /// the fields the cache writes from what it serves, then the origin's end-to-end fields
    /// kept with the entry (``ContentMetadata/responseHeaders``), the origin's `Date` (or
    /// `now` when it sent none) and `Age` (RFC 9111 §5.1: how long ago the origin generated
    /// the stored answer).
    /// With no `range` (a body without a length) there is no `Content-Length` and ranges are
    /// not offered.
    static func fields(_ metadata: ContentMetadata, range: ByteRange?, isPartial: Bool, now: Date) -> HTTPHeaders {
        let stored = metadata.responseHeaders
        // Gathered in a list, then made a block at once: `HTTPHeaders.add` checks each name
        // again. The stored fields and at most seven of ours (and Cache-Status, CORS's two and
        // Connection, added later): one allocation.
        var fields: [(String, String)] = []
        fields.reserveCapacity(stored.count + 11)
        var hasDate = false
        var hasType = false
        for field in stored {
            switch field.name.utf8.count {
            case 4: hasDate = hasDate || FieldName.matches(field.name, "date")
            case 12: hasType = hasType || FieldName.matches(field.name, "content-type")
            // A stored whole answer's odd `Content-Range` never rides on a partial one.
            case 13 where (isPartial || range == nil) && FieldName.matches(field.name, "content-range"): continue
            default: break
            }
            fields.append((field.name, field.value))
        }
        if !hasDate { fields.append(("Date", HTTPDate.format(Int64(now.timeIntervalSince1970)))) }
        if let generatedAt = metadata.generatedAt {
            fields.append(
                (
                    "Age",
                    String(Int64(max(0, min(now.timeIntervalSince(generatedAt), Double(CacheControl.maximumSeconds)))))
                ))
        }
        // The origin's Content-Type as it spelled it, kept with the entry; else the type known.
        if !hasType { fields.append(("Content-Type", metadata.mimeType ?? "application/octet-stream")) }
        guard let range else {
            fields.append(("Accept-Ranges", "none"))
            return HTTPHeaders(fields)
        }
        fields.append(("Accept-Ranges", "bytes"))
        fields.append(("Content-Length", String(range.length)))
        if let etag = metadata.etag { fields.append(("ETag", etag)) }
        if let lastModified = metadata.lastModified { fields.append(("Last-Modified", lastModified)) }
        if isPartial, let total = metadata.length {
            fields.append(("Content-Range", ContentRange(range: range, totalLength: total).headerValue))
        }
        return HTTPHeaders(fields)
    }

    /// The head of a `304 Not Modified` for the version `metadata` describes (RFC 9110
    /// §15.4.5): the fields a `200` would carry less those that describe the body.
    static func notModifiedFields(_ metadata: ContentMetadata, now: Date) -> HTTPHeaders {
        var fields = Self.fields(metadata, range: nil, isPartial: false, now: now)
        for name in [
            "content-type", "content-length", "content-range", "accept-ranges", "content-encoding", "content-language",
            "content-disposition",
        ] {
            fields.remove(name: name)
        }
        if let etag = metadata.etag { fields.add(name: "ETag", value: etag) }
        if let lastModified = metadata.lastModified { fields.add(name: "Last-Modified", value: lastModified) }
        return fields
    }

    /// The answer to a request that failed with `error`: a refusal's status, the origin's own
    /// answer as it is, or the status an engine error stands for, with its message.
    static func failure(_ error: any Error) -> ProxyResponse {
        if let error = error as? ProxyRequestError {
            var response = Self.error(error.status, error.message)
            for (name, value) in error.headers { response.headers.add(name: name, value: value) }
            response.cacheStatus = .local("refused")
            return response
        }
        guard let error = error as? CacheError else {
            var response = Self.error(.badGateway, "The origin request failed.")
            response.cacheStatus = CacheStatus(forward: .uriMiss, detail: "origin-failed")
            return response
        }
        if let answer = error.originAnswer {
            // The origin's own answer, passed on (or reused while fresh).
            var response = passedOn(answer)
            response.cacheStatus = CacheStatus(forward: .uriMiss, forwardStatus: answer.status)
            return response
        }
        var response = cacheFailure(error)
        response.cacheStatus = CacheStatus(forward: .uriMiss, detail: "\(error.code)")
        // What can be done about it, as data, for the command line that asked (an admin request).
        if let remedy = error.remedy {
            response.headers.replaceOrAdd(name: "X-MediaCache-Remedy", value: remedy.description)
        }
        return response
    }

    /// The answer for a ``CacheError`` that is not the origin's own.
    private static func cacheFailure(_ error: CacheError) -> ProxyResponse {
        switch error.code {
        case .rangeNotSatisfiable:
            if let total = error.resourceLength { return unsatisfiable(total: total) }
            return Self.error(.rangeNotSatisfiable, error.message)
        case .originTimedOut, .offline:
            return Self.error(.gatewayTimeout, error.message)
        case .originUnavailable, .originRejected, .resourceChanged:
            return Self.error(.badGateway, error.message)
        case .originNotAllowed:
            return Self.error(.forbidden, error.message)
        case .capacityExceeded:
            return Self.error(.insufficientStorage, error.message)
        case .notCached:
            return Self.error(.notFound, error.message)
        default:
            return Self.error(.internalServerError, error.message)
        }
    }

    /// The origin's own answer as it gave it: status, reason, end-to-end fields, body.
    static func passedOn(_ answer: OriginAnswer) -> ProxyResponse {
        var headers = HTTPHeaders()
        for field in answer.headers { headers.add(name: field.name, value: field.value) }
        // 1xx, 204 and 304 carry no body (RFC 9110 §6.4.1) and so no length of one.
        let hasBody = !(100..<200).contains(answer.status) && answer.status != 204 && answer.status != 304
        if hasBody { headers.add(name: "Content-Length", value: String(answer.body.count)) }
        return ProxyResponse(
            status: HTTPResponseStatus(statusCode: answer.status, reasonPhrase: answer.reason), headers: headers,
            body: hasBody && !answer.body.isEmpty ? .bytes(answer.body) : .none)
    }

    static func unsatisfiable(total: Int64) -> ProxyResponse {
        var response = Self.error(.rangeNotSatisfiable, "The range is outside the \(total)-byte resource.")
        response.headers.add(name: "Content-Range", value: ContentRange(range: nil, totalLength: total).headerValue)
        return response
    }

    static func error(_ status: HTTPResponseStatus, _ message: String) -> ProxyResponse {
        let line = message.replacingOccurrences(of: "\n", with: " ") + "\n"
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(line.utf8.count))
        return ProxyResponse(status: status, headers: headers, body: .text(line))
    }
}
