// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

/// Kills a process that is writing to a store at random moments and checks that the
/// reopened store claims only bytes that are on disk and right.
@Suite(.stallLimit, .endToEnd) struct CrashTests {
    /// Also with the store encrypted: then a block torn by the kill fails its check and is a
    /// hole (counted), never a wrong byte.
    @Test(arguments: [false, true])
    func killDashNineAtRandomMomentsNeverLeavesAWrongClaimedByte(encrypted: Bool) async throws {
        let executable = try ChildProcess.executable(named: "mediacache-bench")
        try await withTemporaryDirectory { directory in
            let keyBytes = (0..<32).map { UInt8($0 * 3) }
            let keyFile = directory.appendingPathComponent("key")
            try Data(keyBytes).write(to: keyFile)
            let key = encrypted ? SymmetricKey(data: keyBytes) : nil
            let store = directory.appendingPathComponent("store")
            var random = SplitMix(seed: 2026)
            var rounds: [(checked: Int64, problems: [String], rejected: Int)] = []
            for round in 0..<20 {
                let (process, output) = try ChildProcess.start(
                    executable,
                    ["crash-writer", "--directory", store.path, "--seed", "\(round + 1)"]
                        + (encrypted ? ["--encryption-key-file", keyFile.path] : []))
                _ = try await ChildProcess.lineArrives("ready", on: output)
                try await Task.sleep(for: .milliseconds(30 + Int(random.next() % 500)))
                kill(process.processIdentifier, SIGKILL)
                await process.exited()
                #expect(
                    process.terminationReason == .signalled(SIGKILL),
                    "round \(round): the writer must have been killed, not have exited")
                let result = try await CrashWriter.verify(directory: store, encryptionKey: key)
                #expect(result.problems.isEmpty, "round \(round): \(result.problems.prefix(5))")
                rounds.append((result.checkedBytes, result.problems, result.rejectedBlocks))
            }
            // The check is only worth something if the index claimed bytes when killed.
            #expect(
                rounds.filter { $0.checked > 0 }.count >= 15,
                "bytes checked per round: \(rounds.map(\.checked)), blocks rejected: \(rounds.map(\.rejected))")
            if !encrypted { #expect(rounds.allSatisfy { $0.rejected == 0 }) }
        }
    }
}
