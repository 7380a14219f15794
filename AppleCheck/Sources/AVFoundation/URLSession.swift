// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

// A stand-in for the parts of Apple's Foundation URL loading that the adapter's background
// pins use: background `URLSession`s, download tasks and their delegate. On Apple platforms
// these come with Foundation (which AVFoundation re-exports); on Linux they are
// FoundationNetworking's, which has no background sessions, so the stand-in declares them.
//
// The system's transfer service (nsurlsessiond) is `SimulatedTransferService`: it keeps the
// tasks of each session identifier beyond any app object, runs them (real HTTP, through
// FoundationNetworking), and delivers their events to the session object of the identifier
// that exists at the time, or keeps them until one is made (a relaunch), then says the events
// are done (`urlSessionDidFinishEvents`). What follows Apple's documented behaviour, and what
// is assumed:
// - The file handed to `didFinishDownloadingTo` is deleted when the delegate returns.
// - A task whose events wait for an app is listed by `allTasks` as running until they are
//   delivered (assumed: Apple does not say); after `didCompleteWithError` it is `.completed`
//   and no longer listed.
// - Terminating the app (`simulatedTerminateApp`) leaves the tasks to the service; a
//   force-quit (`simulatedForceQuit`) cancels them (Apple's rule).

import FoundationNetworking
import Synchronization

/// `struct URLRequest`
public struct URLRequest: Sendable, Hashable {
    /// `var url: URL?`
    public var url: URL?
    /// `var allHTTPHeaderFields: [String : String]?`
    public var allHTTPHeaderFields: [String: String]?
    /// `var allowsExpensiveNetworkAccess: Bool`
    public var allowsExpensiveNetworkAccess = true
    /// `var allowsConstrainedNetworkAccess: Bool`
    public var allowsConstrainedNetworkAccess = true

    /// `init(url: URL, cachePolicy: …, timeoutInterval: …)` (the defaults)
    public init(url: URL) {
        self.url = url
    }

    /// `mutating func setValue(_ value: String?, forHTTPHeaderField field: String)`
    public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
        var fields = allHTTPHeaderFields ?? [:]
        fields[field] = value
        allHTTPHeaderFields = fields
    }

    /// `func value(forHTTPHeaderField field: String) -> String?`
    public func value(forHTTPHeaderField field: String) -> String? {
        allHTTPHeaderFields?.first { $0.key.caseInsensitiveCompare(field) == .orderedSame }?.value
    }
}

/// `class URLResponse`
open class URLResponse: NSObject, @unchecked Sendable {
    /// `var url: URL? { get }`
    public let url: URL?

    init(url: URL?) {
        self.url = url
    }
}

/// `class HTTPURLResponse`
open class HTTPURLResponse: URLResponse, @unchecked Sendable {
    /// `var statusCode: Int { get }`
    public let statusCode: Int
    /// `var allHeaderFields: [AnyHashable : Any] { get }`
    public let allHeaderFields: [AnyHashable: Any]

    init(url: URL?, statusCode: Int, headerFields: [String: String]) {
        self.statusCode = statusCode
        allHeaderFields = headerFields
        super.init(url: url)
    }
}

/// `class URLSessionConfiguration`
open class URLSessionConfiguration: NSObject, @unchecked Sendable {
    /// `var identifier: String? { get }`
    public let identifier: String?
    /// `var sessionSendsLaunchEvents: Bool`
    public var sessionSendsLaunchEvents = true
    /// `var isDiscretionary: Bool`
    public var isDiscretionary = false

    init(identifier: String?) {
        self.identifier = identifier
    }

    /// `class func background(withIdentifier identifier: String) -> URLSessionConfiguration`
    open class func background(withIdentifier identifier: String) -> URLSessionConfiguration {
        URLSessionConfiguration(identifier: identifier)
    }
}

/// `protocol URLSessionDelegate : NSObjectProtocol, Sendable`; its method is `optional` there.
public protocol URLSessionDelegate: NSObjectProtocol, Sendable {
    func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession)
}

extension URLSessionDelegate {
    public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {}
}

/// `protocol URLSessionTaskDelegate : URLSessionDelegate`; its method is `optional` there.
public protocol URLSessionTaskDelegate: URLSessionDelegate {
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?)
}

extension URLSessionTaskDelegate {
    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {}
}

