// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// What the cache learned from the fresh URLs it was given for expired ones, and when it may
/// ask again. Pure bookkeeping, no I/O, no clock of its own (``URLRenewal`` holds it under a
/// lock).
///
/// A fresh URL teaches two things: the URL it replaces (asked for it, the cache asks the fresh
/// one), and which signature parameters changed value (`token=A` became `token=B`). The second
/// renews every other URL signed with the same values at once: the segments of a stream whose
/// playlists carry the master's token need no renewal of their own, so the refresh hook is
/// asked once per expiry, not once per segment.
struct URLRenewals: Sendable {
    /// The most URLs and parameter values remembered; the oldest go first.
    static let limit = 256

    /// For a parameter as the expired URL wrote it, its value in the fresh one.
    private(set) var renewedValues: [SignedURL.Parameter: String] = [:]
    private var valueOrder: [SignedURL.Parameter] = []
    /// For a URL's text, the fresh URL given for it.
    private(set) var replacedURLs: [String: URL] = [:]
    private var urlOrder: [String] = []
    /// Until when a signature (``signature(of:)``) is not renewed again: its renewal failed, or
    /// the URL it gave was refused too.
    private var resting: [String: Date] = [:]

    /// `url` as the cache should ask for it now: the fresh URL given for it, or itself, with
    /// every renewed parameter value replaced by its latest.
    func current(_ url: URL) -> URL {
        let replaced = replacedURLs[url.absoluteString] ?? url
        guard !renewedValues.isEmpty, let query = replaced.query(percentEncoded: true), !query.isEmpty else {
            return replaced
        }
        var changed = false
        let items = SignedURL.parameters(of: replaced).map { parameter -> String in
            guard let value = renewedValues[parameter] else { return "\(parameter.name)=\(parameter.value)" }
            changed = true
            return "\(parameter.name)=\(value)"
        }
        guard changed, var components = URLComponents(url: replaced, resolvingAgainstBaseURL: false) else {
            return replaced
        }
        components.percentEncodedQuery = items.joined(separator: "&")
        return components.url ?? replaced
    }

    /// What names the signature of `url`: its signature parameters, or the URL itself when it
    /// has none (a URL signed in its path is renewed for itself alone).
    static func signature(of url: URL) -> String {
        let credentials = SignedURL.credentials(of: url)
        guard !credentials.isEmpty else { return url.absoluteString }
        return credentials.map { "\($0.name)=\($0.value)" }.sorted().joined(separator: "&")
    }

    /// Whether the signature of `url` may be renewed at `now`.
    func mayRenew(_ url: URL, now: Date) -> Bool {
        resting[Self.signature(of: url)].map { now >= $0 } ?? true
    }

    /// Notes that renewing `url`'s signature failed (or gave a URL refused too): not again
    /// until `until`.
    mutating func rest(_ url: URL, until: Date) {
        if resting.count >= Self.limit { resting = resting.filter { $0.value > until.addingTimeInterval(-86_400) } }
        if resting.count >= Self.limit { resting.removeAll() }
        resting[Self.signature(of: url)] = until
    }

    /// Learns that `fresh` replaces `expired` (the URL as the cache asked for it, ``current(_:)``)
    /// and `original` (the URL as the player gave it).
    mutating func learn(original: URL, expired: URL, fresh: URL) {
        remember(fresh, for: original.absoluteString)
        if expired != original { remember(fresh, for: expired.absoluteString) }
        let freshValues = Dictionary(
            SignedURL.parameters(of: fresh).map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        for parameter in SignedURL.credentials(of: expired) {
            guard let value = freshValues[parameter.name], value != parameter.value else { continue }
            // Values renewed before to the expired one now go to the fresh one (a chain of
            // renewals collapses into one step).
            for (older, newer) in renewedValues where older.name == parameter.name && newer == parameter.value {
                renewedValues[older] = value
            }
            if renewedValues.updateValue(value, forKey: parameter) == nil { valueOrder.append(parameter) }
        }
        while valueOrder.count > Self.limit { renewedValues[valueOrder.removeFirst()] = nil }
    }

    private mutating func remember(_ fresh: URL, for text: String) {
        if replacedURLs.updateValue(fresh, forKey: text) == nil { urlOrder.append(text) }
        while urlOrder.count > Self.limit { replacedURLs[urlOrder.removeFirst()] = nil }
    }
}
