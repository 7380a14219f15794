// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import MediaCache
import MediaCacheHTTPFields
import NIOCore
import NIOHTTP1
import Synchronization

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// Fetches from origins with URLSession: what network code on Apple platforms is expected to
/// use (HTTP/3, Low Data Mode and constrained-network policy, the system's proxy and VPN
/// settings, a session delegate for certificate pinning).
///
/// The same contract as ``HTTPOriginFetcher``: the player's fields, ranges and `If-Range`;
/// redirects followed here, never by the session, so every hop is checked against the
/// allow-list; every answer checked before a byte of it is used; the body streams as it
/// arrives (on Apple platforms the task is suspended while more than 2 MiB wait to be read;
/// swift-corelibs-foundation cannot suspend a transfer safely, so there the body is buffered as
/// it comes), and dropping the body's iterator cancels the task.
///
/// Pass your own session to use its configuration and its delegate (authentication
/// challenges, certificate pinning); per-task delegates carry the body, so the session's
/// delegate is not asked for data. The session must not cache (`urlCache` `nil`): the cache
/// is this package's.
public final class URLSessionOriginFetcher: OriginFetcher {
    let session: URLSession
    let ownsSession: Bool
    let configuration: OriginFetcherConfiguration
    private let exchange: OriginExchange<SessionTransport>

    /// Creates a fetcher on `session`, or on an ephemeral session of its own (no URL cache,
    /// no cookie store of URLSession's: cookies are the configuration's ``OriginFetcherConfiguration/cookieJar``'s)
    /// when `session` is `nil`.
    public init(session: URLSession? = nil, configuration: OriginFetcherConfiguration = OriginFetcherConfiguration()) {
        var router: SessionRouter?
        if let session {
            self.session = session
            ownsSession = false
        } else {
            let sessionConfiguration = URLSessionConfiguration.ephemeral
            sessionConfiguration.urlCache = nil
            sessionConfiguration.httpCookieStorage = nil
            sessionConfiguration.httpShouldSetCookies = false
            sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
            sessionConfiguration.timeoutIntervalForRequest = configuration.readTimeout.seconds
            sessionConfiguration.httpMaximumConnectionsPerHost = max(1, configuration.connectionsPerHost)
            router = SessionRouter()
            self.session = URLSession(configuration: sessionConfiguration, delegate: router, delegateQueue: nil)
            ownsSession = true
        }
        self.configuration = configuration
        exchange = OriginExchange(
            transport: SessionTransport(session: self.session, router: router, configuration: configuration),
            policy: configuration.policy)
    }

    /// Cancels the fetcher's own session's tasks and invalidates it (a session passed in is
    /// left as it is).
    public func shutdown() async throws {
        if ownsSession { session.invalidateAndCancel() }
    }

    public func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
        try await exchange.contentInfo(for: url, headers: headers)
    }

    public func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws
        -> OriginResponse
    {
        try await exchange.fetch(url, range: range, ifRange: ifRange, headers: headers)
    }

    public func checkOrigin(_ url: URL) throws {
        try exchange.checkOrigin(url)
    }

    public var cookieJar: CookieJar? { configuration.cookieJar }

    /// ``OriginFetcherConfiguration/connectionsPerHost`` (the session's
    /// `httpMaximumConnectionsPerHost` when it made the session; a session given to it keeps its own).
    public var connectionsPerHost: Int? { ownsSession ? max(1, configuration.connectionsPerHost) : nil }
}

/// Sends one request as a URLSession data task whose own delegate stops redirects and takes
/// the body.
struct SessionTransport: OriginTransport, Sendable {
    let session: URLSession
    /// The delegate of the fetcher's own session, which hands each task's events to its
    /// body; `nil` for a session passed in, whose tasks get a delegate of their own.
    let router: SessionRouter?
    let configuration: OriginFetcherConfiguration

