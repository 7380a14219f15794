// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

#if canImport(AVFoundation)
    public import AVFoundation
    @_spi(Adapter) public import MediaCache
    import NIOCore

    /// An `AVURLAsset` whose bytes come through MediaCache.
    ///
    /// ```swift
    /// let asset = CachingAVURLAsset(url: remoteURL, reader: reader)
    /// let player = AVPlayer(playerItem: AVPlayerItem(asset: asset))
    /// player.automaticallyWaitsToMinimizeStalling = false
    /// ```
    /// The URL's scheme is rewritten (`https` → `mediacache-https`) so AVFoundation hands every
    /// loading request to the asset's delegate, which is set up here, before any
    /// `AVPlayerItem` exists, and kept alive by the asset (AVFoundation holds it weakly).
    public final class CachingAVURLAsset: AVURLAsset {
        /// The prefix added to the origin URL's scheme.
        public static let schemePrefix = "mediacache-"

        /// The origin URL the bytes come from.
        public let originURL: URL
        private let loaderDelegate: ResourceLoaderDelegate

        /// Creates an asset for `url` (http or https) that loads through `reader`.
        public init(url: URL, reader: CachingReader, options: [String: Any]? = nil) {
            originURL = url
            loaderDelegate = ResourceLoaderDelegate(engine: ResourceLoaderEngine(url: url, reader: reader))
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
            components?.scheme = Self.schemePrefix + (url.scheme ?? "https")
            super.init(url: components?.url ?? url, options: options)
            resourceLoader.setDelegate(loaderDelegate, queue: loaderDelegate.queue)
        }

        /// Events about this asset's loading: bytes from cache and network, stalls, completion.
        public var events: AsyncStream<ResourceLoaderEvent> { loaderDelegate.engine.events }

        /// Cancels every loading request of this asset and the origin work behind it.
        public func cancelLoading() {
            loaderDelegate.engine.cancelAll()
        }

        /// Caches `length` bytes from `offset` (all when `nil`) without playing them.
        public func preload(offset: Int64 = 0, length: Int64? = nil) async throws {
            let reader = loaderDelegate.engine.reader
            for try await _ in try await reader.read(originURL, offset: offset, length: length) {}
        }
    }

    /// Maps `AVAssetResourceLoadingRequest`s onto a `ResourceLoaderEngine`; nothing more.
    // @unchecked Sendable: immutable after init; AVFoundation calls it on `queue`.
    final class ResourceLoaderDelegate: NSObject, AVAssetResourceLoaderDelegate, @unchecked Sendable {
        let engine: ResourceLoaderEngine<ObjectIdentifier>
        let queue = DispatchQueue(label: "mediacache.resource-loader")

        init(engine: ResourceLoaderEngine<ObjectIdentifier>) {
            self.engine = engine
        }

        deinit {
            engine.cancelAll()
        }

        func resourceLoader(
            _ resourceLoader: AVAssetResourceLoader,
            shouldWaitForLoadingOfRequestedResource loadingRequest: AVAssetResourceLoadingRequest
        ) -> Bool {
            let data = loadingRequest.dataRequest.map {
                LoadingRequest.DataRequest(
                    requestedOffset: $0.requestedOffset, requestedLength: Int64($0.requestedLength),
                    requestsAllDataToEndOfResource: $0.requestsAllDataToEndOfResource, currentOffset: $0.currentOffset)
            }
            let request = LoadingRequest(
                wantsContentInformation: loadingRequest.contentInformationRequest != nil, data: data)
            engine.start(
                ObjectIdentifier(loadingRequest), request, responder: AVLoadingResponder(request: loadingRequest))
            return true
        }

        func resourceLoader(
            _ resourceLoader: AVAssetResourceLoader, didCancel loadingRequest: AVAssetResourceLoadingRequest
        ) {
            engine.cancel(ObjectIdentifier(loadingRequest))
        }
    }

    /// Forwards the engine's answers to one AVFoundation loading request.
    // @unchecked Sendable: AVAssetResourceLoadingRequest may be answered from any thread.
    struct AVLoadingResponder: LoadingRequest.Responder, @unchecked Sendable {
        let request: AVAssetResourceLoadingRequest

        func fill(_ information: LoadingRequest.ContentInformation) {
            request.contentInformationRequest?.contentLength = information.contentLength
            request.contentInformationRequest?.contentType = information.contentType
            request.contentInformationRequest?.isByteRangeAccessSupported = information.isByteRangeAccessSupported
        }

        func respond(with data: ByteBuffer) {
            request.dataRequest?.respond(with: Data(data.readableBytesView))
        }

        func finishLoading() {
            request.finishLoading()
        }

        func finishLoading(with error: any Error) {
            request.finishLoading(with: error)
        }
    }

    /// Cancels the previous item's loading when an `AVQueuePlayer` moves to another item,
    /// which AVFoundation does not do by itself.
    public final class QueuePlayerLoadingCanceller: NSObject {
        private var observation: NSKeyValueObservation?

        /// Starts watching `player`; keep the returned object as long as the player.
        public init(player: AVQueuePlayer) {
            super.init()
            observation = player.observe(\.currentItem, options: [.old, .new]) { _, change in
                let old = change.oldValue??.asset as? CachingAVURLAsset
                let new = change.newValue??.asset as? CachingAVURLAsset
                if let old, old !== new { old.cancelLoading() }
            }
        }
    }
#endif
