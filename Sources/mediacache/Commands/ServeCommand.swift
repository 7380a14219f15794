import ArgumentParser

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the local caching proxy."
    )

    func run() async throws {
        print("mediacache serve: the proxy is not yet available in this version; the store is (see `mediacache bench store`).")
        throw ExitCode(2)
    }
}
