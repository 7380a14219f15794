// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
import MediaCache
import Synchronization

/// The LAN URLs revoked one by one (`mediacache lan revoke URL`), while every other URL of the
/// same key goes on working: each is known by its credential's MAC, kept in memory and, for
/// `serve`, in `lan.revoked` in the store folder (one per line, read at start), so a revoked
/// URL stays revoked across restarts. What the revoked URL's playlists named was minted with
/// credentials of its own: they end with its expiry (``LANCapabilities``), not with it.
package final class LANRevocations: Sendable {
    private let revoked: Mutex<Set<String>>
    private let file: URL?

    /// Revocations in memory alone.
    package convenience init() {
        self.init(file: nil, text: "")
    }

    private init(file: URL?, text: String) {
        self.file = file
        revoked = Mutex(Set(text.split(separator: "\n").map(String.init).filter(Self.isMAC)))
    }

    /// The revocations kept in `file` (read on the I/O thread pool; a line that is not a MAC is
    /// skipped, a missing file is none).
    package static func loading(_ file: URL) async -> LANRevocations {
        let text = try? await BlockingIO.run { try? String(contentsOf: file, encoding: .utf8) }
        return LANRevocations(file: file, text: (text ?? nil) ?? "")
    }

    /// The part of a credential that names it: its MAC.
    static func id(of credential: String) -> String? {
        guard let dot = credential.lastIndex(of: ".") else { return nil }
        let mac = String(credential[credential.index(after: dot)...])
        return isMAC(mac) ? mac : nil
    }

    private static func isMAC(_ text: String) -> Bool {
        text.utf8.count == LANCapabilities.macLength
            && text.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }

    /// Whether the URL whose credential is `credential` was revoked.
    func contains(credential: String) -> Bool {
        guard let id = Self.id(of: credential) else { return false }
        return revoked.withLock { $0.contains(id) }
    }

    /// Revokes the URL whose credential is `credential`; `false` when it was already. The file
    /// is written on the I/O thread pool.
    /// - Throws: ``CacheError`` when the file cannot be written (the revocation holds until a restart).
    func revoke(credential: String) async throws -> Bool {
        guard let id = Self.id(of: credential) else { return false }
        let added = revoked.withLock { $0.insert(id).inserted }
        guard added, let file else { return added }
        let lines = revoked.withLock { $0.sorted().joined(separator: "\n") } + "\n"
        try await BlockingIO.run {
            do {
                try Data(lines.utf8).write(to: file, options: .atomic)
            } catch {
                throw CacheError(
                    .ioFailure, "Cannot write \(file.path): the URL stays revoked only until the server restarts.",
                    underlyingError: error)
            }
        }
        return true
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}
