// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheHTTPFields
import NIOHTTP1
import Synchronization

/// The last request one connection had checked, so that the next one differing only in its
/// `Range` is not checked again: a player on a kept-alive connection asks for one URL many
/// times, and the checks (the target parsed, the origin allowed, the token, the `Host`, the
/// site, the fields sorted) were a large part of answering a cached range (docs/benchmarks.md,
/// the instruction counts). Otherwise it looks
/// among the last requests any connection had checked (``Shared``): a player that opens a
/// connection per seek (ffmpeg, mpv) repeats its request on each.
///
/// ``ProxyRouter/check(_:localPort:)`` is a function of the method, target, version, fields
/// and local port (and of the configuration, which does not change): with the same ones it
/// gives the same answer, so only the range is read again. Only a request that passed is
/// remembered; anything else is checked whole.
struct RepeatedRequestCheck {
    /// Held in an object: looking at it copies one reference, not a request and its result.
    final class Remembered: Sendable {
        let head: HTTPRequestHead
        let localPort: Int
        let checked: ProxyRouter.CheckedRequest

        init(_ head: HTTPRequestHead, _ localPort: Int, _ checked: ProxyRouter.CheckedRequest) {
            (self.head, self.localPort, self.checked) = (head, localPort, checked)
        }

        func matches(_ other: HTTPRequestHead, _ port: Int) -> Bool {
            port == localPort && other.method == head.method && other.version == head.version && other.uri == head.uri
                && RepeatedRequestCheck.sameFieldsApartFromRange(head.headers, other.headers)
        }
    }

    /// The last requests that passed, across connections, newest last.
    final class Shared: Sendable {
        private let recent = Mutex<[Remembered]>([])
        static let limit = 16

        func find(_ head: HTTPRequestHead, _ localPort: Int) -> Remembered? {
            recent.withLock { recent in recent.last { $0.matches(head, localPort) } }
        }

        func add(_ remembered: Remembered) {
            recent.withLock { recent in
                if recent.count >= Self.limit { recent.removeFirst() }
                recent.append(remembered)
            }
        }
    }

    private var last: Remembered?

    mutating func check(_ head: HTTPRequestHead, localPort: Int, router: ProxyRouter) throws -> ProxyRouter.Checked {
        if let last, last.matches(head, localPort) { return .request(try Self.reused(last, for: head, router: router)) }
        if let shared = router.recentChecks.find(head, localPort) {
            last = shared
            return .request(try Self.reused(shared, for: head, router: router))
        }
        last = nil
        let checked = try router.check(head, localPort: localPort)
        if case .request(let request) = checked {
            let remembered = Remembered(head, localPort, request)
            last = remembered
            router.recentChecks.add(remembered)
        }
        return checked
    }

    /// What `remembered` found, with the range `head` asks for.
    private static func reused(_ remembered: Remembered, for head: HTTPRequestHead, router: ProxyRouter) throws
        -> ProxyRouter.CheckedRequest
    {
        var checked = remembered.checked
        // A LAN URL minted to expire may expire between two requests.
        if let until = checked.until, ProxyRouter.now() >= until { throw ProxyRouter.expired(at: until) }
        try router.checkRevoked(checked.credential)
        (checked.asked.specifier, checked.asked.firstByte, checked.asked.length) = try ProxyRouter.rangeParts(of: head)
        return checked
    }

    /// Whether `a` and `b` hold the same fields, spelled the same, in the same order, once
    /// each one's `Range` fields are left out.
    static func sameFieldsApartFromRange(_ a: HTTPHeaders, _ b: HTTPHeaders) -> Bool {
        var (left, right) = (a.makeIterator(), b.makeIterator())
        func next(_ fields: inout HTTPHeaders.Iterator) -> (name: String, value: String)? {
            while let field = fields.next() {
                if field.name.utf8.count != 5 || !FieldName.matches(field.name, "range") { return field }
            }
            return nil
        }
        while true {
            switch (next(&left), next(&right)) {
            case (nil, nil): return true
            case (let x?, let y?) where x.name == y.name && x.value == y.value: continue
            default: return false
            }
        }
    }
}
