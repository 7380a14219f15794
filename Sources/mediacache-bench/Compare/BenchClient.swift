// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore

/// The clients the comparison uses: AsyncHTTPClient where a request is cut short or bytes
/// are checked, curl where throughput and time to first byte are measured.
struct BenchClient {
    let http: HTTPClient

    /// One transfer as curl reports it.
    struct Transfer {
        var status: Int
        var bytes: Int64
        var firstByte: Double
        var total: Double
    }

    /// A short text answer.
    func text(_ url: String) async throws -> String {
        let response = try await http.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        guard (200..<300).contains(response.status.code) else {
            throw ValidationError("\(url) answered \(response.status.code)")
        }
        return String(buffer: body)
    }

    /// Reads `url` from `offset` (to the end, or `length` bytes), keeps the first `take`
    /// bytes and hangs up, as a player does. Checks every byte kept against `content`.
    /// Returns the bytes kept and the time to the first byte.
    @discardableResult
    func read(_ url: String, content: DeterministicContent, offset: Int64 = 0, length: Int64? = nil, take: Int64? = nil)
        async throws -> (range: ByteRange, firstByte: Double)
    {
        var request = HTTPClientRequest(url: url)
        if offset > 0 || length != nil {
            request.headers.add(name: "Range", value: "bytes=\(offset)-\(length.map { String(offset + $0 - 1) } ?? "")")
        }
        let start = ContinuousClock.now
        let response = try await http.execute(request, timeout: .seconds(120))
        guard [200, 206].contains(response.status.code) else {
            throw ValidationError("\(url) answered \(response.status.code)")
        }
        var cursor = offset
        let limit = take.map { offset + $0 } ?? .max
        var firstByte: Double?
        for try await chunk in response.body where chunk.readableBytes > 0 {
            firstByte = firstByte ?? (ContinuousClock.now - start).seconds
            let kept = chunk.getSlice(
                at: chunk.readerIndex, length: Int(min(Int64(chunk.readableBytes), limit - cursor)))!
            if let wrong = content.firstMismatch(in: kept, at: cursor) {
                throw ValidationError("\(url): wrong byte at offset \(wrong)")
            }
            cursor += Int64(kept.readableBytes)
            if cursor >= limit { break }
        }
        if let length, take == nil, cursor != offset + length {
            throw ValidationError("\(url): got \(cursor - offset) bytes of \(length)")
        }
        return (ByteRange(offset, cursor), firstByte ?? .infinity)
    }

    /// Reads the first byte of `url` and hangs up; returns the seconds it took.
    func firstByte(_ url: String, content: DeterministicContent) async throws -> Double {
        try await read(url, content: content, take: 1).firstByte
    }

    /// Fetches `urls` whole with one curl process, up to `parallel` at a time, writing the
    /// bodies to /dev/null; checks each answered 200 with `expectedBytes`. Returns each
    /// transfer's figures as curl measured them (the process start-up is not in them).
    func curl(_ urls: [String], parallel: Int, expectedBytes: Int64) async throws -> [Transfer] {
        var arguments = [
            "curl", "--silent", "--show-error", "--no-progress-meter",
            "--write-out", "%{http_code} %{size_download} %{time_starttransfer} %{time_total}\\n",
        ]
        if parallel > 1 { arguments += ["--parallel", "--parallel-immediate", "--parallel-max", "\(parallel)"] }
        for url in urls { arguments += [url, "--output", "/dev/null"] }
        let result = try await ChildProcess.run(arguments)
        guard result.status == 0 else { throw ValidationError("curl failed (\(result.status)): \(result.error)") }
        let transfers = String(decoding: result.output, as: UTF8.self).split(separator: "\n").map { line -> Transfer in
            let fields = line.split(separator: " ")
            return Transfer(
                status: Int(fields[0]) ?? 0, bytes: Int64(fields[1]) ?? -1,
                firstByte: Double(fields[2]) ?? .infinity, total: Double(fields[3]) ?? .infinity)
        }
        guard transfers.count == urls.count, transfers.allSatisfy({ $0.status == 200 && $0.bytes == expectedBytes })
        else {
            throw ValidationError(
                "curl: expected \(urls.count) × 200 with \(expectedBytes) bytes, got \(transfers.map { "\($0.status)/\($0.bytes)" })"
            )
        }
        return transfers
    }

    /// Fetches the `ranges` of `url` one after another with one curl process, on one
    /// keep-alive connection or (`newConnections`) each on a connection of its own, as ffmpeg
    /// and mpv do on a seek; checks each answered 206 with the range's length. Returns each
    /// transfer's figures as curl measured them (with a new connection, its set-up included).
    func curlRanges(_ url: String, _ ranges: [ByteRange], newConnections: Bool = false) async throws -> [Transfer] {
        var arguments = ["curl"]
        for (index, range) in ranges.enumerated() {
            if index > 0 { arguments.append("--next") }
            if newConnections { arguments += ["--header", "Connection: close"] }
            arguments += [
                "--silent", "--show-error", "--no-progress-meter", "--range",
                "\(range.lowerBound)-\(range.upperBound - 1)",
                "--write-out", "%{http_code} %{size_download} %{time_starttransfer} %{time_total} %{num_connects}\\n",
                url, "--output", "/dev/null",
            ]
        }
        let result = try await ChildProcess.run(arguments)
        guard result.status == 0 else { throw ValidationError("curl failed (\(result.status)): \(result.error)") }
        let lines = String(decoding: result.output, as: UTF8.self).split(separator: "\n")
        let transfers = lines.map { line -> Transfer in
            let fields = line.split(separator: " ")
            return Transfer(
                status: Int(fields[0]) ?? 0, bytes: Int64(fields[1]) ?? -1,
                firstByte: Double(fields[2]) ?? .infinity, total: Double(fields[3]) ?? .infinity)
        }
        let connections = lines.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +)
        let expectedConnections = newConnections ? ranges.count : 1
        guard transfers.count == ranges.count,
            zip(transfers, ranges).allSatisfy({ $0.status == 206 && $0.bytes == $1.length }),
            connections == expectedConnections
        else {
            throw ValidationError(
                "curl: expected \(ranges.count) × 206 on \(expectedConnections) connections, got \(transfers.prefix(5).map { "\($0.status)/\($0.bytes)" }), \(connections) connections"
            )
        }
        return transfers
    }
}