/// `protocol URLSessionDownloadDelegate : URLSessionTaskDelegate`
public protocol URLSessionDownloadDelegate: URLSessionTaskDelegate {
    func urlSession(
        _ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL)
}

/// `class URLSessionTask`
open class URLSessionTask: NSObject, @unchecked Sendable {
    /// `enum URLSessionTask.State`
    public enum State: Int, Sendable {
        case running, suspended, canceling, completed
    }

    struct Status {
        var state = State.suspended
        var description: String?
        var earliestBeginDate: Date?
        var response: URLResponse?
    }

    /// `var taskIdentifier: Int { get }`
    public let taskIdentifier: Int
    /// `@NSCopying var originalRequest: URLRequest? { get }`
    public let originalRequest: URLRequest?
    let identifier: String
    let status = Mutex(Status())

    init(identifier: String, taskIdentifier: Int, request: URLRequest) {
        self.identifier = identifier
        self.taskIdentifier = taskIdentifier
        originalRequest = request
    }

    /// `var taskDescription: String?`
    public var taskDescription: String? {
        get { status.withLock { $0.description } }
        set { status.withLock { $0.description = newValue } }
    }

    /// `var earliestBeginDate: Date?`
    public var earliestBeginDate: Date? {
        get { status.withLock { $0.earliestBeginDate } }
        set { status.withLock { $0.earliestBeginDate = newValue } }
    }

    /// `var state: URLSessionTask.State { get }`
    public var state: State { status.withLock { $0.state } }
    /// `@NSCopying var response: URLResponse? { get }`
    public var response: URLResponse? { status.withLock { $0.response } }

    /// `func resume()`
    open func resume() {
        SimulatedTransferService.shared.resume(self)
    }

    /// `func cancel()`
    open func cancel() {
        SimulatedTransferService.shared.cancel(self)
    }
}

/// `class URLSessionDownloadTask`
open class URLSessionDownloadTask: URLSessionTask, @unchecked Sendable {}

/// `class URLSession`
open class URLSession: NSObject, @unchecked Sendable {
    /// `@NSCopying var configuration: URLSessionConfiguration { get }`
    public let configuration: URLSessionConfiguration
    /// `var delegate: (any URLSessionDelegate)? { get }` (held strongly, as Apple's session does)
    public let delegate: (any URLSessionDelegate)?
    /// `var delegateQueue: OperationQueue { get }`
    public let delegateQueue: OperationQueue

    /// `init(configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?, delegateQueue queue: OperationQueue?)`
    /// Only background configurations are simulated. A session of an identifier the service
    /// has events for gets them now.
    public init(
        configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?,
        delegateQueue queue: OperationQueue?
    ) {
        precondition(configuration.identifier != nil, "URLSession stand-in: only background sessions are simulated")
        self.configuration = configuration
        self.delegate = delegate
        delegateQueue = queue ?? OperationQueue()
        if queue == nil { delegateQueue.maxConcurrentOperationCount = 1 }
        super.init()
        SimulatedTransferService.shared.attach(self)
    }

    var identifier: String { configuration.identifier! }

    /// `func downloadTask(with request: URLRequest) -> URLSessionDownloadTask`
    open func downloadTask(with request: URLRequest) -> URLSessionDownloadTask {
        SimulatedTransferService.shared.makeTask(in: self, request: request)
    }

    /// `var allTasks: [URLSessionTask] { get async }`
    open var allTasks: [URLSessionTask] {
        get async { SimulatedTransferService.shared.tasks(of: identifier) }
    }

    /// `func getAllTasks(completionHandler: @escaping @Sendable ([URLSessionTask]) -> Void)`
    open func getAllTasks(completionHandler: @escaping @Sendable ([URLSessionTask]) -> Void) {
        let tasks = SimulatedTransferService.shared.tasks(of: identifier)
        delegateQueue.addOperation { completionHandler(tasks) }
    }

    /// `func invalidateAndCancel()`
    open func invalidateAndCancel() {
        for task in SimulatedTransferService.shared.tasks(of: identifier) { task.cancel() }
        SimulatedTransferService.shared.detach(self)
    }

    /// `func finishTasksAndInvalidate()`
    open func finishTasksAndInvalidate() {
        SimulatedTransferService.shared.detach(self)
    }
}
