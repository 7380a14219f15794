// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

#if canImport(AVFoundation)
    public import AVFoundation
    public import MediaCache
    public import MediaCacheProxy

    /// Makes the right asset for a URL: a progressive file (MP3, MP4) loads through the resource
    /// loader (``CachingAVURLAsset``); an HLS playlist, whose segments a resource loader cannot
    /// see, plays through the app's embedded proxy. The choice is ``EmbeddedProxy/route(for:headers:)``.
    ///
    /// ```swift
    /// let assets = try await CachingAssets.start(reader: reader)   // at app launch
    /// player.replaceCurrentItem(with: try await assets.playerItem(for: url))
    /// assets.preload(nextItems)                                    // as the feed moves
    /// await assets.stop()                                          // when the app terminates
    /// ```
    public final class CachingAssets: Sendable {
        public let proxy: EmbeddedProxy
        /// The background session pinned downloads run on, when asked for at ``start(reader:backgroundSession:)``.
        public let backgroundPins: BackgroundPinSession?

        private init(proxy: EmbeddedProxy, backgroundPins: BackgroundPinSession?) {
            self.proxy = proxy
            self.backgroundPins = backgroundPins
        }

        /// Starts the embedded proxy (127.0.0.1, a free port, a random token) over `reader`;
        /// with `backgroundSession`, pinned downloads (``downloads(configuration:)``) run on the
        /// background `URLSession` of that identifier (``BackgroundPinSession``), made now so
        /// the transfers the system finished while the app was gone are stored at once.
        public static func start(reader: CachingReader, backgroundSession: String? = nil) async throws
            -> CachingAssets
        {
            let pins = backgroundSession.map { BackgroundPinSession(identifier: $0, reader: reader) }
            return CachingAssets(proxy: try await EmbeddedProxy.start(reader: reader), backgroundPins: pins)
        }

        /// The pinned downloads of the proxy's store, on the background session when there is
        /// one; call ``DownloadQueue/start()`` on it (it reconciles the session's tasks).
        public func downloads(configuration: DownloadQueue.Configuration = DownloadQueue.Configuration()) throws
            -> DownloadQueue
        {
            var configuration = configuration
            configuration.backgroundTransfers = backgroundPins?.transfers ?? configuration.backgroundTransfers
            return try DownloadQueue(reader: proxy.reader, configuration: configuration)
        }

        /// Writes the held rendition of the HLS asset or DASH presentation at `url` as one file
        /// to keep, share or edit (an `.mp4`, `.m4a` or `.ts`; see ``CachingReader/exportFile(_:to:renditions:)``),
        /// with no network.
        @discardableResult
        public func exportFile(_ url: URL, to destination: URL, renditions: RenditionChoice = RenditionChoice())
            async throws -> ExportSummary
        {
            try await proxy.reader.exportFile(url, to: destination, renditions: renditions)
        }

        /// For `application(_:handleEventsForBackgroundURLSession:completionHandler:)`: whether
        /// the session is the pins' (then `completion` is called once its events are stored).
        public func handleBackgroundEvents(identifier: String, completion: @escaping @Sendable () -> Void) -> Bool {
            backgroundPins?.handleEvents(identifier: identifier, completion: completion) ?? false
        }

        /// The asset to play `url` with; an HLS master with `subtitles` lists each as a subtitle
        /// track (AVFoundation's legible media selection group), converted to WebVTT and aligned
        /// with the stream (give the same to a pin's `RenditionChoice.sideLoaded` to keep them).
        public func asset(for url: URL, subtitles: [SideLoadedSubtitle] = [], options: [String: Any]? = nil)
            async throws -> AVURLAsset
        {
            switch try await proxy.route(for: url) {
            case .resourceLoader: CachingAVURLAsset(url: url, reader: proxy.reader, options: options)
            case .proxy(let proxied):
                AVURLAsset(
                    url: subtitles.isEmpty ? proxied : proxy.url(for: url, subtitles: subtitles), options: options)
            }
        }

        /// A player item for `url` (its ``asset(for:subtitles:options:)``) that starts on the first
        /// eligible variant an HLS master lists: online, the proxy lists first the variants whose
        /// start the cache holds, so playback starts where the bytes are.
        public func playerItem(for url: URL, subtitles: [SideLoadedSubtitle] = [], options: [String: Any]? = nil)
            async throws -> AVPlayerItem
        {
            let item = AVPlayerItem(asset: try await asset(for: url, subtitles: subtitles, options: options))
            if #available(iOS 14, tvOS 14, macOS 11, watchOS 7, visionOS 1, *) {
                item.startsOnFirstEligibleVariant = true
            }
            return item
        }

        /// The origin URL an asset of these plays: a ``CachingAVURLAsset``'s, or the one a URL of
        /// the embedded proxy names (on loopback or the LAN address); an origin URL as it is.
        public func originURL(of asset: AVURLAsset) -> URL? {
            if let cached = asset as? CachingAVURLAsset { return cached.originURL }
            if let named = proxy.originURL(of: asset.url) { return named }
            return asset.url.scheme == "http" || asset.url.scheme == "https" ? asset.url : nil
        }

        /// Follows `player`'s external playback (AirPlay; see ``ExternalPlaybackFollower``);
        /// keep the follower as long as the player.
        public func followExternalPlayback(of player: AVPlayer, prefersOriginWhenNothingHeld: Bool = false)
            -> ExternalPlaybackFollower
        {
            ExternalPlaybackFollower(
                player: player, assets: self, prefersOriginWhenNothingHeld: prefersOriginWhenNothingHeld)
        }

        /// Stores the first `seconds` of each of `urls` (the next items of a feed, in the order they
        /// will play) ahead of the user, in place of the previous queue; returns at once. Files
        /// and HLS assets alike; a preload pauses while a player waits on an origin. See
        /// `CachingReader.preload(_:)`.
        public func preload(_ urls: [URL], seconds: Double = 5) {
            proxy.reader.preload(urls.map { PreloadItem($0, seconds: seconds) })
        }

        /// Makes sure the embedded proxy listens: call it when the app returns to the foreground
        /// (iOS closes a suspended app's listening sockets). The URLs players hold stay valid.
        public func ensureListening() async {
            await proxy.ensureListening()
        }

        /// Stops the embedded proxy.
        public func stop() async {
            await proxy.stop()
        }
    }
#endif