    func send(_ request: OriginRequest) async throws -> OriginReply {
        let url = request.url
        var outgoing = URLRequest(
            url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: configuration.readTimeout.seconds)
        outgoing.httpMethod = request.method.rawValue
        outgoing.httpShouldHandleCookies = false
        for (name, value) in request.headers { outgoing.addValue(value, forHTTPHeaderField: name) }
        let task = session.dataTask(with: outgoing)
        let body = SessionBody(task: task, url: url)
        if let router { router.register(body.receiver, for: task) } else { task.delegate = body.receiver }
        task.resume()
        let timer = Task { [responseTimeout = configuration.responseTimeout] in
            try await Task.sleep(for: responseTimeout)
            body.receiver.timeOut(task)
        }
        defer { timer.cancel() }
        let response: HTTPURLResponse
        do {
            response = try await withTaskCancellationHandler {
                try await body.receiver.head()
            } onCancel: {
                task.cancel()
            }
        } catch {
            if Task.isCancelled { throw CancellationError() }
            if body.receiver.hasTimedOut {
                throw CacheError(
                    .originTimedOut, "\(url.host ?? url.absoluteString) did not answer in time.", underlyingError: error
                )
            }
            throw Self.failure(error, url: url, configuration: configuration)
        }
        var headers = HTTPHeaders()
        for (name, value) in response.allHeaderFields {
            guard let name = name as? String, let value = value as? String else { continue }
            headers.add(name: name, value: value)
        }
        let status = response.statusCode
        return OriginReply(
            status: status, reason: HTTPResponseStatus(statusCode: status).reasonPhrase, headers: headers, body: body)
    }

    /// The cache's error for a failed task, told apart by cause.
    static func failure(_ error: any Error, url: URL, configuration: OriginFetcherConfiguration) -> any Error {
        guard let error = error as? URLError else { return HTTPOriginFetcher.unreachable(url, error) }
        switch error.code {
        case .cancelled:
            return CancellationError()
        case .timedOut:
            return CacheError(
                .originTimedOut, "\(url.host ?? url.absoluteString) did not answer in time.", underlyingError: error)
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid,
            .serverCertificateHasUnknownRoot, .clientCertificateRejected, .clientCertificateRequired:
            // Never retried: the same handshake fails the same way.
            let reason =
                "TLS with \(url.host ?? url.absoluteString) failed: \(error.localizedDescription) (URLError \(error.code.rawValue))."
            configuration.logger.warning(
                "TLS with the origin failed",
                metadata: ["url": "\(url.absoluteString.prefix(200))", "reason": "\(reason)"])
            return CacheError(.originRejected, reason, underlyingError: error)
        case .badServerResponse, .cannotParseResponse:
            return OriginExchange<SessionTransport>.rejected(
                "sent a malformed response (\(error.localizedDescription))", url: url, logger: configuration.logger)
        default:
            return HTTPOriginFetcher.unreachable(url, error)
        }
    }
}

