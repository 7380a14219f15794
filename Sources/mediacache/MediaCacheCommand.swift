import ArgumentParser

@main
struct MediaCacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mediacache",
        abstract: "A caching proxy for media players: plays remote audio and video while saving the bytes on disk.",
        subcommands: [ServeCommand.self, URLCommand.self, PrefetchCommand.self, ListCommand.self, InfoCommand.self, RemoveCommand.self, ClearCommand.self, StatsCommand.self]
    )
}
