public import Foundation

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
