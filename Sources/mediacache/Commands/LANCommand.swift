// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheProxy

/// `mediacache lan …`: the LAN listener's URLs (`mediacache url --lan` mints them).
struct LANCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lan", abstract: "Manage the URLs given to devices of the network.",
        subcommands: [LANRevokeCommand.self])
}

/// `mediacache lan revoke URL`: that URL stops working, at once and across restarts; every other
/// URL of the server's LAN key goes on (removing `lan.key` revokes them all).
struct LANRevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Stop one LAN URL working (as `mediacache url --lan` printed it); the others go on.")

    @Argument(help: "The LAN URL, as it was given.")
    var url: String

    @OptionGroup var server: ServerAddress

    func run() async throws {
        let info = try await server.resolved()
        let answer = try await ServerCache(info).ask(AdminAPI.lanRevoke, LANURLQuery(url))
        print(answer.revoked ? "Revoked: the URL answers 403 from now on." : "That URL was revoked already.")
    }
}
