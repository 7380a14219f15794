// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser

/// Benchmarks and the developer tools the tests drive: the test origin as a process and the
/// crash-test writer. Its own executable, so the shipped `mediacache` carries no test code.
@main
struct MediaCacheBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mediacache-bench",
        abstract: "Measure the cache (build with -c release first), and developer tools for its tests.",
        subcommands: [
            StoreBenchCommand.self, StreamBenchCommand.self, CompareBenchCommand.self, CostBenchCommand.self,
            TLSBenchCommand.self,
            HLSBenchCommand.self, LLHLSBenchCommand.self, StartupBenchCommand.self,
            PreloadBenchCommand.self, GrowingBenchCommand.self, SoakBenchCommand.self,
            SeekBenchCommand.self, FillBenchCommand.self,
            CryptoBenchCommand.self, ExportBenchCommand.self,
            EncryptionBenchCommand.self, TraceBenchCommand.self,
            OriginCommand.self, CrashWriterCommand.self, FloorServerCommand.self, FloorProxyCommand.self,
        ]
    )
}
