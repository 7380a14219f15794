// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
package import MediaCache

/// What an admin request carries in its query: the CLI writes it (``queryItems``), the
/// server reads it back, refusing a wrong one with 400 and what is wrong.
package protocol AdminQuery: Sendable {
    var queryItems: [URLQueryItem] { get }
    /// Reads it from a request's query.
    /// - Throws: ``ProxyRequestError`` (400) saying which item is wrong.
    init(reading query: AdminQueryItems) throws
}

/// A request's query items, as an ``AdminQuery`` reads them.
package struct AdminQueryItems: Sendable {
    let items: [URLQueryItem]

    package init(_ items: [URLQueryItem]) { self.items = items }

    /// The first value of `name`.
    package func value(_ name: String) -> String? { items.first { $0.name == name }?.value }

    /// Every value of `name`, in order.
    package func values(_ name: String) -> [String] { items.filter { $0.name == name }.compactMap(\.value) }

    /// `target=`: an absolute http or https URL with a host.
    func origin(_ text: String? = nil) throws -> URL {
        guard let text = text ?? value("target"), let url = URL(string: text),
            ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
        else {
            throw ProxyRequestError(
                status: .badRequest, "Give the origin URL as target=<percent-encoded http or https URL>.")
        }
        return url
    }

    /// `job=`: a job's ID, or a URL it pins.
    func job() throws -> String {
        guard let job = value("job"), !job.isEmpty else {
            throw ProxyRequestError(status: .badRequest, "Name the download job as job=<ID or URL>.")
        }
        return job
    }
}

/// No query.
package struct NoQuery: AdminQuery {
    package init() {}
    package init(reading query: AdminQueryItems) {}
    package var queryItems: [URLQueryItem] { [] }
}

/// `target=URL`.
package struct URLQuery: AdminQuery {
    package var target: URL
    package init(_ target: URL) { self.target = target }
    package init(reading query: AdminQueryItems) throws { target = try query.origin() }
    package var queryItems: [URLQueryItem] { [URLQueryItem(name: "target", value: target.absoluteString)] }
}

/// `lan-url=` a LAN URL of this server (not `url=`, which names an origin to fetch), as it was given (``LANRevocations``).
package struct LANURLQuery: AdminQuery {
    package var url: String
    package init(_ url: String) { self.url = url }
    package init(reading query: AdminQueryItems) throws {
        guard let url = query.value("lan-url"), let parsed = URL(string: url), parsed.scheme?.lowercased() == "http",
            url.utf8.count <= 16 << 10
        else {
            throw ProxyRequestError(
                status: .badRequest, "lan-url= takes a LAN URL this server gave (http://ADDRESS:PORT/…).")
        }
        self.url = url
    }
    package var queryItems: [URLQueryItem] { [URLQueryItem(name: "lan-url", value: url)] }

    /// The credential the URL carries, if it is one of the LAN listener's.
    var credential: String? {
        guard let url = URL(string: url) else { return nil }
        return try? ProxyTarget(readingURL: url).token
    }
}

/// `job=ID` (or a URL the job pins).
package struct JobQuery: AdminQuery {
    package var job: String
    package init(_ job: String) { self.job = job }
    package init(reading query: AdminQueryItems) throws { job = try query.job() }
    package var queryItems: [URLQueryItem] { [URLQueryItem(name: "job", value: job)] }
}

/// `target=URL` with what of it (``PrefetchRequest``: `range=`, `seconds=`, `variant=`, …).
package struct AssetQuery: AdminQuery {
    package var target: URL
    package var request: PrefetchRequest
    package init(_ target: URL, _ request: PrefetchRequest = PrefetchRequest()) {
        self.target = target
        self.request = request
    }
    package init(reading query: AdminQueryItems) throws {
        target = try query.origin()
        request = try PrefetchRequest(reading: query)
    }
    package var queryItems: [URLQueryItem] {
        [URLQueryItem(name: "target", value: target.absoluteString)] + request.queryItems
    }
}

