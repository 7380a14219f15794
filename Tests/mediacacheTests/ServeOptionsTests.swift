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

    /// `--insecure-skip-verify` warns as the server starts (and on every request's log line:
    /// `HTTPSOriginTests`).
    @Test func skippingVerificationWarnsAtStart() async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            // Stopped with SIGINT after 4 s, as a user would with Ctrl-C.
            let result = try await ChildProcess.run(["timeout", "-s", "INT", "4", executable.path, "serve", "--port", "0",
                                                     "--cache-dir", directory.appendingPathComponent("cache").path, "--insecure-skip-verify"])
            #expect(result.error.contains("warning") && result.error.contains("Origin certificates are NOT verified (--insecure-skip-verify)"), "\(result.error)")
            #expect(String(decoding: result.output, as: UTF8.self).contains("mediacache: serving on"))
        }
    }

    /// `--encryption-key-file`: a file that is not a 256-bit key stops serve with the reason;
    /// a key others may read starts it, with a warning that says what to do.
    @Test func anEncryptionKeyFileIsCheckedBeforeServeStarts() async throws {
        let executable = try ChildProcess.executable(named: "mediacache")
        try await withTemporaryDirectory { directory in
            let cache = directory.appendingPathComponent("cache").path
            let short = directory.appendingPathComponent("short").path
            try Data(repeating: 7, count: 16).write(to: URL(fileURLWithPath: short))
            let notHex = directory.appendingPathComponent("not-hex").path
            try String(repeating: "zz", count: 32).write(toFile: notHex, atomically: true, encoding: .utf8)
            let cases = [
                (directory.appendingPathComponent("missing").path, "Cannot read the key file"),
                (short, "The key file holds 16 bytes: it must hold 32 raw bytes or 64 hexadecimal characters"),
                (notHex, "must all be hexadecimal"),
            ]
            for (path, reason) in cases {
                let result = try await ChildProcess.run([executable.path, "serve", "--port", "0", "--cache-dir", cache, "--encryption-key-file", path])
                #expect(result.status != 0, "serve must not start with --encryption-key-file \(path)")
                #expect(result.error.contains("--encryption-key-file: ") && result.error.contains(reason), "\(result.error)")
            }
            let readable = directory.appendingPathComponent("key").path
            try Data(repeating: 9, count: 32).write(to: URL(fileURLWithPath: readable))
            chmod(readable, 0o644)
            let result = try await ChildProcess.run(["timeout", "-s", "INT", "4", executable.path, "serve", "--port", "0", "--cache-dir", cache,
                                                     "--encryption-key-file", readable])
            #expect(result.error.contains("warning") && result.error.contains("may be read by other users (mode 644): chmod 600 it"), "\(result.error)")
            #expect(String(decoding: result.output, as: UTF8.self).contains(", encrypted)"))
        }
    }
}