/// A data task's body as it arrives: an async sequence of chunks that suspends the task while
/// more than ``highWater`` bytes wait, and cancels it when nobody holds it any more.
final class SessionBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    static let highWater = 2 << 20
    static let lowWater = 512 << 10

    /// Whether a task is suspended while ``highWater`` bytes wait. Not with
    /// swift-corelibs-foundation, where suspending a transfer loses or repeats bytes: with it,
    /// `sixteenConcurrentReadersShareOneDownload` over URLSession got wrong bytes from 7, 14 or
    /// 21 MiB of its 24 MiB file in most runs (none without), and a small program that resumes
    /// while the delegate suspends trapped in `_NativeProtocol.stopLoading()`. There the body is
    /// buffered as fast as the origin sends it.
    #if canImport(Darwin)
        static let suspendsTasks = true
    #else
        static let suspendsTasks = false
    #endif

    let task: URLSessionDataTask
    let receiver: Receiver
    let url: URL

    init(task: URLSessionDataTask, url: URL) {
        self.task = task
        self.url = url
        receiver = Receiver()
    }

    deinit {
        // Nobody reads the rest: the task stops (a finished one ignores it).
        task.cancel()
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let body: SessionBody

        mutating func next() async throws -> ByteBuffer? {
            try await body.next()
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(body: self)
    }

    func next() async throws -> ByteBuffer? {
        let task = task
        do {
            guard
                let data = try await withTaskCancellationHandler(
                    operation: { try await receiver.nextChunk(task) }, onCancel: { task.cancel() })
            else {
                return nil
            }
            return ByteBuffer(bytes: data)
        } catch let error as URLError where error.code != .cancelled {
            // A connection lost mid-body is the read path's to retry from where it ended.
            throw HTTPOriginFetcher.unreachable(url, error)
        }
    }

    /// The task's delegate: takes the head and the body's chunks, refuses redirects (the
    /// exchange follows them after checking), and records how the task ended.
    final class Receiver: NSObject, URLSessionDataDelegate, Sendable {
        private struct State {
            var response: HTTPURLResponse?
            var headWaiter: CheckedContinuation<HTTPURLResponse, any Error>?
            var chunks: [Data] = []
            var buffered = 0
            var isSuspended = false
            var completion: Result<Void, any Error>?
            var chunkWaiter: CheckedContinuation<Data?, any Error>?
            var timedOut = false
        }

        private let state = Mutex(State())

        var hasTimedOut: Bool { state.withLock { $0.timedOut } }

        /// The response head, once it arrives.
        func head() async throws -> HTTPURLResponse {
            try await withCheckedThrowingContinuation { continuation in
                let ready: Result<HTTPURLResponse, any Error>? = state.withLock { state in
                    if let response = state.response { return .success(response) }
                    if case .failure(let error) = state.completion { return .failure(error) }
                    if state.completion != nil { return .failure(URLError(.badServerResponse)) }
                    state.headWaiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }

        /// Gives up on a head that has not come.
        func timeOut(_ task: URLSessionTask) {
            let waiting = state.withLock { state -> Bool in
                guard state.response == nil, state.completion == nil else { return false }
                state.timedOut = true
                return true
            }
            if waiting { task.cancel() }
        }

        /// The next chunk, `nil` at the end; resumes a suspended task once few bytes wait.
        func nextChunk(_ task: URLSessionTask) async throws -> Data? {
            try await withCheckedThrowingContinuation { continuation in
                // The task is resumed under the lock, so a resume cannot overtake the suspend
                // it answers (Apple's URLSession does not call delegates from either).
                let ready: Result<Data?, any Error>? = state.withLock { state in
                    if !state.chunks.isEmpty {
                        let chunk = state.chunks.removeFirst()
                        state.buffered -= chunk.count
                        if state.isSuspended, state.buffered <= SessionBody.lowWater {
                            state.isSuspended = false
                            task.resume()
                        }
                        return .success(chunk)
                    }
                    switch state.completion {
                    case .success: return .success(nil)
                    case .failure(let error): return .failure(error)
                    case nil:
                        state.chunkWaiter = continuation
                        if state.isSuspended {
                            // Nothing waits to be read: a suspended task must go on.
                            state.isSuspended = false
                            task.resume()
                        }
                        return nil
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
        ) {
            let waiter = state.withLock { state -> CheckedContinuation<HTTPURLResponse, any Error>? in
                guard let response = response as? HTTPURLResponse else { return nil }
                state.response = response
                defer { state.headWaiter = nil }
                return state.headWaiter
            }
            guard let http = response as? HTTPURLResponse else {
                completionHandler(.cancel)
                return
            }
            completionHandler(.allow)
            waiter?.resume(returning: http)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            let waiter = state.withLock { state -> CheckedContinuation<Data?, any Error>? in
                if let waiter = state.chunkWaiter {
                    state.chunkWaiter = nil
                    return waiter
                }
                state.chunks.append(data)
                state.buffered += data.count
                if SessionBody.suspendsTasks, !state.isSuspended, state.buffered > SessionBody.highWater {
                    state.isSuspended = true
                    dataTask.suspend()
                }
                return nil
            }
            waiter?.resume(returning: data)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            let (headWaiter, chunkWaiter) = state.withLock { state in
                state.completion = error.map { .failure($0) } ?? .success(())
                defer {
                    state.headWaiter = nil
                    state.chunkWaiter = nil
                }
                return (state.headWaiter, state.chunkWaiter)
            }
            if let headWaiter {
                headWaiter.resume(throwing: error ?? URLError(.badServerResponse))
            }
            if let error {
                chunkWaiter?.resume(throwing: error)
            } else {
                chunkWaiter?.resume(returning: nil)
            }
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
        ) {
            // The redirect itself is the answer: the exchange checks its target, then asks.
            completionHandler(nil)
        }
    }
}

/// The delegate of a fetcher's own session: passes each task's events to the body that
/// reads it. (swift-corelibs-foundation does not call a task's own delegate, only the
/// session's.)
final class SessionRouter: NSObject, URLSessionDataDelegate, Sendable {
    private let receivers = Mutex<[Int: SessionBody.Receiver]>([:])

    func register(_ receiver: SessionBody.Receiver, for task: URLSessionTask) {
        receivers.withLock { $0[task.taskIdentifier] = receiver }
    }

    private func receiver(of task: URLSessionTask) -> SessionBody.Receiver? {
        receivers.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        guard let receiver = receiver(of: dataTask) else { return completionHandler(.cancel) }
        receiver.urlSession(session, dataTask: dataTask, didReceive: response, completionHandler: completionHandler)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        receiver(of: dataTask)?.urlSession(session, dataTask: dataTask, didReceive: data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let receiver = receivers.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        receiver?.urlSession(session, task: task, didCompleteWithError: error)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)  // the exchange checks the target, then asks (see `SessionBody.Receiver`)
    }
}

extension Duration {
    /// The duration in seconds, for Foundation's intervals.
    var seconds: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
