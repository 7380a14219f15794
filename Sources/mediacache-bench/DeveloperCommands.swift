// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache
import MediaCacheTestSupport

struct CrashWriterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crash-writer",
        abstract: "Write random ranges to a store until killed (for the crash test)."
    )

    @Option(help: "The store's folder.")
    var directory: String

    @Option(help: "The random seed.")
    var seed: UInt64 = 1

    @Option(name: .customLong("encryption-key-file"), help: "Encrypt the store with the key in this file.")
    var encryptionKeyFile: String?

    func run() async throws {
        let key = try encryptionKeyFile.map { try EncryptionKey.load(path: $0).key }
        try await CrashWriter.run(directory: URL(fileURLWithPath: directory), seed: seed, encryptionKey: key)
    }
}

/// The test origin as its own process, for benchmarks that put other servers in front of it.
struct OriginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "origin",
        abstract: "Run the test origin; add resources and read its counters under /_origin/.",
        discussion:
            "GET /_origin/serve?path=/a.mp4&length=N[&seed=S][&bps=R], /_origin/stats?path=/a.mp4 (prints REQUESTS BYTES), /_origin/reset. Stop it with SIGTERM."
    )

    @Option(help: "The port to listen on (0: any free port).")
    var port = 0

    func run() async throws {
        let origin = try await TestOrigin.start(port: port, acceptsControl: true)
        print("origin: listening on http://\(origin.host):\(origin.port)")
        fflush(nil)
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}
