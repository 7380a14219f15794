// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import AsyncHTTPClient
import Foundation
import MediaCacheTestSupport
import NIOCore

/// A trace played through `mediacache serve`, one player, nginx as the origin, every byte
/// checked: what the origin sent, and which plays started with no origin byte.
struct TraceReplay {
    /// What one replay measured.
    struct Figures {
        var asked: Int64 = 0
        var originBytes: Int64 = 0
        var originRequests = 0
        var instantStarts = 0
        var plays = 0
        var wrong = 0
        /// Origin bytes, and bytes asked, by the kind of play.
        var originByKind: [String: Int64] = [:]
        var askedByKind: [String: Int64] = [:]

        /// `kind origin/asked MiB` for each kind.
        var kinds: String {
            askedByKind.keys.sorted().map {
                "\($0) \((originByKind[$0] ?? 0) >> 20)/\((askedByKind[$0] ?? 0) >> 20) MiB"
            }.joined(separator: ", ")
        }
    }

    let requests: [TraceRequest]
    let origin: NginxOrigin

    /// Serves every resource of the trace from `origin` (deterministic bytes by path).
    static func prepare(_ requests: [TraceRequest], in folder: URL) async throws -> NginxOrigin {
        let origin = try await NginxOrigin.start(in: folder, expires: ["/": 86_400])
        var written: Set<String> = []
        for request in requests where written.insert(request.path).inserted {
            let bytes = DeterministicContent(name: request.path).buffer(offset: 0, length: Int(request.size))
            try origin.serve(Data(bytes.readableBytesView), at: request.path)
        }
        return origin
    }

    /// Plays the trace through a `serve --max-size size` on a fresh folder; with `pauses`, waits
    /// after each play that was not a skip (it asked less than a quarter of its file and not its
    /// end) until the server's fills have ended, as a real listen outlasts a fill.
    func run(size: String, pauses: Bool, folder: URL, flags: [String] = []) async throws -> Figures {
        let logged = origin.requests().count
        var figures = Figures()
        let client = HTTPClient.forPlayers(1)
        do {
            try await play(size: size, pauses: pauses, folder: folder, flags: flags, client: client, into: &figures)
            try await client.shutdown()
        } catch {
            try? await client.shutdown()
            throw error
        }
        let kinds = Dictionary(requests.map { ($0.path, $0.kind) }, uniquingKeysWith: { first, _ in first })
        for request in origin.requests().dropFirst(logged) {
            figures.originRequests += 1
            figures.originBytes += request.bytes
            figures.originByKind[kinds[String(request.target.prefix { $0 != "?" })] ?? "other", default: 0] +=
                request.bytes
        }
        return figures
    }

    private func play(
        size: String, pauses: Bool, folder: URL, flags: [String], client: HTTPClient, into figures: inout Figures
    ) async throws {
        try await withServe(cacheDirectory: folder, arguments: ["--max-size", size] + flags) { port in
            var index = 0
            while index < requests.count {
                var end = index
                while end < requests.count, requests[end].play == requests[index].play { end += 1 }
                let play = requests[index..<end]
                figures.plays += 1
                for (number, request) in play.enumerated() {
                    let (hit, right) = try await fetch(request, port: port, client: client)
                    figures.asked += request.length
                    figures.askedByKind[request.kind, default: 0] += request.length
                    if number == 0, hit { figures.instantStarts += 1 }
                    if !right { figures.wrong += 1 }
                }
                let asked = play.reduce(Int64(0)) { $0 + $1.length }
                let last = play[play.index(before: end)]
                let skipped = asked < last.size / 4 && last.last + 1 < last.size
                if pauses, !skipped { try await waitForFills(port: port, client: client) }
                index = end
            }
            try await waitForFills(port: port, client: client)
        }
    }

    /// One request through the proxy: whether its answer said it was a hit, and whether it was
    /// the origin's bytes.
    private func fetch(_ request: TraceRequest, port: Int, client: HTTPClient) async throws -> (hit: Bool, right: Bool)
    {
        let target = origin.url + request.path
        var http = HTTPClientRequest(url: "http://127.0.0.1:\(port)/?url=" + Self.encoded(target))
        http.headers.add(name: "Range", value: "bytes=\(request.first)-\(request.last)")
        let response = try await client.execute(http, timeout: .seconds(120))
        let body = try await response.body.collect(upTo: Int(request.length) + 1)
        let hit = response.headers["Cache-Status"].contains { $0.contains("MediaCache;hit") }
        let content = DeterministicContent(name: request.path)
        let right =
            response.status == .partialContent && body.readableBytes == Int(request.length)
            && content.firstMismatch(in: body, at: request.first) == nil
        return (hit, right)
    }

    /// Waits until the server runs no fill (its `/_mediacache/fills` is empty).
    private func waitForFills(port: Int, client: HTTPClient) async throws {
        let deadline = ContinuousClock.now + .seconds(600)
        while ContinuousClock.now < deadline {
            let response = try await client.execute(
                HTTPClientRequest(url: "http://127.0.0.1:\(port)/_mediacache/fills"), timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            if String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines) == "[]" { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ValidationError("The server's fills did not end within 600 s.")
    }

    static func encoded(_ url: String) -> String {
        url.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~")))
            ?? url
    }
}
