import ArgumentParser

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure the cache (build with -c release first).",
        subcommands: [StoreBenchCommand.self, StreamBenchCommand.self, CompareBenchCommand.self, TLSBenchCommand.self]
    )
}
