// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

#if canImport(AVFoundation)
    public import AVFoundation
    public import MediaCacheProxy

    /// Moves a player's item to where an AirPlay receiver can fetch it. The receiver fetches the
    /// item's URL itself, from another device of the network, so the embedded proxy's
    /// `127.0.0.1` (the receiver itself) and a resource loader's scheme will not do: when
    /// external playback starts, the item is replaced, at the same time, by one on the URL
    /// ``EmbeddedProxy/externalSource(for:lanAddress:prefersOriginWhenNothingHeld:)`` gives (the
    /// proxy on the Wi-Fi address, the token in the path; or the origin when nothing is held and
    /// the app prefers it). When it ends, the item plays from the device again and the LAN
    /// address is closed. Keep the follower as long as the player.
    public final class ExternalPlaybackFollower: NSObject, @unchecked Sendable {
        private var observation: NSKeyValueObservation?
        /// The last switch of the player's item, each after the one before; cancelled with the follower.
        private var switching: Task<Void, Never>?
        private let lock = NSLock()
        private let assets: CachingAssets
        private let prefersOrigin: Bool
        private let lanAddress: @Sendable () -> String?

        /// Starts following `player`, whose items `assets` made.
        /// - Parameters:
        ///   - prefersOriginWhenNothingHeld: give the receiver the origin URL for an item the
        ///     cache holds nothing of (the phone's radio stays free).
        ///   - lanAddress: the address the receiver reaches this device at; the Wi-Fi address by
        ///     default (``LANAddress/current()``).
        public init(
            player: AVPlayer, assets: CachingAssets, prefersOriginWhenNothingHeld: Bool = false,
            lanAddress: @escaping @Sendable () -> String? = { LANAddress.current() }
        ) {
            self.assets = assets
            self.prefersOrigin = prefersOriginWhenNothingHeld
            self.lanAddress = lanAddress
            super.init()
            observation = player.observe(\.isExternalPlaybackActive, options: [.new]) { [weak self] player, change in
                guard let self else { return }
                nonisolated(unsafe) let player = player
                let active = change.newValue ?? false
                self.lock.withLock {
                    let previous = self.switching
                    self.switching = Task {
                        await previous?.value
                        await self.switchItem(of: player, external: active)
                    }
                }
            }
        }

        deinit {
            lock.withLock { switching?.cancel() }
        }

        /// Replaces the player's item by one for the receiver (`external`) or for this device.
        private func switchItem(of player: AVPlayer, external: Bool) async {
            guard let asset = player.currentItem?.asset as? AVURLAsset, let origin = assets.originURL(of: asset) else {
                return
            }
            let time = player.currentTime()
            let item: AVPlayerItem
            if external {
                let source = try? await assets.proxy.externalSource(
                    for: origin, lanAddress: lanAddress(), prefersOriginWhenNothingHeld: prefersOrigin)
                switch source {
                case .lan(let url)?, .origin(let url)?: item = AVPlayerItem(url: url)
                case nil: return
                }
            } else {
                await assets.proxy.endExternalPlayback()
                guard let local = try? await assets.playerItem(for: origin) else { return }
                item = local
            }
            player.replaceCurrentItem(with: item)
            _ = await player.seek(to: time)
        }
    }
#endif
