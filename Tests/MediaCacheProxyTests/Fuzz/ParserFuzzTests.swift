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
@Suite(.cpuBound) struct ParserFuzzTests {
    // MARK: Reference models

    /// `1*DIGIT` as a digit string without leading zeros; `nil` when not all ASCII digits.
    static func digits(_ bytes: ArraySlice<UInt8>) -> String? {
        guard !bytes.isEmpty, bytes.allSatisfy({ (48...57).contains($0) }) else { return nil }
        let trimmed = bytes.drop { $0 == 48 }
        return trimmed.isEmpty ? "0" : String(decoding: trimmed, as: UTF8.self)
    }

    static let bound = String(ByteRange.maximumOffset)  // "1152921504606846976"

    /// Whether the digit string is below 2^60, compared as text.
    static func isBelowBound(_ digits: String) -> Bool {
        digits.count < bound.count || (digits.count == bound.count && digits < bound)
    }

    /// The model of `HTTPNumber.saturating`.
    static func saturating(_ bytes: ArraySlice<UInt8>) -> Int64? {
        guard let digits = digits(bytes) else { return nil }
        return isBelowBound(digits) ? Int64(digits)! : ByteRange.maximumOffset
    }

    /// The model of `HTTPNumber.strict`.
    static func strict(_ bytes: ArraySlice<UInt8>) -> Int64? {
        guard let digits = digits(bytes), isBelowBound(digits) else { return nil }
        return Int64(digits)!
    }

    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 32 || first == 9 { slice.removeFirst() }
        while let last = slice.last, last == 32 || last == 9 { slice.removeLast() }
        return slice
    }

    static func hasPrefixIgnoringASCIICase(_ bytes: ArraySlice<UInt8>, _ prefix: String) -> Bool {
        let p = Array(prefix.utf8)
        guard bytes.count >= p.count else { return false }
        return zip(bytes.prefix(p.count), p).allSatisfy { a, b in a == b || (a >= 65 && a <= 90 && a + 32 == b) }
    }

    /// The model of `RangeSpecifier.parse`: RFC 9110 §14.1.1's `bytes=` range set, client
    /// numbers saturating at the bound.
    static func modelRange(_ text: String) -> RangeSpecifier.Parsed {
        let value = trimmed(Array(text.utf8)[...])
        guard hasPrefixIgnoringASCIICase(value, "bytes=") else { return .invalid }
        var specs: [RangeSpecifier] = []
        for element in value.dropFirst(6).split(separator: 44, omittingEmptySubsequences: false) {  // ","
            let spec = trimmed(element)
            guard let dash = spec.firstIndex(of: 45) else { return .invalid }  // "-"
            let first = spec[spec.startIndex..<dash]
            let last = spec[(dash + 1)...]
            if first.isEmpty {
                guard let length = saturating(last) else { return .invalid }
                specs.append(.suffix(length: length))
            } else {
                guard let a = saturating(first) else { return .invalid }
                if last.isEmpty {
                    specs.append(.from(first: a, last: nil))
                } else {
                    guard let b = saturating(last), b >= a else { return .invalid }
                    specs.append(.from(first: a, last: b))
                }
            }
        }
        guard let first = specs.first else { return .invalid }
        return specs.count == 1 ? .single(first) : .multiple(first: first)
    }

    /// The model of `ContentRange(parsing:)`: `bytes a-b/total`, `bytes a-b/*`, `bytes */total`.
    static func modelContentRange(_ text: String) -> ContentRange? {
        let value = trimmed(Array(text.utf8)[...])
        guard hasPrefixIgnoringASCIICase(value, "bytes ") else { return nil }
        let rest = value.dropFirst(6)
        guard let slash = rest.firstIndex(of: 47) else { return nil }  // "/"
        let left = rest[rest.startIndex..<slash]
        let right = rest[(slash + 1)...]
        let total: Int64?
        if Array(right) == [42] {  // "*"
            total = nil
        } else {
            guard let t = strict(right) else { return nil }
            total = t
        }
        if Array(left) == [42] {
            guard let total else { return nil }
            return ContentRange(range: nil, totalLength: total)
        }
        guard let dash = left.firstIndex(of: 45), let a = strict(left[left.startIndex..<dash]), let b = strict(left[(dash + 1)...]), b >= a else { return nil }
        if let total, b >= total { return nil }
        return ContentRange(range: ByteRange(a, b + 1), totalLength: total)
    }

    // MARK: Targets

    @Test func httpNumbersMatchTheModel() throws {
        let outcomes = try Mutator.run("number") { input in
            let bytes = Array(input.utf8)[...]
            let (s, t) = (HTTPNumber.saturating(input), HTTPNumber.strict(input))
            if s != Self.saturating(bytes) { return ("mismatch", "saturating gave \(String(describing: s)), model \(String(describing: Self.saturating(bytes)))") }
            if t != Self.strict(bytes) { return ("mismatch", "strict gave \(String(describing: t)), model \(String(describing: Self.strict(bytes)))") }
            if let s, !(0...ByteRange.maximumOffset).contains(s) { return ("out of bounds", "\(s)") }
            return (t != nil ? "number" : s != nil ? "saturated" : "refused", nil)
        }
        try Self.expectVaried(outcomes, ["number", "saturated", "refused"])
    }

    @Test func rangeHeadersMatchTheModelAndResolveWithinTheResource() throws {
        let lengths: [Int64] = [0, 1, 2, 1000, 1_500_000, ByteRange.maximumOffset - 1]
        let outcomes = try Mutator.run("range") { input in
            let parsed = RangeSpecifier.parse(input)
            let model = Self.modelRange(input)
            guard parsed == model else { return ("mismatch", "parsed \(parsed), model \(model)") }
            let specifier: RangeSpecifier
            switch parsed {
            case .invalid: return ("invalid", nil)
            case .single(let one): specifier = one
            case .multiple(let first): specifier = first
            }
            for length in lengths {
                guard let range = specifier.resolve(length: length) else { continue }
                // Within the resource, not empty, and what RFC 9110 §14.1.2 says it selects.
                guard range.lowerBound >= 0, range.upperBound <= length, !range.isEmpty else {
                    return ("bad resolve", "\(specifier) on \(length) gave \(range)")
                }
                switch specifier {
                case .from(let first, let last):
                    if range.lowerBound != first || range.upperBound != min(length, (last ?? length - 1) &+ 1) { return ("bad resolve", "\(range)") }
                case .suffix(let suffix):
                    if range.upperBound != length || range.length != min(suffix, length) { return ("bad resolve", "\(range)") }
                }
            }
            if case .multiple = parsed { return ("several", nil) }
            return ("one", nil)
        }
        try Self.expectVaried(outcomes, ["one", "invalid"])
    }

    @Test func contentRangesMatchTheModel() throws {
        let outcomes = try Mutator.run("content-range") { input in
            let parsed = ContentRange(parsing: input)
            let model = Self.modelContentRange(input)
            guard parsed == model else { return ("mismatch", "parsed \(String(describing: parsed)), model \(String(describing: model))") }
            if let parsed, ContentRange(parsing: parsed.headerValue) != parsed {
                return ("round trip", "\(parsed.headerValue) does not parse back")
            }
            return (parsed == nil ? "invalid" : parsed?.range == nil ? "unsatisfied" : "range", nil)
        }
        try Self.expectVaried(outcomes, ["range", "invalid"])
    }

    @Test func hostsParseOnlyToNamesAndPortsInRangeAndRoundTrip() throws {
        let outcomes = try Mutator.run("host") { input in
            guard let host = HostAndPort(parsing: input) else { return ("refused", nil) }
            if host.name.isEmpty || host.name != host.name.lowercased() { return ("bad name", "\(host)") }
            if let port = host.port, !(0...65535).contains(port) { return ("bad port", "\(host)") }
            let text = (host.name.contains(":") ? "[\(host.name)]" : host.name) + (host.port.map { ":\($0)" } ?? "")
            guard HostAndPort(parsing: text) == host else { return ("round trip", "\(text) does not parse back to \(host)") }
            // What the Host check decides is a pure function of the parsed value.
            var configuration = ProxyConfiguration()
            configuration.serverNames = ["media.example"]
            let accepted = configuration.accepts(host, localPort: 8089)
            let expected = host.port == 8089 && ["127.0.0.1", "localhost", "::1", "media.example"].contains(host.name)
            guard accepted == expected else { return ("host check", "accepted \(accepted) for \(host)") }
            return (accepted ? "accepted" : "parsed", nil)
        }
        try Self.expectVaried(outcomes, ["accepted", "parsed", "refused"])
    }

    @Test func requestTargetsGiveOnlyHTTPURLsWithAHostAndAValidPort() throws {
        let outcomes = try Mutator.run("target") { input in
            let target = RequestTarget(input)
            guard let url = try? target.originURL() else { return ("refused", nil) }
            let text = url.absoluteString.lowercased()
            guard text.hasPrefix("http://") || text.hasPrefix("https://") else { return ("scheme", text) }
            guard let host = url.host, !host.isEmpty, let authority = HostAndPort(authorityOf: url) else { return ("host", text) }
            if let port = authority.port, !(1...65535).contains(port) { return ("port", text) }
            // The parameters of a blocking reload the player added go on to the origin, each once.
            let reload = target.items.filter { HLSPlaylist.blockingReloadParameters.contains($0.name) }
            guard !reload.isEmpty else { return ("url", nil) }
            let sent = (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).filter { HLSPlaylist.blockingReloadParameters.contains($0.name) }
            guard sent == reload, HLSPlaylist.isBlockingReload(url) else { return ("reload", "\(reload) became \(sent) in \(text)") }
            return ("reload", nil)
        }
        try Self.expectVaried(outcomes, ["url", "refused"])
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
            guard let host = next.host?.lowercased(), ["127.0.0.1", "media.example"].contains(host) else { return ("allow-list", next.absoluteString) }
            guard let authority = HostAndPort(authorityOf: next), authority.port.map({ (1...65535).contains($0) }) ?? true else { return ("port", next.absoluteString) }
            return ("followed", nil)
        }
        try await fetcher.shutdown()
        try Self.expectVaried(outcomes, ["followed", "refused"])
    }

    @Test func cacheControlDirectivesAreTokensWithBoundedNumbersAndRoundTrip() throws {
        let outcomes = try Mutator.run("cache-control") { input in
            let parsed = CacheControl([input])
            for (name, _) in parsed.directives where name.isEmpty || name != name.lowercased() || !name.utf8.allSatisfy(CacheControl.isTokenByte) {
                return ("bad name", "\(parsed.directives)")
            }
            if let maxAge = parsed.maxAge, !(0...CacheControl.maximumSeconds).contains(maxAge) { return ("bad number", "\(maxAge)") }
            if parsed.noStore != parsed.directives.contains(where: { $0.name == "no-store" }) { return ("no-store", "\(parsed.directives)") }
            // Written back out (tokens bare, anything else quoted), the directives parse the same.
            let text = parsed.directives.map { name, value -> String in
                guard let value else { return name }
                if !value.isEmpty, value.utf8.allSatisfy(CacheControl.isTokenByte) { return "\(name)=\(value)" }
                // Escaped byte by byte: a quote followed by a combining mark is one Character,
                // which a Character-based replacement does not see (found at 1,000,000 inputs).
                let escaped = value.utf8.flatMap { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") ? [UInt8(ascii: "\\"), $0] : [$0] }
                return "\(name)=\"" + String(decoding: escaped, as: UTF8.self) + "\""
            }.joined(separator: ", ")
            guard CacheControl([text]) == parsed else { return ("round trip", "\(text) gave \(CacheControl([text]).directives), not \(parsed.directives)") }
            return (parsed.directives.isEmpty ? "none" : parsed.noStore ? "no-store" : "directives", nil)
        }
        try Self.expectVaried(outcomes, ["directives", "no-store", "none"])
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
            guard kept.count <= HTTPOriginFetcher.maximumStoredFields, bytes <= HTTPOriginFetcher.maximumStoredFieldBytes else {
                return ("bounds", "\(kept.count) fields, \(bytes) bytes")
            }
            let named = Set(headers["connection"].flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
            if let bad = kept.first(where: {
                HTTPOriginFetcher.fieldsNotStored.contains($0.name.lowercased()) || named.contains($0.name.lowercased())
                    || $0.name.lowercased().hasPrefix("access-control-")
            }) {
                return ("not stored", "kept \(bad.name)")
            }
            let all = headers.map { HeaderField(name: $0.name, value: $0.value) }
            var rest = all[...]
            for field in kept {
                guard let index = rest.firstIndex(of: field) else { return ("order", "\(field.name) out of order") }
                rest = rest[(index + 1)...]
            }
            let freshness = HTTPOriginFetcher.freshness(
                headers, requested: received.addingTimeInterval(-1), received: received,
                heuristicFraction: 0.1, heuristicCap: .seconds(86400))
            let lifetime = freshness.freshUntil.timeIntervalSince(freshness.generatedAt)
            guard freshness.generatedAt <= received, lifetime >= 0, lifetime <= Double(CacheControl.maximumSeconds) || freshness.freshUntil == received else {
                return ("freshness", "generated \(freshness.generatedAt), fresh until \(freshness.freshUntil)")
            }
            // No max-age and not one valid Expires: stale at once (RFC 9111 §5.3).
            let directives = CacheControl(headers["cache-control"])
            if directives.maxAge == nil, headers.contains(name: "expires"),
                headers["expires"].count != 1 || HTTPDate.parse(headers["expires"][0]) == nil, freshness.freshUntil > received
            {
                return ("expires", "an invalid Expires \(headers["expires"]) gave freshness until \(freshness.freshUntil)")
            }
            return (kept.count < all.count ? "some dropped" : "all kept", nil)
        }
        try Self.expectVaried(outcomes, ["some dropped", "all kept"])
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
                request.append((name: name, value: field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            var stored = ContentMetadata(length: 10)
            stored.responseHeaders = [HeaderField(name: "Vary", value: pieces[0])]
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
            guard stored.matches(request: request) else { return ("self", "the request it was stored for does not match") }
            guard stored.matches(request: request + [(name: "X-Not-Named-\(names.count)", value: "z")]),
                stored.matches(request: request.filter { $0.name.lowercased() != "accept-encoding" } + [(name: "Accept-Encoding", value: "br")])
            else { return ("unnamed", "a field Vary does not name changed the match") }
            guard let named = names.first(where: { $0 != "accept-encoding" && $0.utf8.allSatisfy(CacheControl.isTokenByte) }) else { return ("no names", nil) }
            var changed = request.filter { $0.name.lowercased() != named }
            changed.append((name: named.uppercased(), value: "changed-\(request.count)"))
            guard !stored.matches(request: changed) else { return ("changed", "\(named) changed and still matched") }
            return ("varies", nil)
        }
        try Self.expectVaried(outcomes, ["varies", "star"])
    }

    /// A player's `If-None-Match` / `If-Match` value: `*`, or entity tags each `"…"` or
    /// `W/"…"` with no quote or control byte inside, at most 64, which written back as a
    /// list parse the same; anything else is refused (and the condition ignored).
    @Test func entityTagListsAreWellFormedAndRoundTrip() throws {
        let outcomes = try Mutator.run("etag") { input in
            guard let list = EntityTagList(parsing: input) else { return ("refused", nil) }
            if list.matchesAny { return list.tags.isEmpty ? ("any", nil) : ("any", "* with tags") }
            guard !list.tags.isEmpty, list.tags.count <= EntityTagList.maximumCount else { return ("tags", "\(list.tags.count) tags") }
            for tag in list.tags {
                // By bytes: a quote followed by a combining mark is one Character.
                let bytes = Array(tag.utf8)
                let opaque = bytes.starts(with: Array("W/".utf8)) ? bytes.dropFirst(2) : bytes[...]
                guard opaque.count >= 2, opaque.first == UInt8(ascii: "\""), opaque.last == UInt8(ascii: "\""),
                    !opaque.dropFirst().dropLast().contains(where: { $0 == UInt8(ascii: "\"") || $0 < 0x21 || $0 == 0x7F })
                else { return ("tags", "malformed \(tag.debugDescription)") }
            }
            guard EntityTagList(parsing: list.tags.joined(separator: ", ")) == list else { return ("tags", "round trip") }
            return ("tags", nil)
        }
        try Self.expectVaried(outcomes, ["tags", "refused"])
    }

    /// `Age` lines (`|` between them): the first member of the first line when it is a
    /// number, else ignored (RFC 9111 §5.1); never negative, never past the bound.
    @Test func ageTakesTheFirstMemberOrIsIgnored() throws {
        let outcomes = try Mutator.run("age") { input in
            let lines = input.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            let parsed = HTTPOriginFetcher.ageSeconds(lines)
            // The model: everything before the first comma of the first line, without spaces
            // and tabs around it, must be ASCII digits.
            let first = lines[0].split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let trimmed = first.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            let isNumber = !trimmed.isEmpty && trimmed.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            switch (isNumber, parsed) {
            case (false, nil): return ("ignored", nil)
            case (true, let value?):
                guard (0...ByteRange.maximumOffset).contains(value), value == HTTPNumber.saturating(trimmed) else { return ("number", "read \(value)") }
                return ("number", nil)
            default: return ("mismatch", "model \(isNumber), parsed \(parsed.map(String.init) ?? "nil")")
            }
        }
        try Self.expectVaried(outcomes, ["number", "ignored"])
    }
}
