import ArgumentParser

@main
struct MediaCacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mediacache",
        abstract: "A caching proxy for media players: plays remote audio and video while saving the bytes on disk.",
        subcommands: [
            ServeCommand.self, URLCommand.self, PrefetchCommand.self, PinCommand.self, URLChangeCommand<Unpin>.self, DownloadsCommand.self,
            JobCommand<PauseAction>.self, JobCommand<ResumeAction>.self, JobCommand<CancelAction>.self, ExportCommand.self,
            ListCommand.self, InfoCommand.self, URLChangeCommand<Remove>.self, ClearCommand.self, StatsCommand.self,
        ]
    )
}
