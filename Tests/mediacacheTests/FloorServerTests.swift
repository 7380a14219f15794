// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOCore
import Testing

/// `mediacache-bench floor-server`, the bare SwiftNIO server the benchmarks measure the proxy
/// against: a floor that answered other bytes, or other ranges, would make every ratio to it
/// meaningless, so its answers are checked as the proxy's are, with curl.
@Suite(.stallLimit, .endToEnd) struct FloorServerTests {
    @Test func theFloorAnswersTheRangesAskedWithTheFilesBytes() async throws {
        let executable = try ChildProcess.executable(named: "mediacache-bench")
        try await withTemporaryDirectory { directory in
            let length = 300_000
            let content = DeterministicContent(seed: 56)
            let file = directory.appendingPathComponent("floor.bin")
            try Data(buffer: content.buffer(offset: 0, length: length)).write(to: file)
            let (process, line) = try await ChildProcess.startServer(
                executable, ["floor-server", "--file", file.path, "--port", "0"], readyLinePrefix: "floor: listening on"
            )
            defer { process.terminate() }
            let base = try #require(line.split(separator: " ").last.map(String.init))
            // A closed range, an open one, and no range: 206, 206 and the whole file, 200.
            for (range, expected) in [
                ("65536-131071", 65_536..<131_072), ("299000-", 299_000..<length), (nil, 0..<length),
            ] as [(String?, Range<Int>)] {
                let headers = directory.appendingPathComponent("headers")
                let (status, body, error) = try await ChildProcess.run(
                    ["curl", "-s", "-D", headers.path] + (range.map { ["-r", $0] } ?? []) + ["\(base)/floor.bin"])
                #expect(status == 0, "\(error)")
                let head = try String(contentsOf: headers, encoding: .utf8)
                #expect(head.hasPrefix(range == nil ? "HTTP/1.1 200" : "HTTP/1.1 206"), "\(head)")
                #expect(body.count == expected.count, "range \(range ?? "none")")
                #expect(
                    content.firstMismatch(in: ByteBuffer(bytes: body), at: Int64(expected.lowerBound)) == nil,
                    "range \(range ?? "none")")
            }
        }
    }
}
