// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCacheHTTP

/// Proxy settings from the environment, mutated: a proxy URL is read or refused (never a
/// trap), a proxy read names a host and a port in range and reads back the same from its own
/// description, and a refusal never repeats a password; a `no_proxy` list never traps, and
/// the hosts and addresses it names match themselves.
@Suite(.stallLimit, .cpuBound) struct OriginProxiesFuzzTests {
    @Test func proxySettingsAreReadOrRefusedAndReadBack() throws {
        let outcomes = try Mutator.run("proxy") { input in
            let list = NoProxyList(input)
            for name in list.names where !list.matches(name) { return ("no_proxy", "\(name) does not match itself") }
            do {
                let proxies = try OriginProxies(environment: ["http_proxy": input])
                guard let server = proxies.http else { return ("unset", nil) }
                guard !server.host.isEmpty, (1...65_535).contains(server.port) else { return ("server", "\(server)") }
                guard let again = try? OriginProxies(environment: ["http_proxy": server.description]).http,
                    again.host == server.host, again.port == server.port, again.kind == server.kind
                else { return ("read back", "\(server) does not read back") }
                return ("read", nil)
            } catch let error as OriginProxyError {
                // The password in its place in the URL, or alone when it is too long to be a
                // word of the message's own (`ocks5`, found with `MEDIACACHE_FUZZ_SEED=6`, is
                // part of "socks5" in the list of schemes).
                if let password = URLComponents(string: input.contains("://") ? input : "http://" + input)?.password,
                    password.count > 3,
                    error.message.contains(":\(password)@") || (password.count >= 8 && error.message.contains(password))
                {
                    return ("leak", error.message)
                }
                return ("refused", nil)
            } catch {
                return ("threw", "\(error), not an OriginProxyError")
            }
        }
        try Mutator.expectVaried(outcomes, ["read", "refused"])
    }
}
