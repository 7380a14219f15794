import ArgumentParser
import Foundation
import MediaCacheTestSupport

/// Developer commands used by the tests; hidden from help.
struct DebugCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "debug",
        abstract: "Developer tools used by the test suite.",
        shouldDisplay: false,
        subcommands: [CrashWriterCommand.self]
    )
}

struct CrashWriterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crash-writer",
        abstract: "Write random ranges to a store until killed (for the crash test)."
    )

    @Option(help: "The store's folder.")
    var directory: String

    @Option(help: "The random seed.")
    var seed: UInt64 = 1

    func run() async throws {
        try await CrashWriter.run(directory: URL(fileURLWithPath: directory), seed: seed)
    }
}
