// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser

@main
struct MediaCacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mediacache",
        abstract: "A caching proxy for media players: plays remote audio and video while saving the bytes on disk.",
        subcommands: [
            ServeCommand.self, URLCommand.self, PrefetchCommand.self, PreloadCommand.self, PinCommand.self,
            UnpinCommand.self, RecordCommand.self, DownloadsCommand.self,
            NetworkCommand.self,
            JobCommand<PauseAction>.self, JobCommand<ResumeAction>.self, JobCommand<CancelAction>.self,
            ExportCommand.self, VerifyCommand.self,
            ListCommand.self, InfoCommand.self, URLChangeCommand<Remove>.self, ClearCommand.self, StatsCommand.self,
            ServiceCommand.self, IntegrateCommand.self, PlayCommand.self, LANCommand.self,
        ]
    )
}
