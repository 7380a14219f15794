// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import NIOHTTP1
import Testing

@testable import MediaCache
@testable import MediaCacheHTTP
@testable import MediaCacheHTTPFields
@testable import MediaCacheProxy

/// Every parser of outside input, run on generated inputs (see ``Mutator``) and checked
/// against a reference model written another way: byte by byte, with numbers compared as
/// digit strings, so no arithmetic of the model can overflow either. A trap in a parser
/// ends the test process, so a passing run also says no input crashed it.
@Suite(.stallLimit, .cpuBound) struct ParserFuzzTests {
    @Test func hostsParseOnlyToNamesAndPortsInRangeAndRoundTrip() throws {
        let outcomes = try Mutator.run("host") { input in
            guard let host = HostAndPort(parsing: input) else { return ("refused", nil) }
            if host.name.isEmpty || host.name != host.name.lowercased() { return ("bad name", "\(host)") }
            if let port = host.port, !(0...65535).contains(port) { return ("bad port", "\(host)") }
            let text = (host.name.contains(":") ? "[\(host.name)]" : host.name) + (host.port.map { ":\($0)" } ?? "")
            guard HostAndPort(parsing: text) == host else {
                return ("round trip", "\(text) does not parse back to \(host)")
            }
            // What the Host check decides is a pure function of the parsed value.
            var configuration = ProxyConfiguration()
            configuration.serverNames = ["media.example"]
            let accepted = configuration.accepts(host, localPort: 8089)
            let expected = host.port == 8089 && ["127.0.0.1", "localhost", "::1", "media.example"].contains(host.name)
            guard accepted == expected else { return ("host check", "accepted \(accepted) for \(host)") }
            return (accepted ? "accepted" : "parsed", nil)
        }
        try Mutator.expectVaried(outcomes, ["accepted", "parsed", "refused"])
    }

    @Test func requestTargetsGiveOnlyHTTPURLsWithAHostAndAValidPort() throws {
        let outcomes = try Mutator.run("target") { input in
            let target = RequestTarget(input)
            guard let url = try? target.originURL() else { return ("refused", nil) }
            let text = url.absoluteString.lowercased()
            guard text.hasPrefix("http://") || text.hasPrefix("https://") else { return ("scheme", text) }
            guard let host = url.host, !host.isEmpty, let authority = HostAndPort(authorityOf: url) else {
                return ("host", text)
            }
            if let port = authority.port, !(1...65535).contains(port) { return ("port", text) }
            // A CMCD the player appended goes on to the origin as it wrote it, and only it.
            func cmcd(_ query: String?) -> [Substring] {
                (query ?? "").split(separator: "&").filter {
                    String($0.prefix { $0 != "=" }).removingPercentEncoding == "CMCD"
                }
            }
            let appended = cmcd(target.percentEncodedQuery)
            if target.pathForm == nil, !appended.isEmpty {
                let sent = cmcd(URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery)
                guard sent == appended else { return ("cmcd", "\(appended) became \(sent) in \(text)") }
            }
            // The parameters of a blocking reload the player added go on to the origin, each once.
            let reload = target.items.filter { HLSPlaylist.blockingReloadParameters.contains($0.name) }
            guard !reload.isEmpty else { return (appended.isEmpty ? "url" : "cmcd", nil) }
            let sent = (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).filter {
                HLSPlaylist.blockingReloadParameters.contains($0.name)
            }
            guard sent == reload, HLSPlaylist.isBlockingReload(url) else {
                return ("reload", "\(reload) became \(sent) in \(text)")
            }
            return ("reload", nil)
        }
        try Mutator.expectVaried(outcomes, ["url", "refused", "cmcd"])
    }

    @Test func redirectTargetsPassOnlyWhenHTTPAndOnTheAllowList() async throws {
        var configuration = HTTPOriginFetcher.Configuration()
        configuration.allowedHosts = ["127.0.0.1", "media.example"]
        let fetcher = HTTPOriginFetcher(configuration: configuration)
        let base = URL(string: "http://127.0.0.1:8080/music/a.mp3")!
        let outcomes = try Mutator.run("location") { input in
            guard let next = URL(string: input, relativeTo: base)?.absoluteURL else { return ("malformed", nil) }
            guard (try? fetcher.checkOrigin(next)) != nil else { return ("refused", nil) }
            let scheme = next.scheme?.lowercased()
            guard scheme == "http" || scheme == "https" else { return ("scheme", next.absoluteString) }
            guard let host = next.host?.lowercased(), ["127.0.0.1", "media.example"].contains(host) else {
                return ("allow-list", next.absoluteString)
            }
            guard let authority = HostAndPort(authorityOf: next),
                authority.port.map({ (1...65535).contains($0) }) ?? true
            else { return ("port", next.absoluteString) }
            return ("followed", nil)
        }
        try await fetcher.shutdown()
        try Mutator.expectVaried(outcomes, ["followed", "refused"])
    }