/// A job's own rules: `window=HH:MM-HH:MM|any`, `network=any|unmetered|not-constrained`,
/// `rate=` bytes per second, `power=any|charging|not-low`; each as its text, read when the
/// server takes them.
package struct RulesText: Sendable, Equatable {
    package var window: String?
    package var network: String?
    package var rate: Int64?
    package var power: String?

    package init(window: String? = nil, network: String? = nil, rate: Int64? = nil, power: String? = nil) {
        (self.window, self.network, self.rate, self.power) = (window, network, rate, power)
    }

    init(reading query: AdminQueryItems) throws {
        if let text = query.value("rate") {
            guard let value = HLSPlaylist.decimal(Substring(text)) else {
                throw ProxyRequestError(status: .badRequest, "rate= takes bytes per second, not \(text.prefix(40)).")
            }
            rate = value
        }
        (window, network, power) = (query.value("window"), query.value("network"), query.value("power"))
        _ = try rules()
    }

    /// The rules they say.
    /// - Throws: ``ProxyRequestError`` (400) for a word that is not one.
    func rules() throws -> DownloadRules {
        do {
            return try DownloadRules.parse(window: window, network: network, rate: rate, power: power, option: "")
        } catch let error as CacheError {
            throw ProxyRequestError(status: .badRequest, error.message)
        }
    }

    var queryItems: [URLQueryItem] {
        [("window", window), ("network", network), ("rate", rate.map(String.init)), ("power", power)].compactMap {
            name, value in
            value.map { URLQueryItem(name: name, value: $0) }
        }
    }
}

/// A pin: the asset, the job's own rules, and whether it goes to the front (`first=1`).
package struct PinQuery: AdminQuery {
    package var asset: AssetQuery
    package var rules: RulesText
    package var first: Bool
    package init(_ asset: AssetQuery, rules: RulesText = RulesText(), first: Bool = false) {
        (self.asset, self.rules, self.first) = (asset, rules, first)
    }
    package init(reading query: AdminQueryItems) throws {
        asset = try AssetQuery(reading: query)
        rules = try RulesText(reading: query)
        first = query.value("first") == "1"
    }
    package var queryItems: [URLQueryItem] {
        asset.queryItems + rules.queryItems + (first ? [URLQueryItem(name: "first", value: "1")] : [])
    }
}

/// A job's new rules.
package struct RulesQuery: AdminQuery {
    package var job: JobQuery
    package var rules: RulesText
    package init(_ job: String, _ rules: RulesText) { (self.job, self.rules) = (JobQuery(job), rules) }
    package init(reading query: AdminQueryItems) throws {
        job = try JobQuery(reading: query)
        rules = try RulesText(reading: query)
    }
    package var queryItems: [URLQueryItem] { job.queryItems + rules.queryItems }
}

/// A job to the front of the queue (`to=first`, the default) or the back (`to=last`).
package struct MoveQuery: AdminQuery {
    package var job: JobQuery
    package var toFront: Bool
    package init(_ job: String, toFront: Bool) { (self.job, self.toFront) = (JobQuery(job), toFront) }
    package init(reading query: AdminQueryItems) throws {
        job = try JobQuery(reading: query)
        guard let toFront = ["first": true, "last": false, nil: true][query.value("to")] else {
            throw ProxyRequestError(status: .badRequest, "to= takes first or last.")
        }
        self.toFront = toFront
    }
    package var queryItems: [URLQueryItem] {
        job.queryItems + [URLQueryItem(name: "to", value: toFront ? "first" : "last")]
    }
}

/// `mode=auto|metered|unmetered`.
package struct NetworkQuery: AdminQuery {
    package var mode: DownloadRules.NetworkOverride
    package init(_ mode: DownloadRules.NetworkOverride) { self.mode = mode }
    package init(reading query: AdminQueryItems) throws {
        guard let mode = query.value("mode").flatMap(DownloadRules.NetworkOverride.init(rawValue:)) else {
            throw ProxyRequestError(status: .badRequest, "mode= takes auto, metered or unmetered.")
        }
        self.mode = mode
    }
    package var queryItems: [URLQueryItem] { [URLQueryItem(name: "mode", value: mode.rawValue)] }
}

