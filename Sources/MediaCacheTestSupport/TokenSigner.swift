// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
package import MediaCache
import Synchronization

/// The signing service of a test origin whose URLs carry short-lived tokens: a signed URL has
/// `token=…` (and `exp=…`, Unix seconds, when the signer states expiries) in its query. A
/// resource with ``TestOrigin/Faults/signer`` answers `403` to a token the signer did not issue
/// or whose lifetime has passed on the signer's clock, and cuts a body whose token expires while
/// it is sent (the next request of the play finds the token expired).
public final class TokenSigner: Sendable {
    /// How long a token is good for, in seconds.
    public let lifetime: TimeInterval
    /// Whether signed URLs state their expiry (`exp=`), so a cache can see it has passed.
    public let statesExpiry: Bool
    let clock: any WallClock
    private let state = Mutex<(issued: [String: Date], asked: [String], expired: Set<String>)>(([:], [], []))

    package init(lifetime: TimeInterval, statesExpiry: Bool, clock: any WallClock) {
        (self.lifetime, self.statesExpiry, self.clock) = (lifetime, statesExpiry, clock)
    }

    /// The query of a fresh signature (`token=…&exp=…`).
    public func freshQuery() -> String {
        let expiry = clock.now.addingTimeInterval(lifetime)
        let token = state.withLock { state in
            let token = "t\(state.issued.count + 1)x\(Int64(expiry.timeIntervalSince1970))"
            state.issued[token] = expiry
            return token
        }
        return statesExpiry ? "token=\(token)&exp=\(Int64(expiry.timeIntervalSince1970))" : "token=\(token)"
    }

    /// `url` with a fresh signature in place of its own (its other parameters kept), as the
    /// signing service gives it; counted in ``renewalsAsked``.
    public func renew(_ url: String) -> String {
        state.withLock { $0.asked.append(url) }
        let unsigned = Self.unsigned(url)
        return unsigned + (unsigned.contains("?") ? "&" : "?") + freshQuery()
    }

    /// `url` without its `token` and `exp` parameters (a `?` left when others remain).
    static func unsigned(_ url: String) -> String {
        guard let mark = url.firstIndex(of: "?") else { return url }
        let kept = url[url.index(after: mark)...].split(separator: "&").filter {
            !$0.hasPrefix("token=") && !$0.hasPrefix("exp=")
        }
        return String(url[..<mark]) + (kept.isEmpty ? "" : "?" + kept.joined(separator: "&"))
    }

    /// The URLs the signing service was asked to renew, in order.
    public var renewalsAsked: [String] { state.withLock { $0.asked } }

    /// The tokens this signer issued that requests presented after they expired: how many
    /// expiries a play met.
    public var expiredTokensPresented: Set<String> { state.withLock { $0.expired } }

    /// Whether a request with `query` carries a token good now; an expired one presented is noted.
    func accepts(query: String?, counting: Bool = true) -> Bool {
        let token = (query ?? "").split(separator: "&").first { $0.hasPrefix("token=") }.map { String($0.dropFirst(6)) }
        let now = clock.now
        return state.withLock { state in
            guard let token, let expiry = state.issued[token], now < expiry else {
                if counting, let token, state.issued[token] != nil { state.expired.insert(token) }
                return false
            }
            return true
        }
    }
}
