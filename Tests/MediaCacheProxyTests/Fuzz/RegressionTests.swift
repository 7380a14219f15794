// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheTestSupport
import Testing

@testable import MediaCache
@testable import MediaCacheProxy

/// Inputs that once crashed or fooled a parser, each kept as its own test.
@Suite(.stallLimit) struct ParserRegressionTests {
    /// `Vary: pt-Language, \u{301}*` (found by `varyMatchesExactlyTheFieldsItNames` at its
    /// first 100,000 inputs): trimmed by Characters, the space and the combining mark after the
    /// comma were one whitespace Character and went together, leaving `*`; the answer then
    /// never matched the request it was stored for. Members are now trimmed by bytes.
    @Test func aCombiningMarkAfterACommaInVaryIsNoSpace() {
        var stored = ContentMetadata(length: 10)
        stored.responseHeaders = [ContentMetadata.HeaderField(name: "Vary", value: "pt-Language, \u{301}*")]
        stored.recordVaryingFields(of: [(name: "Accept-Language", value: "de")])
        #expect(stored.varyingFieldNames == ["pt-language", "\u{301}*"])
        #expect(stored.matches(request: [(name: "Accept-Language", value: "de")]))
    }

    /// A quote followed by a combining mark is one Character: the entity-tag model first
    /// checked `hasPrefix("\"")` and called `"\u{301}v1"` malformed (the parser, on bytes, was right).
    @Test func aCombiningMarkAfterAnEntityTagsQuoteStaysInside() {
        #expect(EntityTagList(parsing: "W/\"\u{301}v1\"")?.tags == ["W/\"\u{301}v1\""])
        #expect(EntityTagList(parsing: "\"a\", \"\u{301}b,,\", W/\"c\"")?.tags.count == 3)
    }

    /// `h@ttps://a.example/x?q=a+b&b&token=t#frag` (found by `keyRulesDropOnlyTheIgnoredParametersAndIgnoreTheirValues`
    /// at its 128th input): the first key rule rebuilt the URL with URLComponents, which read
    /// `h@ttps:` as a path and encoded its colon, so more than the query changed. The rule now
    /// cuts the query out of the URL's text and leaves the rest as it is.
    @Test func aKeyRuleChangesOnlyTheQueryOfAnOddURL() throws {
        let rule = try #require(CacheKeyRule.preset(named: "token"))
        let url = try #require(URL(string: "h@ttps://a.example/x?q=a+b&b&token=t#frag"))
        #expect(rule.keyURL(for: url).absoluteString == "h@ttps://a.example/x?q=a+b&b#frag")
        let signed = try #require(URL(string: "https://a.example/x#f?token=in-the-fragment"))
        #expect(rule.keyURL(for: signed) == signed)
    }

    /// `<dash:MPD><dash:BaseURL><![CDATA[http:cdn.example/a/]]></dash:BaseURL></dash:MPD>` (found
    /// by `manifestsParseOrAreRefusedAndRewriteOnlyURLs` at its 60th input): a base for the whole
    /// manifest was added beside one that could not be resolved, so players used the guess. One
    /// is added now only where the manifest has no base at all.
    @Test func anUnreadableBaseIsNotJoinedByAGuess() throws {
        let text = "<MPD><BaseURL>http:cdn.example/a/</BaseURL><Period/></MPD>"
        let out = try DASHManifest(parsing: Array(text.utf8)).rewritten(base: URL(string: "https://o.example/m.mpd")!) {
            "P[\($0)]"
        }
        #expect(out == text)
    }

    /// A `BaseURL` with elements inside (found by the same target at its 16,552nd input, where
    /// a broken `<![CDAT` declaration swallowed a tag): its whole content was taken for a URL
    /// and replaced, elements and all. Only an element with text alone holds a URL.
    @Test func aBaseWithElementsInsideIsNotAURL() throws {
        let text = "<MPD><BaseURL>a/<BaseURL>b/</BaseURL></BaseURL></MPD>"
        let out = try DASHManifest(parsing: Array(text.utf8)).rewritten(base: URL(string: "https://o.example/m.mpd")!) {
            "P[\($0)]"
        }
        #expect(out == "<MPD><BaseURL>a/<BaseURL>P[https://o.example/b/]</BaseURL></BaseURL></MPD>")
    }

