// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

#if canImport(AVFoundation)
    public import AVFoundation
    public import Foundation
    @_spi(Adapter) public import MediaCache
    import Synchronization

    /// Runs pinned downloads on a background `URLSession`, so they go on while the app is
    /// suspended or terminated by the system (not after a force-quit: the system cancels the
    /// transfers then, and the next launch asks again for what is missing). The queue hands it
    /// each missing piece as a ranged download task tagged with its job, entry and range; each
    /// finished file is checked and stored (``BackgroundTransfers``) before the session deletes
    /// it. Make it at launch, before anything else touches the session, and give its
    /// ``transfers`` to the ``DownloadQueue`` (``CachingAssets/downloads(configuration:)`` does both);
    /// pass the app delegate's background events to ``handleEvents(identifier:completion:)``.
    public final class BackgroundPinSession: NSObject, URLSessionDownloadDelegate,
        @unchecked Sendable
    {
        /// The session's identifier, the same at every launch.
        public let identifier: String
        /// What stores the files; the queue's ``DownloadQueue/Configuration/backgroundTransfers``.
        public let transfers: BackgroundTransfers
        private let delegateQueue = OperationQueue()
        private let events = Mutex<(completion: (@Sendable () -> Void)?, finished: Bool)>((nil, false))
        private var session: URLSession!

        /// The background session `identifier` over `reader`'s store. The system delivers the
        /// transfers it finished while the app was gone as soon as this exists.
        public init(identifier: String = "mediacache.pins", reader: CachingReader) {
            self.identifier = identifier
            transfers = BackgroundTransfers(reader: reader)
            delegateQueue.maxConcurrentOperationCount = 1
            delegateQueue.name = "MediaCache background pins"
            super.init()
            transfers.connect(self)
            let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
            configuration.sessionSendsLaunchEvents = true
            configuration.isDiscretionary = false
            session = URLSession(configuration: configuration, delegate: self, delegateQueue: delegateQueue)
        }

        /// For `application(_:handleEventsForBackgroundURLSession:completionHandler:)`: keeps
        /// `completion` and calls it on the main queue once the session has delivered its
        /// events (files stored). Returns `false` for another session's identifier.
        public func handleEvents(identifier: String, completion: @escaping @Sendable () -> Void) -> Bool {
            guard identifier == self.identifier else { return false }
            let finished = events.withLock { events -> Bool in
                defer { events.finished = false }
                if !events.finished { events.completion = completion }
                return events.finished
            }
            if finished { DispatchQueue.main.async(execute: completion) }
            return true
        }

        // MARK: URLSessionDownloadDelegate

        public func urlSession(
            _ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL
        ) {
            let response = downloadTask.response as? HTTPURLResponse
            let fields = (response?.allHeaderFields ?? [:]).compactMap { name, value in
                (name as? String).map { ContentMetadata.HeaderField(name: $0, value: "\(value)") }
            }
            let description = downloadTask.taskDescription
            // The session deletes the file when this returns: it is stored first. This waits on
            // the session's own delegate queue, never on a thread of the cooperative pool.
            let stored = DispatchSemaphore(value: 0)
            // Owned: this call waits for it (the semaphore), on the session's delegate queue.
            Task { [transfers] in
                await transfers.importFinished(
                    taskDescription: description, status: response?.statusCode ?? 0, fields: fields, file: location)
                stored.signal()
            }
            stored.wait()
        }

        public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            let cancelled = (error as? URLError)?.code == .cancelled
            transfers.transferEnded(
                taskDescription: task.taskDescription, error: cancelled ? nil : error.map { "\($0)" })
        }

        public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
            let completion = events.withLock { events -> (@Sendable () -> Void)? in
                defer { events.completion = nil }
                events.finished = events.completion == nil
                return events.completion
            }
            if let completion { DispatchQueue.main.async(execute: completion) }
        }
    }

    // The system's transfer service, as the engine's background transfers see it.
    @_spi(Adapter) extension BackgroundPinSession: BackgroundTransferSession {

        public func tasks() async -> [BackgroundTransferTask] {
            await session.allTasks.filter { $0.state == .running || $0.state == .suspended }.map {
                BackgroundTransferTask(identifier: $0.taskIdentifier, taskDescription: $0.taskDescription)
            }
        }

        public func start(_ request: BackgroundTransferRequest) {
            var urlRequest = URLRequest(url: request.url)
            for field in request.fields { urlRequest.setValue(field.value, forHTTPHeaderField: field.name) }
            urlRequest.allowsExpensiveNetworkAccess = request.allowsExpensiveNetworkAccess
            urlRequest.allowsConstrainedNetworkAccess = request.allowsConstrainedNetworkAccess
            let task = session.downloadTask(with: urlRequest)
            task.taskDescription = request.transfer.taskDescription
            task.earliestBeginDate = request.earliestBeginDate
            task.resume()
        }

        public func cancel(_ identifier: Int) {
            session.getAllTasks { tasks in tasks.first { $0.taskIdentifier == identifier }?.cancel() }
        }
    }
#endif
