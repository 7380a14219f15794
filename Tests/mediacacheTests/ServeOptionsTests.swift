import Foundation
import MediaCacheTestSupport
import Testing

/// `mediacache serve` refuses options it cannot honour before it starts, saying why.
@Suite struct ServeOptionsTests {
    @Test func aCAFileThatCannotBeUsedStopsServeWithTheReason() async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            let notPEM = directory.appendingPathComponent("notes.txt")
            try "just some text\n".write(to: notPEM, atomically: true, encoding: .utf8)
            let cases = [
                (directory.appendingPathComponent("missing.pem").path, "Cannot read the CA file"),
                (notPEM.path, "holds no certificate"),
            ]
            for (path, reason) in cases {
                let result = try await ChildProcess.run([executable.path, "serve", "--port", "0", "--cache-dir", directory.appendingPathComponent("cache").path, "--ca-file", path])
                #expect(result.status != 0, "serve must not start with --ca-file \(path)")
                #expect(result.error.contains("--ca-file: ") && result.error.contains(reason) && result.error.contains(path), "\(result.error)")
            }
        }
    }
}
