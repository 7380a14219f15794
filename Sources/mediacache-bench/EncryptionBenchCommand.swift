import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport

/// Encryption at rest against none, through the product: two `mediacache serve` processes in
/// front of the same test origin, one with `--encryption-key-file`, each asked for the same
/// whole file cold (origin → store → client) and then hot (store → client) with curl, the hot
/// reads alternating between the two servers; ratios from this one run, and each server's
/// peak memory.
struct EncryptionBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encryption",
        abstract: "Cold and hot whole-file reads through mediacache serve with and without --encryption-key-file; ratios and peak memory."
    )

    @Option(help: "The file's size in MiB.")
    var size: Int = 256

    @Option(help: "How many hot reads per server (the best is reported).")
    var rounds: Int = 5

    func validate() throws {
        guard size > 0, rounds > 0 else { throw ValidationError("--size and --rounds must be positive.") }
    }

    func run() async throws {
        let bench = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let executable = try ChildProcess.executable(named: "mediacache")
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("mediacache-encryption-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let keyFile = root.appendingPathComponent("key")
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: keyFile)
        chmod(keyFile.path, 0o600)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(decompression: .disabled))
        let client = BenchClient(http: http)
        var started: [SpawnedProcess] = []
        defer {
            for process in started.reversed() where process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
            try? FileManager.default.removeItem(at: root)
        }
        let (originProcess, originPort) = try await BenchServers.startOrigin(bench)
        started.append(originProcess)
        let origin = OriginControl(port: originPort, client: client)
        let plain = try await BenchServers.startOurs(executable, directory: root.appendingPathComponent("plain"), originPort: originPort,
                                                    name: "unencrypted", prefix: "/plain")
        started.append(plain.process)
        let sealed = try await BenchServers.startOurs(executable, directory: root.appendingPathComponent("sealed"), originPort: originPort,
                                                     name: "encrypted", prefix: "/sealed", arguments: ["--encryption-key-file", keyFile.path])
        started.append(sealed.process)
        let servers = [plain, sealed]
        let length = Int64(size) << 20
        let content = DeterministicContent(seed: 77)
        for server in servers { try await origin.serve("\(server.prefix)/big.mp4", length: length, seed: content.seed) }

        print("mediacache serve, unencrypted vs --encryption-key-file — \(size) MiB file, \(ProcessInfo.processInfo.activeProcessorCount) cores, origin, servers and curl on one machine")
        var cold: [Double] = []
        for server in servers {
            let transfer = try await client.curl([server.url("\(server.prefix)/big.mp4")], parallel: 1, expectedBytes: length)[0]
            cold.append(transfer.total)
            let fetched = try await origin.stats("\(server.prefix)/big.mp4").bytes
            guard fetched == length else { throw ValidationError("\(server.name): the origin sent \(fetched) bytes for a \(length)-byte file.") }
        }
        var hot = [Double](repeating: .infinity, count: servers.count)
        for _ in 0..<rounds {
            for (index, server) in servers.enumerated() {
                hot[index] = min(hot[index], try await client.curl([server.url("\(server.prefix)/big.mp4")], parallel: 1, expectedBytes: length)[0].total)
            }
        }
        // Every byte of a hot read, checked (not timed).
        for server in servers { try await client.read(server.url("\(server.prefix)/big.mp4"), content: content, length: length) }
        let mib = Double(size)
        func row(_ name: String, _ values: [Double], _ format: String, ratio: Double) {
            print(name.padding(toLength: 34, withPad: " ", startingAt: 0)
                  + values.map { String(format: format, $0).padding(toLength: 14, withPad: " ", startingAt: 0) }.joined()
                  + String(format: "%.2f×", ratio))
        }
        print("".padding(toLength: 34, withPad: " ", startingAt: 0) + "unencrypted   encrypted     encrypted / unencrypted")
        row("cold whole file, MiB/s", cold.map { mib / $0 }, "%.0f", ratio: cold[0] / cold[1])
        row("hot whole file, MiB/s (best of \(rounds))", hot.map { mib / $0 }, "%.0f", ratio: hot[0] / hot[1])
        let peaks = servers.map { Double($0.peakMemory) / 1_048_576 }
        row("server peak memory, MiB", peaks, "%.1f", ratio: peaks[1] / peaks[0])
        try await http.shutdown()
    }
}
