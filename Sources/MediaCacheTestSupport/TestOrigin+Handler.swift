// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTP
import MediaCacheHTTPFields
import NIOCore
import NIOHTTP1

/// Answers one connection's requests for ``TestOrigin``, streaming bodies with backpressure.
final class OriginHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let origin: TestOrigin
    /// Writes raw bytes (HTTP/1 only; `nil` on an HTTP/2 stream).
    private let raw: RawWriter?
    private var head: HTTPRequestHead?
    /// The body being sent: what is left and how to send it.
    private var sending: Sending? {
        didSet {
            // Counted per path: a test waits for the origin to have stopped sending.
            if oldValue == nil, let path = sending?.path {
                origin.paths.withLock { $0[path]?.responsesInProgress += 1 }
            }
            if sending == nil, let path = oldValue?.path {
                origin.paths.withLock { $0[path]?.responsesInProgress -= 1 }
            }
        }
    }
    private var paused = false

    struct Sending {
        var path: String
        /// The request's query (percent-encoded), for ``TestOrigin/Faults/signer``.
        var query: String?
        var resource: TestOrigin.Resource
        var next: Int64
        var end: Int64
        var sentInResponse: Int64 = 0
        var dropAfter: Int64?
        var bytesPerSecond: Int64?
        var keepAlive: Bool
    }

    /// The number of the connection this handler serves (see ``TestOrigin/Request/connection``).
    private let connection: Int

    init(origin: TestOrigin, raw: RawWriter?, connection: Int) {
        self.origin = origin
        self.connection = connection
        self.raw = raw
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, paused {
            paused = false
            sendMore(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        sending = nil
        context.fireChannelInactive()
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let components = URLComponents(string: head.uri)
        let requestPath = components?.path ?? head.uri
        let rangeHeader = head.headers.first(name: "range")
        let ifRange = head.headers.first(name: "if-range")
        let keepAlive = head.isKeepAlive
        if origin.acceptsControl, requestPath.hasPrefix(TestOrigin.controlPrefix) {
            let query = Dictionary(
                (components?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
            let (status, text) = origin.control(
                String(requestPath.dropFirst(TestOrigin.controlPrefix.count)), query: query)
            var headers = HTTPHeaders([("Content-Type", "text/plain"), ("Content-Length", "\(text.utf8.count)")])
            headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
                promise: nil)
            context.write(
                wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
            finishResponse(context: context, keepAlive: keepAlive)
            return
        }

        // Decide the answer under the origin's lock, then send it on the event loop.
        let (plan, path) = origin.paths.withLock { paths -> (Plan, String) in
            var path = requestPath
            if let query = components?.percentEncodedQuery, paths[path + "?" + query] != nil { path += "?" + query }
            guard var state = paths[path] else {
                origin.notFound.withLock { $0.append(path) }
                return (Plan(status: .notFound, headers: [], body: nil, resource: nil), path)
            }
            let resource = state.resource
            let now = Int64(origin.clock.withLock { $0.now }.timeIntervalSince1970)
            var plan = Self.plan(head: head, resource: resource, range: rangeHeader, ifRange: ifRange, now: now)
            if let dropAfter = resource.faults.dropAfterBytes, state.drops < resource.faults.dropCount,
                plan.body != nil, head.method == .GET
            {
                state.drops += 1
                plan.dropAfter = dropAfter
                if resource.faults.changesAfterDrop { state.resource.changeContent() }
            }
            state.requests.append(
                TestOrigin.Request(
                    method: head.method.rawValue, path: path, query: components?.query,
                    rawQuery: components?.percentEncodedQuery, range: rangeHeader, ifRange: ifRange,
                    status: Int(plan.status.code),
                    connection: connection, version: "\(head.version)",
                    headers: head.headers.map { (name: $0.name, value: $0.value) }))
            paths[path] = state
            return (plan, path)
        }
        if plan.dropAfter != nil, let onDrop = plan.resource?.faults.onDrop { onDrop() }

        if let rawResponse = plan.rawResponse {
            guard let raw else {
                // An HTTP/2 stream has no raw bytes to lie with: reset it.
                context.close(promise: nil)
                return
            }
            raw.writeAndClose(rawResponse)
            return
        }
        let closeDelimited = plan.resource?.faults.lengthless == .closeDelimited
        let keepsAlive = keepAlive && !closeDelimited
        let version = closeDelimited ? HTTPVersion.http1_0 : head.version
        let send = { [self] in
            var headers = HTTPHeaders()
            let lowercase = plan.resource?.faults.lowercaseHeaders ?? false
            for (name, value) in plan.headers {
                headers.add(name: lowercase ? name.lowercased() : name, value: value)
            }
            headers.add(name: lowercase ? "connection" : "Connection", value: keepsAlive ? "keep-alive" : "close")
            context.writeAndFlush(
                wrapOutboundOut(.head(HTTPResponseHead(version: version, status: plan.status, headers: headers))),
                promise: nil)
            if !plan.statusBody.isEmpty, head.method == .GET {
                context.write(
                    wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: plan.statusBody)))),
                    promise: nil)
                finishResponse(context: context, keepAlive: keepsAlive)
            } else if let body = plan.body, let resource = plan.resource, head.method == .GET {
                sending = Sending(
                    path: path, query: components?.percentEncodedQuery, resource: resource, next: body.lowerBound,
                    end: body.upperBound,
                    dropAfter: plan.dropAfter, bytesPerSecond: resource.faults.bytesPerSecond, keepAlive: keepsAlive)
                sendMore(context: context)
            } else {
                finishResponse(context: context, keepAlive: keepsAlive)
            }
        }
        if let delay = plan.resource?.faults.headDelay {
            let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
            let loopBound = NIOLoopBound(send, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) { loopBound.value() }
        } else if let gate = plan.resource?.faults.gate {
            let loopBound = NIOLoopBound(send, eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            gate.whenOpen { eventLoop.execute { loopBound.value() } }
        } else {
            send()
        }
    }

    struct Plan {
        var status: HTTPResponseStatus
        var headers: [(String, String)]
        var body: Range<Int64>?
        var resource: TestOrigin.Resource?
        var dropAfter: Int64?
        var rawResponse: [UInt8]?
        /// The body of an error answer (``TestOrigin/Faults/statusBody``).
        var statusBody: [UInt8] = []
    }

    static func plan(head: HTTPRequestHead, resource: TestOrigin.Resource, range: String?, ifRange: String?, now: Int64)
        -> Plan
    {
        let faults = resource.faults
        if head.method == .HEAD, faults.headFails {
            return Plan(status: .methodNotAllowed, headers: [("Content-Length", "0")], body: nil, resource: resource)
        }
        if let required = faults.requiredQuery,
            !(head.uri.split(separator: "?", maxSplits: 1).dropFirst().first?.contains(required) ?? false)
        {
            return Plan(status: .forbidden, headers: [("Content-Length", "0")], body: nil, resource: resource)
        }
        if let signer = faults.signer, !signer.accepts(query: URLComponents(string: head.uri)?.percentEncodedQuery) {
            return Plan(status: .forbidden, headers: [("Content-Length", "0")], body: nil, resource: resource)
        }
        if let (name, value) = faults.requiredHeader, head.headers.first(name: name) != value {
            return Plan(status: .unauthorized, headers: [("Content-Length", "0")], body: nil, resource: resource)
        }
        if let (name, value) = faults.requiredCookie {
            let sent = head.headers["cookie"].flatMap { $0.split(separator: ";") }.map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            if !sent.contains("\(name)=\(value)") {
                return Plan(status: .forbidden, headers: [("Content-Length", "0")], body: nil, resource: resource)
            }
        }
        if let rawResponse = faults.rawResponse {
            return Plan(status: .ok, headers: [], body: nil, resource: resource, rawResponse: rawResponse(range))
        }
        if let (status, location) = faults.redirect {
            return Plan(
                status: HTTPResponseStatus(statusCode: status),
                headers: [("Location", location), ("Content-Length", "0")], body: nil, resource: resource)
        }
        if let status = faults.status {
            var headers = resource.extraHeaders.map { ($0.name, $0.value) }
            if let cacheControl = resource.cacheControl { headers.append(("Cache-Control", cacheControl)) }
            headers.append(("Date", HTTPDate.format(now)))
            headers.append(("Content-Length", "\(faults.statusBody.count)"))
            return Plan(
                status: HTTPResponseStatus(statusCode: status), headers: headers, body: nil, resource: resource,
                statusBody: faults.statusBody)
        }
        let length = resource.length
        var headers: [(String, String)] = [("Content-Type", resource.mimeType)]
        if let etag = resource.etag { headers.append(("ETag", etag)) }
        if let lastModified = resource.lastModified { headers.append(("Last-Modified", lastModified)) }
        if let cacheControl = resource.cacheControl { headers.append(("Cache-Control", cacheControl)) }
        if let expires = resource.expires { headers.append(("Expires", expires)) }
        headers += resource.extraHeaders.map { ($0.name, $0.value) }
        headers.append(("Date", HTTPDate.format(now)))
        // Conditional requests (RFC 9110 §13.2.2): If-None-Match first, else If-Modified-Since.
        if let ifNoneMatch = head.headers.first(name: "if-none-match") {
            if ifNoneMatch == "*"
                || ifNoneMatch.split(separator: ",").contains(where: {
                    $0.trimmingCharacters(in: .whitespaces) == resource.etag
                })
            {
                return Plan(status: .notModified, headers: headers, body: nil, resource: resource)
            }
        } else if let since = head.headers.first(name: "if-modified-since").flatMap(HTTPDate.parse),
            let modified = resource.lastModified.flatMap(HTTPDate.parse), modified <= since
        {
            return Plan(status: .notModified, headers: headers, body: nil, resource: resource)
        }
        if faults.lengthless != nil {
            return Plan(status: .ok, headers: headers, body: 0..<length, resource: resource)
        }
        if let growth = faults.growth, !growth.isFinished {
            // Still being made: bytes sent as they exist, no length (see `Faults.growth`).
            guard let range, case .single(.from(let first, let last)) = RangeSpecifier.parse(range), first < length
            else {
                return Plan(status: .ok, headers: headers, body: 0..<length, resource: resource)
            }
            let claimedLast = last ?? 999_999_999_999
            headers.append(("Accept-Ranges", "bytes"))
            headers.append(("Content-Range", "bytes \(first)-\(claimedLast)/*"))
            return Plan(
                status: .partialContent, headers: headers, body: first..<min(length, claimedLast + 1),
                resource: resource)
        }
        if !faults.ignoresRanges { headers.append(("Accept-Ranges", "bytes")) }

        var requested: Range<Int64>?
        if !faults.ignoresRanges, let range, Self.validatorMatches(ifRange, resource) {
            // Several ranges are answered with the whole body, as RFC 9110 allows.
            if case .single(let specifier) = RangeSpecifier.parse(range) {
                guard let resolved = specifier.resolve(length: length) else {
                    headers.append(("Content-Range", "bytes */\(length)"))
                    headers.append(("Content-Length", "0"))
                    return Plan(status: .rangeNotSatisfiable, headers: headers, body: nil, resource: resource)
                }
                requested = resolved.lowerBound..<resolved.upperBound
            }
        }
        if let requested {
            headers.append(("Content-Range", "bytes \(requested.lowerBound)-\(requested.upperBound - 1)/\(length)"))
            headers.append(("Content-Length", "\(requested.count)"))
            return Plan(status: .partialContent, headers: headers, body: requested, resource: resource)
        }
        headers.append(("Content-Length", "\(length)"))
        return Plan(status: .ok, headers: headers, body: 0..<length, resource: resource)
    }

    /// `If-Range` holds if absent or equal to the current strong ETag or Last-Modified.
    static func validatorMatches(_ ifRange: String?, _ resource: TestOrigin.Resource) -> Bool {
        guard let ifRange else { return true }
        if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") {
            return ifRange == resource.etag && !ifRange.hasPrefix("W/")
        }
        return ifRange == resource.lastModified
    }

    private func sendMore(context: ChannelHandlerContext) {
        while var current = sending {
            if current.next >= current.end {
                sending = nil
                finishResponse(context: context, keepAlive: current.keepAlive)
                return
            }
            // A connection the client closed takes no more bytes (none is counted as sent).
            guard context.channel.isActive else {
                sending = nil
                return
            }
            guard context.channel.isWritable else {
                paused = true
                return
            }
            var size = min(Int64(64 << 10), current.end - current.next)
            if let gate = current.resource.faults.bodyGate, !gate.isOpen {
                let held = current.resource.faults.bodyGateOffset
                guard current.next < held else {
                    let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                    let eventLoop = context.eventLoop
                    gate.whenOpen { eventLoop.execute { loopBound.value.0.sendMore(context: loopBound.value.1) } }
                    return
                }
                size = min(size, held - current.next)
            }
            if let growth = current.resource.faults.growth, !growth.isFinished {
                // Only what is made so far; the rest when the test makes it.
                size = min(size, growth.made - current.next)
                if size <= 0 {
                    let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                    let eventLoop = context.eventLoop
                    growth.whenPast(current.next) {
                        eventLoop.execute { loopBound.value.0.sendMore(context: loopBound.value.1) }
                    }
                    return
                }
            }
            if let rate = current.bytesPerSecond { size = min(size, max(1, rate / 20)) }
            if let dropAfter = current.dropAfter { size = min(size, dropAfter - current.sentInResponse) }
            if let signer = current.resource.faults.signer, !signer.accepts(query: current.query, counting: false) {
                size = 0  // The token expired while the body was sent: cut it.
            }
            if size <= 0 {
                // The drop fault: close in the middle of the body, once the bytes counted as
                // sent are in the socket (closing at once would discard those still queued).
                sending = nil
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer())))).whenComplete { _ in
                    loopBound.value.close(promise: nil)
                }
                return
            }
            let chunk = current.resource.bytes(
                current.next..<(current.next + size), allocator: context.channel.allocator)
            current.next += size
            current.sentInResponse += size
            sending = current
            // Counted when handed to the socket, before a client can have read them, so a
            // test that reads the counter after its reads finish sees every byte it got.
            origin.paths.withLock { $0[current.path]?.bodyBytesSent += size }
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk))), promise: nil)
            current.resource.faults.onBodyBytes?(size)
            if let rate = current.bytesPerSecond {
                let delay = TimeAmount.nanoseconds(size * 1_000_000_000 / rate)
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: delay) { loopBound.value.0.sendMore(context: loopBound.value.1) }
                return
            }
        }
    }

    private func finishResponse(context: ChannelHandlerContext, keepAlive: Bool) {
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { context.close(promise: nil) }
        }
    }
}

/// The first handler of an origin connection: writes bytes past the HTTP encoder, for
/// answers no honest encoder would produce.
final class RawWriter: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func writeAndClose(_ bytes: [UInt8]) {
        guard let context else { return }
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: bytes))).whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