/// `job=` and its new URL as `target=`.
package struct ReplaceURLQuery: AdminQuery {
    package var job: JobQuery
    package var target: URL
    package init(_ job: String, _ target: URL) { (self.job, self.target) = (JobQuery(job), target) }
    package init(reading query: AdminQueryItems) throws {
        job = try JobQuery(reading: query)
        target = try query.origin()
    }
    package var queryItems: [URLQueryItem] {
        job.queryItems + [URLQueryItem(name: "target", value: target.absoluteString)]
    }
}

/// The entries to verify (`target=`, each; none for every entry) and whether to fetch what
/// is damaged again (`repair=0` not to).
package struct VerifyQuery: AdminQuery {
    package var targets: [URL]
    package var repair: Bool
    package init(_ targets: [URL], repair: Bool) { (self.targets, self.repair) = (targets, repair) }
    package init(reading query: AdminQueryItems) throws {
        targets = try query.values("target").map { try query.origin($0) }
        switch query.value("repair") {
        case nil, "1": repair = true
        case "0": repair = false
        default: throw ProxyRequestError(status: .badRequest, "Give repair=1 or repair=0.")
        }
    }
    package var queryItems: [URLQueryItem] {
        targets.map { URLQueryItem(name: "target", value: $0.absoluteString) }
            + [URLQueryItem(name: "repair", value: repair ? "1" : "0")]
    }
}

/// What to export and where: `output=` an absolute path.
package struct ExportQuery: AdminQuery {
    package var asset: AssetQuery
    package var output: String
    /// Whether to write one playable file (`file=1`) rather than a folder.
    package var oneFile: Bool
    package init(_ asset: AssetQuery, output: String, oneFile: Bool = false) {
        (self.asset, self.output, self.oneFile) = (asset, output, oneFile)
    }
    package init(reading query: AdminQueryItems) throws {
        asset = try AssetQuery(reading: query)
        guard let output = query.value("output"), output.hasPrefix("/"), !output.contains("\u{0}") else {
            throw ProxyRequestError(status: .badRequest, "Give the destination as output=<absolute path>.")
        }
        self.output = output
        oneFile = query.value("file") == "1"
    }
    package var queryItems: [URLQueryItem] {
        asset.queryItems + [URLQueryItem(name: "output", value: output)]
            + (oneFile ? [URLQueryItem(name: "file", value: "1")] : [])
    }
}

/// The items to preload, in the order they will play: each `target=`, and `seconds=` of each
/// (5 by default).
package struct PreloadQuery: AdminQuery {
    package var targets: [URL]
    package var seconds: Double
    package init(_ targets: [URL], seconds: Double) { (self.targets, self.seconds) = (targets, seconds) }
    package init(reading query: AdminQueryItems) throws {
        let texts = query.values("target")
        guard !texts.isEmpty, texts.count <= PreloadItem.maximumQueued else {
            throw ProxyRequestError(
                status: .badRequest,
                "Give 1 to \(PreloadItem.maximumQueued) origin URLs as target=<percent-encoded http or https URL>, in the order they will play."
            )
        }
        seconds = try PrefetchRequest(reading: query).seconds ?? 5
        targets = try texts.map { text in
            do {
                return try query.origin(text)
            } catch {
                throw ProxyRequestError(
                    status: .badRequest,
                    "Each target must be a percent-encoded http or https URL, not \(text.prefix(100)).")
            }
        }
    }
    package var queryItems: [URLQueryItem] {
        targets.map { URLQueryItem(name: "target", value: $0.absoluteString) } + [
            URLQueryItem(name: "seconds", value: String(seconds))
        ]
    }
}

/// A recording's playlist: `job=`, and `track=` (0 the variant's, 1, … its renditions').
package struct TrackQuery: AdminQuery {
    package var job: JobQuery
    package var track: Int?
    package init(reading query: AdminQueryItems) throws {
        job = try JobQuery(reading: query)
        track = try query.value("track").map { text in
            guard let track = Int(text), track >= 0 else {
                throw ProxyRequestError(status: .badRequest, "Give the track as a number from 0.")
            }
            return track
        }
    }
    package var queryItems: [URLQueryItem] {
        job.queryItems + (track.map { [URLQueryItem(name: "track", value: String($0))] } ?? [])
    }
}
