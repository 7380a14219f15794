// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import Logging
import MediaCacheHTTP
import MediaCacheProxy
import NIOCore

/// What `serve`'s options make of the proxy's configuration and the origins' trust roots.
extension ServeCommand {
    func proxyConfiguration(logger: Logger) throws -> ProxyConfiguration {
        var configuration = ProxyConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.allowsRemoteClients = allowRemote
        configuration.serverNames = Set(serverNames)
        for origin in corsOrigins {
            guard let url = URL(string: origin), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
                url.path.isEmpty || url.path == "/"
            else {
                throw ValidationError("--cors-origin takes a web origin such as https://app.example, not \(origin).")
            }
        }
        configuration.corsOrigins = Set(corsOrigins.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 })
        configuration.addsCMCD = cmcd
        configuration.maxConnections = maxConnections
        guard (1...max(1, System.coreCount)).contains(threads) else {
            throw ValidationError("--threads must be 1...\(System.coreCount) here (one per core at most).")
        }
        configuration.eventLoops = threads
        configuration.maxURIBytes = maxUriBytes
        configuration.maxHeaderBytes = maxHeaderBytes
        guard (1...3600).contains(requestTimeout), (1...86400).contains(idleTimeout) else {
            throw ValidationError("--request-timeout must be 1...3600 seconds and --idle-timeout 1...86400.")
        }
        configuration.requestTimeout = .seconds(Int64(requestTimeout))
        configuration.idleTimeout = .seconds(Int64(idleTimeout))
        configuration.token = accessToken
        lan.apply(to: &configuration)
        configuration.logger = logger
        do {
            try configuration.validate()
        } catch let error as ProxyError {
            throw ValidationError(Advice.message(error))
        }
        return configuration
    }

    /// The roots of `--ca-file`, each file checked.
    func trustRoots() throws -> TrustRoots {
        var roots = TrustRoots()
        for path in caFiles {
            do {
                roots.append(try TrustRoots.load(pemFile: path))
            } catch let error as TrustRootsError {
                throw ValidationError("--ca-file: \(error.message)")
            }
        }
        return roots
    }
}
