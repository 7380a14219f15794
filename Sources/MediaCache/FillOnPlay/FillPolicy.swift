// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Which files a play fills: once a player starts reading one, the cache goes on fetching it to
/// its end after the player's range, on the same origin response, as its own work, so the
/// version the play began with is soon whole on disk and a seek, a resume or the next play is
/// local (a podcast host that stitches other ads into each download cannot break the play).
/// Pure.
public struct FillPolicy: Sendable, Hashable, CustomStringConvertible {
    /// Which types it takes: audio only, or every file.
    public var audioOnly: Bool
    /// The largest file it fills (`nil`: any size).
    public var maximumBytes: Int64?

    public init(audioOnly: Bool, maximumBytes: Int64?) {
        self.audioOnly = audioOnly
        self.maximumBytes = maximumBytes
    }

    /// Fills nothing.
    public static let none = FillPolicy(audioOnly: true, maximumBytes: 0)
    /// Audio files up to 512 MiB (the default: an episode or an audiobook chapter; a seek in a
    /// film is no reason to fetch gigabytes).
    public static let audio = FillPolicy(audioOnly: true, maximumBytes: 512 << 20)
    /// Every file, whatever its size.
    public static let all = FillPolicy(audioOnly: false, maximumBytes: nil)
    /// Every file up to `bytes`.
    public static func upTo(_ bytes: Int64) -> FillPolicy { FillPolicy(audioOnly: false, maximumBytes: bytes) }

    /// Whether a file of `mimeType` and `length` bytes (named `path`, for a type the origin did
    /// not say) is filled. A file of unknown length, a playlist or a manifest never is.
    public func covers(mimeType: String?, length: Int64?, path: String) -> Bool {
        guard let length, length > 0, length <= (maximumBytes ?? .max) else { return false }
        let type = mimeType?.lowercased() ?? ""
        if Self.playlistTypes.contains(type) { return false }
        guard audioOnly else { return true }
        if type.hasPrefix("audio/") { return !Self.playlistTypes.contains(type) }
        // A type that says nothing (`application/octet-stream`, none): the name's extension.
        guard type.isEmpty || type == "application/octet-stream" || type == "binary/octet-stream" else { return false }
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        guard let dot = name.lastIndex(of: ".") else { return false }
        return Self.audioExtensions.contains(name[name.index(after: dot)...].lowercased())
    }

    /// Whether a file of `mimeType` (named `path`, for a type the origin did not say) is audio or
    /// video a player reads by range, not a playlist or a manifest.
    package static func isMedia(mimeType: String?, path: String) -> Bool {
        let type = mimeType?.lowercased() ?? ""
        if playlistTypes.contains(type) { return false }
        if type.hasPrefix("audio/") || type.hasPrefix("video/") || type == "application/mp4" { return true }
        guard type.isEmpty || type == "application/octet-stream" || type == "binary/octet-stream" else { return false }
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        guard let dot = name.lastIndex(of: ".") else { return false }
        let ext = name[name.index(after: dot)...].lowercased()
        return audioExtensions.contains(ext) || videoExtensions.contains(ext)
    }

    /// Which of the fills under way, oldest first (each saying whether a player reads it), end
    /// so that at most `capacity` run: the oldest no player reads, then the oldest. Their indices.
    static func superseded(_ readByPlayer: [Bool], capacity: Int) -> [Int] {
        let excess = readByPlayer.count - max(1, capacity)
        guard excess > 0 else { return [] }
        let unread = readByPlayer.indices.filter { !readByPlayer[$0] }
        let read = readByPlayer.indices.filter { readByPlayer[$0] }
        return Array((unread + read).prefix(excess)).sorted()
    }

    /// Where a fill's play stands (a pure judgement; ``FillOnPlay`` keeps the facts): proven once
    /// its players have read `proofBytes` into the file (`played`), or half of its `length`; else
    /// pending until no player has read it for the probation (`quietEnough`), then skipped if
    /// another play began since it did (the user moved on: a skip), proven if not. Until then
    /// the fill fetches only what its players ask, so a song skipped after a few seconds costs
    /// what was played, not the whole file; a moment's play with nothing after it is still
    /// filled whole, on the same answer, a probation later.
    static func standing(
        played: Int64, of length: Int64, proofBytes: Int64, quietEnough: Bool, otherPlayBegan: @autoclosure () -> Bool
    ) -> FillStanding {
        if played >= min(proofBytes, length / 2) { return .proven }
        guard quietEnough else { return .pending }
        return otherPlayBegan() ? .skipped : .proven
    }

    /// Whether a fill of a `length`-byte file fits a store of `limit` bytes: an eighth of it at
    /// most (a fill that would push out an eighth of the cache for one play is no bargain; the
    /// player's own reads are stored as ever).
    static func fits(_ length: Int64, storeLimit limit: Int64) -> Bool {
        length <= limit / 8
    }

    static let audioExtensions: Set<String> = ["mp3", "m4a", "m4b", "aac", "ogg", "oga", "opus", "flac", "wav", "mka"]
    static let videoExtensions: Set<String> = ["mp4", "m4v", "m4s", "mov", "mkv", "webm", "ts", "ogv", "3gp"]
    /// HLS playlists' and DASH manifests' media types: never filled.
    static let playlistTypes = ManifestLook.playlistTypes.union(ManifestLook.manifestTypes)

    /// Reads `none`, `audio`, `all` or a size in bytes (every file up to it).
    public init?(_ text: String) {
        switch text.lowercased() {
        case "none": self = .none
        case "audio": self = .audio
        case "all": self = .all
        default:
            guard let bytes = Int64(text), bytes > 0 else { return nil }
            self = .upTo(bytes)
        }
    }

    public var description: String {
        switch self {
        case .none: "none"
        case .audio: "audio"
        case .all: "all"
        default: maximumBytes.map { "\($0)" } ?? "all"
        }
    }
}

/// Where a fill's play stands (``FillPolicy/standing(played:of:proofBytes:quietEnough:otherPlayBegan:)``).
enum FillStanding: Equatable, Sendable {
    /// The play went on: the fill fetches its file to the end.
    case proven
    /// Not yet known: the fill fetches only what its players ask.
    case pending
    /// The user moved on early: the fill ends.
    case skipped
}
