// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AsyncHTTPClient
import Foundation
import MediaCache
import MediaCacheProxy
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

extension CacheAccess {
    // MARK: Talking to the server

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()

    static func request(_ info: ServerInfo, _ method: HTTPMethod, _ name: String, query: [URLQueryItem]) throws
        -> HTTPClientRequest
    {
        // Every byte outside RFC 3986's unreserved set is encoded (`+` and `&` in a URL too).
        let text = query.map { $0.name + "=" + HLSPlaylist.percentEncoded($0.value ?? "") }.joined(separator: "&")
        var request = HTTPClientRequest(url: info.baseURL + "/_mediacache/" + name + (text.isEmpty ? "" : "?" + text))
        request.method = method
        if let token = info.token { request.headers.add(name: "X-MediaCache-Token", value: token) }
        if method != .GET, method != .HEAD { request.headers.add(name: "X-MediaCache-Admin", value: "1") }
        return request
    }

    static func ask<T: Decodable>(_ info: ServerInfo, _ method: HTTPMethod, _ name: String, target: URL? = nil)
        async throws -> T
    {
        try await ask(
            info, method, name, query: target.map { [URLQueryItem(name: "target", value: $0.absoluteString)] } ?? [])
    }

    /// The preload queue of the server `info` describes.
    static func preloadStatus(_ info: ServerInfo) async throws -> [PreloadItemStatus] {
        try await ask(info, .GET, "preload", query: [], timeout: preloadTimeout)
    }

    /// Whether the server `info` describes answers (its preload queue, in seconds at most): a
    /// `server.json` a killed server left names a port nobody, or someone else, answers on.
    static func answers(_ info: ServerInfo) async -> Bool {
        (try? await preloadStatus(info)) != nil
    }

    /// The server answers a preload at once: a port nobody answers on is told in seconds, not
    /// after the minute AsyncHTTPClient would go on trying to connect.
    static let preloadTimeout: TimeAmount = .seconds(5)

    /// Replaces the preload queue of the server `info` describes (an empty `urls` empties it).
    static func preload(_ info: ServerInfo, _ urls: [URL], seconds: Double) async throws -> [PreloadItemStatus] {
        guard !urls.isEmpty else { return try await ask(info, .DELETE, "preload", query: [], timeout: preloadTimeout) }
        let query =
            urls.map { URLQueryItem(name: "target", value: $0.absoluteString) } + [
                URLQueryItem(name: "seconds", value: String(seconds))
            ]
        return try await ask(info, .POST, "preload", query: query, timeout: preloadTimeout)
    }

    static func ask<T: Decodable>(
        _ info: ServerInfo, _ method: HTTPMethod, _ name: String, query: [URLQueryItem],
        timeout: TimeAmount = .seconds(60)
    ) async throws -> T {
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(
                try request(info, method, name, query: query), timeout: timeout)
        } catch let failure as CommandFailure {
            throw failure
        } catch {
            guard info.pid > 0 else {
                // Addressed by port (`preload --port`), not found through a cache folder.
                throw CommandFailure(
                    "No MediaCache server answers at \(info.baseURL) (is `mediacache serve` running on that port?): \(error)."
                )
            }
            throw CommandFailure(
                "The server that holds the cache folder (\(info.baseURL), process \(info.pid)) does not answer: \(error)."
            )
        }
        guard response.status == .ok else { throw try await failure(response) }
        let body = try await response.body.collect(upTo: 256 << 20)
        do {
            return try decoder.decode(T.self, from: Data(buffer: body))
        } catch {
            throw CommandFailure(
                "The server at \(info.baseURL) answered /_mediacache/\(name) with something unreadable: \(error).")
        }
    }

    static func failure(_ response: HTTPClientResponse) async throws -> CommandFailure {
        let body = try await response.body.collect(upTo: 64 << 10)
        let message = String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines)
        let remedy = response.headers.first(name: "X-MediaCache-Remedy").flatMap(Remedy.init(parsing:))
        return CommandFailure(
            Advice.joined("The server answered \(response.status.code): \(message)", Advice.words(for: remedy)),
            status: Int(response.status.code))
    }
}
