import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

/// Kills a process that is writing to a store at random moments and checks that the
/// reopened store claims only bytes that are on disk and right.
@Suite struct CrashTests {
    @Test func killDashNineAtRandomMomentsNeverLeavesAWrongClaimedByte() async throws {
        let executable = try ChildProcess.executable(named: "mediacache-bench")
        try await withTemporaryDirectory { directory in
            var random = SplitMix(seed: 2026)
            var rounds: [(checked: Int64, problems: [String])] = []
            for round in 0..<20 {
                let (process, output) = try ChildProcess.start(executable, ["crash-writer", "--directory", directory.path, "--seed", "\(round + 1)"])
                _ = try ChildProcess.waitForLine("ready", on: output)
                try await Task.sleep(for: .milliseconds(30 + Int(random.next() % 500)))
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                #expect(process.terminationReason == .signalled(SIGKILL), "round \(round): the writer must have been killed, not have exited")
                let result = try await CrashWriter.verify(directory: directory)
                #expect(result.problems.isEmpty, "round \(round): \(result.problems.prefix(5))")
                rounds.append((result.checkedBytes, result.problems))
            }
            // The check is only worth something if the index claimed bytes when killed.
            #expect(rounds.filter { $0.checked > 0 }.count >= 15, "bytes checked per round: \(rounds.map(\.checked))")
        }
    }
}
