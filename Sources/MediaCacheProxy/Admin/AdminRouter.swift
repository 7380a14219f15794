// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import NIOHTTP1

/// Routes an admin request by the table (``AdminAPI``): to the handler given its endpoint,
/// the query read as the endpoint's `Query` type; a name the table lacks is 404, a method
/// it does not list for the name 405 with the methods it does. `HEAD` is answered as `GET`,
/// without the body.
struct AdminRouter {
    typealias Handler = @Sendable (AdminQueryItems) async throws -> ProxyResponse
    private(set) var handlers: [AdminRoute: Handler] = [:]

    /// Answers `endpoint` with `answer`'s value as JSON; a ``CacheError`` it throws is
    /// answered as the cache's errors are.
    mutating func on<Query, Answer>(
        _ endpoint: AdminEndpoint<Query, Answer>, _ answer: @escaping @Sendable (Query) async throws -> Answer
    ) {
        responding(endpoint) { query in try AdminEndpoints.json(try await answer(query)) }
    }

    /// Answers `endpoint` with the response `respond` makes (a stream, a playlist).
    mutating func responding<Query, Answer>(
        _ endpoint: AdminEndpoint<Query, Answer>, _ respond: @escaping @Sendable (Query) async throws -> ProxyResponse
    ) {
        handlers[endpoint.route] = { items in
            let query = try Query(reading: items)
            do {
                return try await respond(query)
            } catch let error as CacheError {
                return ProxyResponse.failure(error)
            }
        }
    }

    /// The answer to `method` on `name` with `query`.
    /// - Throws: `ProxyRequestError`: 404 for a name the table lacks, 405 for a method it
    ///   does not list, 400 for a query its endpoint cannot read.
    func respond(_ name: String, method: HTTPMethod, query: AdminQueryItems) async throws -> ProxyResponse {
        if let handler = handlers[AdminRoute(method: method == .HEAD ? .GET : method, name: name)] {
            var response = try await handler(query)
            if method == .HEAD { response.body = .none }
            return response
        }
        let methods = AdminAPI.routes.filter { $0.name == name }.map(\.method)
        guard !methods.isEmpty else {
            throw ProxyRequestError(status: .notFound, "No admin endpoint /_mediacache/\(name.prefix(60)).")
        }
        let allowed = methods.flatMap { $0 == .GET ? [HTTPMethod.GET, .HEAD] : [$0] }.map(\.rawValue)
        throw ProxyRequestError(
            status: .methodNotAllowed, "\(method.rawValue.prefix(20)) is not how /_mediacache/\(name) is asked.",
            headers: [("Allow", allowed.joined(separator: ", "))])
    }
}
