public import Foundation
import Synchronization

/// Starts the project's own executables from tests and benchmarks.
public enum ChildProcess {
    /// The built `name` executable beside the running test bundle or binary.
    public static func executable(named name: String) throws -> URL {
        var candidates: [URL] = []
        let running = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var folder = running.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(folder.appendingPathComponent(name))
            folder = folder.deletingLastPathComponent()
        }
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) {
            return found
        }
        throw ChildProcessError(message: "Cannot find the executable \(name) near \(running.path); build it with `swift build` first.")
    }

    /// Starts `executable` with `arguments`, its standard output piped back.
    public static func start(_ executable: URL, _ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        return (process, output)
    }

    /// Starts `executable` and waits, off the cooperative pool, until it prints a line that
    /// starts with `prefix`; returns the process and that line.
    public static func startServer(_ executable: URL, _ arguments: [String], readyLinePrefix prefix: String) async throws -> (Process, String) {
        let (process, output) = try start(executable, arguments)
        do {
            let text = try await onDispatchThread { try waitForLine(prefix, on: output) }
            let line = text.split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init) ?? text
            return (process, line)
        } catch {
            process.terminate()
            throw error
        }
    }

    /// Runs a command-line tool found on the `PATH` and returns its exit status, standard
    /// output and standard error. The waiting happens on a Dispatch thread: blocking the
    /// cooperative pool would starve servers running in the same process.
    public static func run(_ arguments: [String]) async throws -> (status: Int32, output: Data, error: String) {
        try await onDispatchThread { try runBlocking(arguments) }
    }

    /// Whether a tool named `name` is on the `PATH`.
    public static func toolExists(_ name: String) -> Bool {
        (try? runBlocking(["which", name]).status) == 0
    }

    private static func onDispatchThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }

    private static func runBlocking(_ arguments: [String]) throws -> (status: Int32, output: Data, error: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Read both pipes to the end before waiting, so a chatty tool cannot block on a full pipe.
        let collected = Mutex<(Data, Data)>((Data(), Data()))
        let group = DispatchGroup()
        for (index, pipe) in [output, errors].enumerated() {
            group.enter()
            DispatchQueue.global().async {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                collected.withLock { if index == 0 { $0.0 = data } else { $0.1 = data } }
                group.leave()
            }
        }
        group.wait()
        process.waitUntilExit()
        let (out, err) = collected.withLock { $0 }
        return (process.terminationStatus, out, String(decoding: err, as: UTF8.self))
    }

    /// Reads `pipe` until a line equal to `line` arrives; throws at end of file.
    public static func waitForLine(_ line: String, on pipe: Pipe) throws -> String {
        var text = ""
        while true {
            let data = pipe.fileHandleForReading.availableData
            if data.isEmpty { throw ChildProcessError(message: "The child process ended before printing \(line); it printed: \(text)") }
            text += String(decoding: data, as: UTF8.self)
            if text.split(separator: "\n").contains(where: { $0 == line || $0.hasPrefix(line + " ") }) { return text }
        }
    }
}

/// A child process did not do what was expected.
public struct ChildProcessError: Error, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