    /// The first saturating parser multiplied values up to 2^60 by ten: 20 digits trapped
    /// (found by the hostile-client suite's `bytes=9223372036854775807-`).
    @Test func twentyDigitsSaturateInsteadOfOverflowing() {
        #expect(HTTPNumber.saturating("9223372036854775807") == ByteRange.maximumOffset)
        #expect(HTTPNumber.saturating("99999999999999999999999999999999") == ByteRange.maximumOffset)
        #expect(HTTPNumber.strict("9223372036854775807") == nil)
        #expect(
            RangeSpecifier.parse("bytes=9223372036854775807-")
                == .single(.from(first: ByteRange.maximumOffset, last: nil)))
        #expect(RangeSpecifier.parse("bytes=0-9223372036854775807").resolved(length: 10) == ByteRange(0, 10))
    }

    /// `(last ?? length - 1) + 1` trapped for a last position of `Int64.max` (the issue's
    /// first report).
    @Test func aLastPositionAtInt64MaxMeansToTheEnd() {
        #expect(RangeSpecifier.from(first: 0, last: .max).resolve(length: 1000) == ByteRange(0, 1000))
        #expect(RangeSpecifier.suffix(length: .max).resolve(length: 1000) == ByteRange(0, 1000))
    }

    /// `bytes 0-9223372036854775807/*` from an origin trapped on `last + 1`.
    @Test func anOriginContentRangeAtInt64MaxIsRefused() {
        #expect(ContentRange(parsing: "bytes 0-9223372036854775807/*") == nil)
        #expect(ContentRange(parsing: "bytes 0-999/9999999999999999999999999") == nil)
    }

    /// Foundation's `URL` accepts a 20-digit port (found by the hostile-client suite); the
    /// authority check refuses it, at the door and on a redirect.
    @Test func aPortPast65535IsRefused() async throws {
        let url = try #require(URL(string: "http://127.0.0.1:99999999999999999999/a.mp3"))
        #expect(HostAndPort(authorityOf: url) == nil)
        #expect(throws: ProxyRequestError.self) {
            try RequestTarget("/?url=http%3A%2F%2F127.0.0.1%3A99999999999999999999%2Fa").originURL()
        }
        let fetcher = HTTPOriginFetcher()
        #expect(throws: CacheError.self) { try fetcher.checkOrigin(url) }
        try await fetcher.shutdown()
    }

    /// A `%` not followed by two hex digits stays as it came (RFC 3986 §2.1): the decoder
    /// once read the two characters with `UInt8(_:radix:)`, which takes a sign, so `%+f` was
    /// the byte 0x0F and `%-0` a NUL.
    @Test func aPercentSignWithoutTwoHexDigitsStaysAsItCame() {
        let items = RequestTarget.items(of: "a=%+f&b=%2B%zz&c=%-0&d=%4&e=%e9%41")
        #expect(items.map(\.name) == ["a", "b", "c", "d", "e"])
        #expect(items.map(\.value) == ["%+f", "+%zz", "%-0", "%4", nil], "%e9 alone is not UTF-8")
        #expect(RequestTarget.items(of: "url=http%3A%2F%2Fh%2Fa%C3%A9&&x").map(\.value) == ["http://h/aé", nil])
    }

    /// RFC 9110 §5.6.7's example, in the three forms a recipient must accept.
    @Test func httpDatesInAllThreeForms() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == 784_111_777)
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(
            HTTPDate.parse("Wed, 29 Feb 1900 12:00:00 GMT") == nil
                && HTTPDate.parse("Tue, 29 Feb 2000 12:00:00 GMT") != nil)
        #expect(
            HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC") == nil
                && HTTPDate.parse("Sat, 31 Apr 2026 00:00:00 GMT") == nil)
    }

    /// Parts of a date are separated by one space: a doubled space or a tab makes it invalid
    /// (an `Expires` like that is already expired), asctime's padding before a one-digit day
    /// aside; a lower-case `gmt` is accepted.
    @Test func aDateWithADoubledSpaceIsNotADate() {
        #expect(HTTPDate.parse("Sun,  06 Nov 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994  08:49:37 GMT") == nil)
        #expect(
            HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT ") == nil
                && HTTPDate.parse(" Sun, 06 Nov 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun,\t06 Nov 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sunday,  06-Nov-94 08:49:37 GMT") == nil)
        #expect(
            HTTPDate.parse("Sun Nov 6 08:49:37 1994") == 784_111_777
                && HTTPDate.parse("Sun Nov   6 08:49:37 1994") == nil)
        #expect(HTTPDate.parse("Sun Nov  16 08:49:37 1994") == nil)
        #expect(
            HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 gmt") == 784_111_777
                && HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 gmt") == 784_111_777)
    }

    /// A quoted value with an escaped quote followed by a combining mark: the parser reads
    /// bytes, so the escape holds (the fuzz target's own serializer got it wrong on Characters).
    @Test func anEscapedQuoteBeforeACombiningMark() {
        let parsed = CacheControl(["private=\"a\\\"\u{0301}b\", no-store"])
        #expect(parsed.directives.count == 2 && parsed.value("private") == .some("a\"\u{0301}b") && parsed.noStore)
    }

    /// `/\u{301}?url=…` (found by `proxyTargetsReadBackAsWritten` at its first 10,000
    /// inputs): an origin file whose name begins with a combining mark gave a proxy path whose
    /// `/` and mark were one Character, so `hasPrefix("/")` said no and the proxy answered 404
    /// to the URL it had written. The path form's `/` and `.` were split the same way, and an
    /// import's name lost its mark. Prefixes are now compared by bytes, splits by scalar.
    @Test func aCombiningMarkAfterASlashInAProxyURLIsNoPartOfIt() throws {
        let origin = try #require(URL(string: "https://cdn.example/a/%CC%81song.mp3"))
        var target = ProxyTarget(origin, token: "\u{301}t")
        target.imports = ["\u{301}name": "v"]
        #expect(try ProxyTarget(reading: RequestTarget(target.uri)) == target, "\(target.uri)")
        let path = ProxyTarget(URL(string: "https://cdn.example/%CC%81/a.m4s")!, form: .path, token: "t")
        #expect(try ProxyTarget(reading: RequestTarget(path.uri)) == path, "\(path.uri)")
    }

    /// A value beginning with U+FEFF (found by `proxyTargetsReadBackAsWritten`): Foundation's
    /// percent-decoding of a query (`URLComponents.queryItems`) and `String(data:encoding:)`
    /// drop a leading byte order mark, so a token, a CMCD or a variable the proxy wrote read
    /// back without it. Query items and base64url are now decoded byte by byte.
    @Test func aLeadingByteOrderMarkInAProxyURLStays() throws {
        var target = ProxyTarget(URL(string: "https://cdn.example/a.m3u8")!, token: "\u{FEFF}t")
        target.cmcd = "\u{FEFF}sid=\"x\""
        target.imports = ["n": "\u{FEFF}v"]
        #expect(try ProxyTarget(reading: RequestTarget(target.uri)) == target, "\(target.uri)")
        let path = ProxyTarget(URL(string: "https://cdn.example/a.mpd")!, form: .path, token: "\u{FEFF}")
        #expect(try ProxyTarget(reading: RequestTarget(path.uri)).token == "\u{FEFF}", "\(path.uri)")
        // A value that is not UTF-8 is no value, as before.
        #expect(RequestTarget("/?url=http%3A%2F%2Fh%2F&token=%FF").query("token") == nil)
    }

    /// `Int64("+5")` is 5: a signed number is not `1*DIGIT`.
    @Test func signedNumbersAreNotNumbers() {
        #expect(HTTPNumber.strict("+5") == nil && HTTPNumber.strict("-0") == nil && HTTPNumber.saturating("٣") == nil)
        #expect(RangeSpecifier.parse("bytes=+5-10") == .invalid)
    }

    /// `X-Amz-Date=90261123T000000Z` (found by `signedURLsReadWithinBoundsAndRenewInTheirSignatureOnly`
    /// with `MEDIACACHE_FUZZ_SEED=5`): a compact date reads up to the year 9999, past the latest
    /// expiry any other parameter may state (year 5138), and the URL's expiry went past it.
    @Test func anAmazonDatePastTheLatestExpiryIsNoDate() throws {
        let far = try #require(
            URL(string: "https://b.s3.example/v.mp4?X-Amz-Date=90261123T000000Z&X-Amz-Expires=3600&X-Amz-Signature=f"))
        #expect(SignedURL.expiry(of: far) == nil)
        let near = try #require(
            URL(string: "https://b.s3.example/v.mp4?X-Amz-Date=20261123T000000Z&X-Amz-Expires=3600&X-Amz-Signature=f"))
        #expect(SignedURL.expiry(of: near) == Date(timeIntervalSince1970: 1_795_395_600))
    }

    /// `#EXT-X-STREAM-INF:` with no attributes (found by
    /// `mastersWithSideLoadedTracksListThemOnEveryVariant` with `MEDIACACHE_FUZZ_SEED=2`): the
    /// side-loaded subtitles were added as `:,SUBTITLES=...`, a list whose first attribute is
    /// empty, which does not read; that variant then named no subtitle group.
    @Test func aVariantWithoutAttributesGetsTheSubtitlesGroupAsItsOnlyOne() throws {
        let text = "#EXTM3U\n#EXT-X-STREAM-INF:\nlow.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=1,\nhigh.m3u8\n"
        let playlist = try HLSPlaylist(parsing: Array(text.utf8))
        let track = try #require(SideLoadedSubtitle(language: "en", url: URL(string: "https://s.example/en.vtt")!))
        let output = try #require(SideLoadedSubtitles.master(playlist, adding: [track]))
        let read = try HLSPlaylist(parsing: Array(output.utf8))
        #expect(read.variants.count == 2 && read.variants.allSatisfy { $0.subtitlesGroup != nil }, "\(output)")
        #expect(output.contains("#EXT-X-STREAM-INF:SUBTITLES=") && output.contains("BANDWIDTH=1,SUBTITLES="))
    }
}

extension RangeSpecifier.Parsed {
    func resolved(length: Int64) -> ByteRange? {
        switch self {
        case .single(let one), .multiple(let one): one.resolve(length: length)
        case .invalid: nil
        }
    }
}
