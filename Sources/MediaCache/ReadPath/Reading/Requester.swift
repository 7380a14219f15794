// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Who a read, a download or an origin request is for: a player, or the cache's own work of a
/// kind. One value, given to each read (``CachingReader``'s internal entry points take it) and
/// kept by the read's session, its downloads and their transfers, which hand it to the origin
/// side with each request (``MeteredFetcher``): nothing is read from the calling task.
///
/// A player comes first everywhere: its requests take any free connection of the host's
/// ``ConnectionBudget`` and never wait behind the cache's own; the cache's own work gives way to
/// players (``OriginPriority``) and lets its connection go to a player that waits for one
/// (``TransferPolicy``).
package struct Requester: Sendable, Equatable, CustomStringConvertible {
    /// The kinds of work.
    package enum Kind: String, Sendable, CaseIterable {
        /// A player's read: the proxy's requests, the resource loader's, an app's own reads.
        case player
        /// A player's download going on to its file's end past the player's range (``FillPolicy``).
        case fill
        /// A segment stored ahead of a player playing through a playlist (``SegmentReadAhead``).
        case readAhead = "read-ahead"
        /// An app's or the command line's prefetch of a file or an asset.
        case prefetch
        /// The first seconds of what plays next (``Preloader``).
        case preload
        /// A pinned download (``DownloadQueue``), within its rules' rate caps.
        case pin
        /// A live stream's recording.
        case recording
        /// An export or a look at what the store holds (``Exporter``, ``HeldAssets``), through a
        /// reader that never asks the origin.
        case export
    }

    /// What the work is.
    package let kind: Kind
    /// The rate caps and disk room a pinned download or recording keeps to (``DownloadPacer``):
    /// taken before each chunk no player reads.
    let pacer: DownloadPacer?

    private init(kind: Kind, pacer: DownloadPacer?) {
        self.kind = kind
        self.pacer = pacer
    }

    /// A player.
    package static let player = Requester(kind: .player, pacer: nil)

    /// The cache's own work of `kind` (not ``Kind/player``), unpaced.
    package static func own(_ kind: Kind) -> Requester { own(kind, pacer: nil) }

    /// The cache's own work of `kind`, paced by `pacer`.
    static func own(_ kind: Kind, pacer: DownloadPacer?) -> Requester {
        precondition(kind != .player, "a player is not the cache's own work")
        return Requester(kind: kind, pacer: pacer)
    }

    /// Whether it is a player.
    package var isPlayer: Bool { kind == .player }

    package var description: String { kind.rawValue }

    package static func == (a: Requester, b: Requester) -> Bool {
        a.kind == b.kind && a.pacer === b.pacer
    }
}
