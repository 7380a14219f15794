// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTPFields

/// `serve`'s help for players that cannot help themselves: origins that stand in for one
/// another, signed URLs renewed in the middle of a play, and hosts asked in pieces.
struct ServeOriginOptions: ParsableArguments {
    @Option(
        name: .customLong("origin-fallback"),
        help:
            "An origin that serves the same bytes as another, HOST[:PORT]=HOST2[:PORT] (repeatable): when the first cannot be reached, is too slow or answers 5xx, a read goes on from the second at the same byte.",
        transform: { text in
            let parts = text.split(separator: "=", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, let from = HostAndPort(parsing: parts[0]), let to = HostAndPort(parsing: parts[1]),
                from != to
            else {
                throw ValidationError("--origin-fallback takes HOST[:PORT]=HOST2[:PORT], not \(text.prefix(80)).")
            }
            return text
        })
    var originFallbacks: [String] = []

    @Option(
        name: .customLong("origin-piece"),
        help:
            "A host that slows long requests down, HOST=SIZE (repeatable), e.g. video.example=8M: no request to it asks for more than SIZE (at least 64K); a longer read is asked in consecutive pieces, one version across them.",
        transform: { text in
            let parts = text.split(separator: "=", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, HostAndPort(parsing: parts[0])?.port == nil, !parts[0].isEmpty,
                let size = try? ByteSize.parse(parts[1]), size >= 64 << 10
            else {
                throw ValidationError("--origin-piece takes HOST=SIZE with SIZE at least 64K, not \(text.prefix(80)).")
            }
            return text
        })
    var originPieces: [String] = []

    @Option(
        help: ArgumentHelp(
            "A command that prints a fresh URL for a signed one that expired or was refused (401, 403, 410), e.g. a signing service's client: run by /bin/sh with the URL as its last argument.",
            valueName: "command"))
    var refreshCommand: String?

    func validate() throws {
        if let refreshCommand, refreshCommand.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--refresh-command needs a command to run.")
        }
    }

    /// Sets the reader's alternates and refresh hook.
    func apply(to configuration: inout CachingReader.Configuration) {
        for pair in originFallbacks {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).lowercased() }
            configuration.originFallbacks[parts[0], default: []].append(parts[1])
        }
        for pair in originPieces {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            if let size = try? ByteSize.parse(parts[1]) { configuration.originPieces[parts[0].lowercased()] = size }
        }
        if let refreshCommand {
            let command = RefreshCommand(command: refreshCommand)
            configuration.freshURL = { try await command.freshURL(for: $0) }
        }
    }
}