    /// An origin's response fields (`Name: value` joined by `|`): what is kept with an entry
    /// stays within its bounds, in order, without the fields the cache must not replay; the
    /// freshness computed from them stays within its bounds too.
    @Test func responseFieldsAreKeptWithinBoundsAndFreshnessStaysBounded() throws {
        let received = Date(timeIntervalSince1970: 1_800_000_000)
        // Whole header blocks: a tenth of the inputs (10,000 by default) keeps it near the others' time.
        let outcomes = try Mutator.run("response-fields", share: 10) { input in
            var headers = HTTPHeaders()
            for field in input.split(separator: "|") {
                guard let colon = field.firstIndex(of: ":") else { continue }
                // Field names as an HTTP parser lets them through: tokens.
                let name = field[..<colon].trimmingCharacters(in: .whitespaces)
                guard !name.isEmpty, name.utf8.allSatisfy(CacheControl.isTokenByte) else { continue }
                headers.add(name: name, value: field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            let kept = HTTPOriginFetcher.storedFields(headers)
            let bytes = kept.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
            guard kept.count <= HTTPOriginFetcher.maximumStoredFields,
                bytes <= HTTPOriginFetcher.maximumStoredFieldBytes
            else {
                return ("bounds", "\(kept.count) fields, \(bytes) bytes")
            }
            let named = Set(
                headers["connection"].flatMap { $0.split(separator: ",") }.map {
                    $0.trimmingCharacters(in: .whitespaces).lowercased()
                })
            if let bad = kept.first(where: {
                HTTPOriginFetcher.fieldsNotStored.contains($0.name.lowercased()) || named.contains($0.name.lowercased())
                    || $0.name.lowercased().hasPrefix("access-control-")
            }) {
                return ("not stored", "kept \(bad.name)")
            }
            let all = headers.map { ContentMetadata.HeaderField(name: $0.name, value: $0.value) }
            var rest = all[...]
            for field in kept {
                guard let index = rest.firstIndex(of: field) else { return ("order", "\(field.name) out of order") }
                rest = rest[(index + 1)...]
            }
            let freshness = HTTPOriginFetcher.freshness(
                headers, requested: received.addingTimeInterval(-1), received: received,
                heuristicFraction: 0.1, heuristicCap: .seconds(86400))
            let lifetime = freshness.freshUntil.timeIntervalSince(freshness.generatedAt)
            guard freshness.generatedAt <= received, lifetime >= 0,
                lifetime <= Double(CacheControl.maximumSeconds) || freshness.freshUntil == received
            else {
                return ("freshness", "generated \(freshness.generatedAt), fresh until \(freshness.freshUntil)")
            }
            // No max-age and not one valid Expires: stale at once (RFC 9111 §5.3).
            let directives = CacheControl(headers["cache-control"])
            if directives.maxAge == nil, headers.contains(name: "expires"),
                headers["expires"].count != 1 || HTTPDate.parse(headers["expires"][0]) == nil,
                freshness.freshUntil > received
            {
                return (
                    "expires", "an invalid Expires \(headers["expires"]) gave freshness until \(freshness.freshUntil)"
                )
            }
            return (kept.count < all.count ? "some dropped" : "all kept", nil)
        }
        try Mutator.expectVaried(outcomes, ["some dropped", "all kept"])
    }

    /// `Vary` (the first `|`-piece) against request fields (the others, `Name: value`): a
    /// stored answer matches the request it was fetched for, unless `Vary: *`; it stops
    /// matching when a field it names changes, whatever the letter case of the names; fields
    /// it does not name, and `Accept-Encoding`, never matter.
    @Test func varyMatchesExactlyTheFieldsItNames() throws {
        let outcomes = try Mutator.run("vary") { input in
            let pieces = input.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            var request: RequestHeaders = []
            for field in pieces.dropFirst() {
                guard let colon = field.firstIndex(of: ":") else { continue }
                let name = field[..<colon].trimmingCharacters(in: .whitespaces)
                guard !name.isEmpty, name.utf8.allSatisfy(CacheControl.isTokenByte) else { continue }
                request.append(
                    (name: name, value: field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            var stored = ContentMetadata(length: 10)
            stored.responseHeaders = [ContentMetadata.HeaderField(name: "Vary", value: pieces[0])]
            stored.recordVaryingFields(of: request)
            // The model: the names, split at commas, spaces and tabs trimmed, lower-cased
            // (by Unicode scalars, never by Characters: a combining mark after a comma is no space).
            let names = pieces[0].unicodeScalars.split(separator: ",").map { scalars -> String in
                var view = String.UnicodeScalarView(scalars)
                while let first = view.first, first == " " || first == "\t" { view.removeFirst() }
                while let last = view.last, last == " " || last == "\t" { view.removeLast() }
                return String(view).lowercased()
            }.filter { !$0.isEmpty }
            if names.contains("*") {
                return stored.matches(request: request) ? ("star", "Vary: * matched") : ("star", nil)
            }
            guard stored.matches(request: request) else {
                return ("self", "the request it was stored for does not match")
            }
            guard stored.matches(request: request + [(name: "X-Not-Named-\(names.count)", value: "z")]),
                stored.matches(
                    request: request.filter { $0.name.lowercased() != "accept-encoding" } + [
                        (name: "Accept-Encoding", value: "br")
                    ])
            else { return ("unnamed", "a field Vary does not name changed the match") }
            guard
                let named = names.first(where: {
                    $0 != "accept-encoding" && $0.utf8.allSatisfy(CacheControl.isTokenByte)
                })
            else { return ("no names", nil) }
            var changed = request.filter { $0.name.lowercased() != named }
            changed.append((name: named.uppercased(), value: "changed-\(request.count)"))
            guard !stored.matches(request: changed) else { return ("changed", "\(named) changed and still matched") }
            return ("varies", nil)
        }
        try Mutator.expectVaried(outcomes, ["varies", "star"])
    }

    /// A player's `If-None-Match` / `If-Match` value: `*`, or entity tags each `"…"` or
    /// `W/"…"` with no quote or control byte inside, at most 64, which written back as a
    /// list parse the same; anything else is refused (and the condition ignored).
    @Test func entityTagListsAreWellFormedAndRoundTrip() throws {
        let outcomes = try Mutator.run("etag") { input in
            guard let list = EntityTagList(parsing: input) else { return ("refused", nil) }
            if list.matchesAny { return list.tags.isEmpty ? ("any", nil) : ("any", "* with tags") }
            guard !list.tags.isEmpty, list.tags.count <= EntityTagList.maximumCount else {
                return ("tags", "\(list.tags.count) tags")
            }
            for tag in list.tags {
                // By bytes: a quote followed by a combining mark is one Character.
                let bytes = Array(tag.utf8)
                let opaque = bytes.starts(with: Array("W/".utf8)) ? bytes.dropFirst(2) : bytes[...]
                guard opaque.count >= 2, opaque.first == UInt8(ascii: "\""), opaque.last == UInt8(ascii: "\""),
                    !opaque.dropFirst().dropLast().contains(where: {
                        $0 == UInt8(ascii: "\"") || $0 < 0x21 || $0 == 0x7F
                    })
                else { return ("tags", "malformed \(tag.debugDescription)") }
            }
            guard EntityTagList(parsing: list.tags.joined(separator: ", ")) == list else {
                return ("tags", "round trip")
            }
            return ("tags", nil)
        }
        try Mutator.expectVaried(outcomes, ["tags", "refused"])
    }

    /// `Age` lines (`|` between them): the first member of the first line when it is a
    /// number, else ignored (RFC 9111 §5.1); never negative, never past the bound.
    @Test func ageTakesTheFirstMemberOrIsIgnored() throws {
        let outcomes = try Mutator.run("age") { input in
            let lines = input.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            let parsed = HTTPOriginFetcher.ageSeconds(lines)
            // The model: everything before the first comma of the first line, without spaces
            // and tabs around it, must be ASCII digits.
            let first =
                lines[0].split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init)
                ?? ""
            let trimmed = first.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            let isNumber =
                !trimmed.isEmpty && trimmed.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            switch (isNumber, parsed) {
            case (false, nil): return ("ignored", nil)
            case (true, let value?):
                guard (0...ByteRange.maximumOffset).contains(value), value == HTTPNumber.saturating(trimmed) else {
                    return ("number", "read \(value)")
                }
                return ("number", nil)
            default: return ("mismatch", "model \(isNumber), parsed \(parsed.map(String.init) ?? "nil")")
            }
        }
        try Mutator.expectVaried(outcomes, ["number", "ignored"])
    }
}
