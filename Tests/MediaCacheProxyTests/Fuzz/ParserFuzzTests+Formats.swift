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

extension ParserFuzzTests {
    /// Log text (``LogRedaction``): every query value and every user-info is replaced, and
    /// nothing else changes, against a model that cuts the text into runs, each run into head
    /// and query, and the head at every `://`, by splitting byte arrays; redacting twice
    /// changes nothing more.
    @Test func logTextLosesEveryQueryValueAndUserInfoAndNothingElse() throws {
        let outcomes = try Mutator.run("log-text") { input in
            let redacted = LogRedaction.redact(input)
            let model = String(decoding: Self.modelRedaction(Array(input.utf8)), as: UTF8.self)
            guard redacted == model else {
                return ("mismatch", "got \(redacted.debugDescription), model \(model.debugDescription)")
            }
            guard LogRedaction.redact(redacted) == redacted else { return ("twice", "redacting again changed it") }
            return (redacted == input ? "unchanged" : "redacted", nil)
        }
        try Mutator.expectVaried(outcomes, ["redacted", "unchanged"])
    }

    static func modelRedaction(_ text: [UInt8]) -> [UInt8] {
        let marker = Array(LogRedaction.marker.utf8)
        func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
        /// `bytes` cut at every non-overlapping `separator`, left to right.
        func split(_ bytes: [UInt8], on separator: [UInt8]) -> [[UInt8]] {
            var pieces: [[UInt8]] = [[]]
            var index = 0
            while index < bytes.count {
                if index + separator.count <= bytes.count, Array(bytes[index..<(index + separator.count)]) == separator
                {
                    pieces.append([])
                    index += separator.count
                } else {
                    pieces[pieces.count - 1].append(bytes[index])
                    index += 1
                }
            }
            return pieces
        }
        func redactRun(_ run: [UInt8]) -> [UInt8] {
            let cut = run.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? run.count
            let pieces = split(Array(run[..<cut]), on: bytes("://"))
            var head = pieces[0]
            for piece in pieces.dropFirst() {
                head += bytes("://")
                let authority = piece.prefix { $0 != UInt8(ascii: "/") }
                if let at = authority.lastIndex(of: UInt8(ascii: "@")) {
                    head += marker + piece[at...]
                } else {
                    head += piece
                }
            }
            let rest = Array(run[cut...])
            guard rest.first == UInt8(ascii: "?") else { return head + rest }
            let afterMark = Array(rest.dropFirst())
            let query = afterMark.prefix { $0 != UInt8(ascii: "#") }
            let fragment = afterMark.dropFirst(query.count)
            let parts = query.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false).map {
                part -> [UInt8] in
                guard let equals = part.firstIndex(of: UInt8(ascii: "=")) else { return part.isEmpty ? [] : marker }
                return Array(part[...equals]) + (equals + 1 < part.endIndex ? marker : [])
            }
            return head + bytes("?") + Array(parts.joined(separator: [UInt8(ascii: "&")])) + fragment
        }
        let boundaries = Set(bytes(" \t\n\r\u{0B}\u{0C}\"'`<>"))
        var out: [UInt8] = []
        var run: [UInt8] = []
        for byte in text {
            if boundaries.contains(byte) {
                out += redactRun(run) + [byte]
                run = []
            } else {
                run.append(byte)
            }
        }
        return out + redactRun(run)
    }

    /// A CA file's text (`--ca-file`): one certificate per block, or a
    /// ``TrustRootsError`` that says what is wrong; never a trap. The corpus's `{CERT}` and
    /// `{CERT2}` stand for two certificates made at run time, `{KEY}` for a key block, `|`
    /// for a line break.
    @Test func caFilesGiveOneRootPerBlockOrAClearError() throws {
        let first = TestCertificateAuthority.shared.certificatePEM
        let second = try TestCertificateAuthority(commonName: "Fuzz CA").certificatePEM
        let key = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        let outcomes = try Mutator.run("pem", share: 10) { input in
            let text = input.replacingOccurrences(of: "{CERT}", with: first).replacingOccurrences(
                of: "{CERT2}", with: second
            )
            .replacingOccurrences(of: "{KEY}", with: key).replacingOccurrences(of: "|", with: "\n")
            // A block begins at a line that is the marker alone (spaces around it allowed).
            let blocks = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
                .filter { $0.trimmingCharacters(in: .whitespaces) == begin }.count
            do {
                let roots = try TrustRoots(pem: text)
                guard roots.count == blocks, blocks > 0 else {
                    return ("roots", "\(roots.count) roots from \(blocks) blocks")
                }
                return ("roots", nil)
            } catch let error as TrustRootsError {
                guard !error.message.isEmpty else { return ("error", "an empty message") }
                if blocks == 0, !error.message.contains("holds no certificate") { return ("error", error.message) }
                if blocks > 0, !(error.message.contains(end) || error.message.contains("not a valid X.509")) {
                    return ("error", error.message)
                }
                return ("error", nil)
            } catch {
                return ("error", "threw \(error), not a TrustRootsError")
            }
        }
        try Mutator.expectVaried(outcomes, ["roots", "error"])
        // The reason code read from a TLS library error text: an upper-case token that
        // follows the last `OPENSSL_internal:`, or nothing.
        try Mutator.run("pem", share: 10) { input in
            let text = input.replacingOccurrences(
                of: "{CERT}", with: "error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at x")
            guard let reason = OriginTLSFailure.libraryReason(in: text) else { return ("none", nil) }
            guard !reason.isEmpty, reason.allSatisfy({ $0.isUppercase || $0.isNumber || $0 == "_" }),
                text.contains("OPENSSL_internal:" + reason)
            else {
                return ("reason", "read \(reason.debugDescription)")
            }
            return ("reason", nil)
        }
    }

    /// Steering manifests from a steering server: refused with a reason, or written again as
    /// JSON whose `RELOAD-URI` and clone URIs all lead through the mapping, with no clone that
    /// replaces a host or adds parameters left; the output reads again to itself.
    @Test func steeringManifestsAreRefusedOrLeadOnlyThroughTheProxy() throws {
        let base = URL(string: "https://steer.example/s/steer.json?_HLS_pathway=A")!
        let outcomes = try Mutator.run("steering", share: 4) { input in
            let written: [UInt8]
            do {
                written = try SteeringManifest.rewritten(
                    Array(input.utf8), base: base, reload: { "http://p/R/" + $0.absoluteString },
                    resource: { "http://p/P/" + $0.absoluteString }
                ).bytes
            } catch {
                return ("refused", nil)
            }
            guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: Data(written)) else {
                return ("output", "not a JSON object")
            }
            if let reload = object["RELOAD-URI"], reload != .string("") {
                guard case .string(let text) = reload, text.hasPrefix("http://p/R/") else {
                    return ("reload", "\(reload)")
                }
            }
            if case .array(let clones)? = object["PATHWAY-CLONES"] {
                for case .object(let clone) in clones {
                    guard case .object(let replacement)? = clone["URI-REPLACEMENT"] else { continue }
                    guard replacement["HOST"] == nil, replacement["PARAMS"] == nil else { return ("clone", "\(clone)") }
                }
            }
            // Written again with mappings that change nothing, the output stays as it is.
            guard
                let again = try? SteeringManifest.rewritten(
                    written, base: base, reload: { $0.absoluteString }, resource: { $0.absoluteString }
                ).bytes,
                again == written
            else { return ("again", String(decoding: written, as: UTF8.self)) }
            return ("manifest", nil)
        }
        try Mutator.expectVaried(outcomes, ["manifest", "refused"])
    }

    /// The generator reached each of `labels` in at least 1 % of the inputs, so the targets
    /// test both sides of each parser rather than one.
    /// HLS playlists (`|` is a line break in the corpus, `~` a CR): parsed, or refused with an
    /// ``HLSPlaylistError`` that says why, never a trap. A parsed one, rewritten, keeps every
    /// line that names no resource byte for byte, replaces a URI line only by the mapped
    /// resolved http(s) URL, keeps its line count and ends, and parses again to the same
    /// segments and variants.
    @Test func playlistsParseOrAreRefusedAndRewriteOnlyURIs() throws {
        let base = URL(string: "https://cdn.example/a/b/index.m3u8?token=t")!
        let outcomes = try Mutator.run("hls", share: 5) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n").replacingOccurrences(of: "~", with: "\r")
            let playlist: HLSPlaylist
            do {
                playlist = try HLSPlaylist(parsing: Array(text.utf8))
            } catch let error as HLSPlaylistError {
                return error.message.isEmpty ? ("refused", "an empty reason") : ("refused", nil)
            } catch {
                return ("refused", "threw \(error), not an HLSPlaylistError")
            }
            guard text.utf8.starts(with: "#EXTM3U".utf8) || text.utf8.starts(with: [0xEF, 0xBB, 0xBF]) else {
                return ("parsed", "parsed without #EXTM3U")
            }
            let output = playlist.rewritten(base: base) { url, _ in "P[" + url.absoluteString + "]" }
            // Compare line by line, split the model's way: on bytes, at "\n".
            let before = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
                String(decoding: $0, as: UTF8.self)
            }
            let after = output.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
                String(decoding: $0, as: UTF8.self)
            }
            guard before.count == after.count else { return ("parsed", "\(before.count) lines became \(after.count)") }
            var rewrote = false
            for (old, new) in zip(before, after) where old != new {
                let content = old.hasSuffix("\r") ? String(old.dropLast()) : old
                let names =
                    content.hasPrefix("#EXT")
                    && (HLSPlaylist.tagsWithURIAttribute.union([HLSPlaylist.steeringTag, "EXT-X-DATERANGE"]))
                        .contains(where: { content.hasPrefix("#" + $0 + ":") })
                if !content.hasPrefix("#"), new.hasPrefix("P[http"), new.hasSuffix(old.hasSuffix("\r") ? "]\r" : "]") {
                    rewrote = true
                } else if names, new.contains("\"P[http") {  // `URI="…"`, or `URI ="…"`: names are read without spaces
                    rewrote = true
                } else {
                    return ("parsed", "line \(old.debugDescription) became \(new.debugDescription)")
                }
            }
            guard let again = try? HLSPlaylist(parsing: Array(output.utf8)) else {
                return ("parsed", "the rewritten playlist does not parse")
            }
            guard again.segments.count == playlist.segments.count, again.variants.count == playlist.variants.count,
                again.segments.map(\.byteRange) == playlist.segments.map(\.byteRange),
                again.segments.map(\.initSection?.byteRange) == playlist.segments.map(\.initSection?.byteRange),
                again.renditions.map(\.groupID) == playlist.renditions.map(\.groupID),
                again.variants.map(\.audioGroup) == playlist.variants.map(\.audioGroup)
            else {
                return ("parsed", "the rewritten playlist reads differently")
            }
            return (rewrote ? "rewritten" : "unchanged", nil)
        }
        try Mutator.expectVaried(outcomes, ["rewritten", "unchanged", "refused"])
    }

    /// The model of ``CacheKeyRule/keyURL(for:)`` on a query: its `&`-separated items in
    /// order, less those whose name (before the first `=`, percent-decoded) is ignored,
    /// compared without regard to case.
    static func modelQuery(_ query: String, ignoring names: Set<String>) -> [String] {
        query.split(separator: "&", omittingEmptySubsequences: false).map(String.init).filter { item in
            let name =
                item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            return !names.contains((name.removingPercentEncoding ?? name).lowercased())
        }
    }

    @Test func keyRulesDropOnlyTheIgnoredParametersAndIgnoreTheirValues() throws {
        let rule = CacheKeyRule.preset(named: "cloudfront")!.adding(.preset(named: "token")!).adding(
            .preset(named: "azure")!
        )
        .adding(.preset(named: "s3")!).adding(.preset(named: "akamai")!)
        let names = Set(rule.ignoredQueryParameters.map { $0.lowercased() })
        var values = try Mutator(corpus: "number")
        let outcomes = try Mutator.run("key-url", share: 5) { input in
            guard let url = URL(string: input) else { return ("not a URL", nil) }
            let keyURL = rule.keyURL(for: url)
            guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
                let query = components.percentEncodedQuery
            else {
                return keyURL == url ? ("no query", nil) : ("no query", "a URL without a query changed: \(keyURL)")
            }
            let kept = Self.modelQuery(query, ignoring: names)
            let after = URLComponents(url: keyURL, resolvingAgainstBaseURL: true)
            guard after?.scheme == components.scheme, after?.percentEncodedHost == components.percentEncodedHost,
                after?.port == components.port,
                after?.percentEncodedPath == components.percentEncodedPath,
                after?.percentEncodedFragment == components.percentEncodedFragment
            else {
                return ("query", "more than the query changed: \(keyURL)")
            }
            let keptQuery =
                after?.percentEncodedQuery.map {
                    $0.split(separator: "&", omittingEmptySubsequences: false).map(String.init)
                } ?? []
            let dropsSome = kept.count < query.split(separator: "&", omittingEmptySubsequences: false).count
            guard dropsSome ? keptQuery == kept : keyURL == url else {
                return ("query", "kept \(keptQuery), the model keeps \(kept)")
            }
            // The values of ignored parameters never change the key.
            let resigned = query.split(separator: "&", omittingEmptySubsequences: false).map { item -> String in
                let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = String(parts[0])
                guard names.contains((name.removingPercentEncoding ?? name).lowercased()) else { return String(item) }
                return name + "=" + HLSPlaylist.percentEncoded(values.input())
            }.joined(separator: "&")
            // Only the query's text changes (URLComponents would also re-encode other parts of odd URLs).
            let text = url.absoluteString
            guard let range = text.range(of: "?" + query),
                let other = URL(string: text.replacingCharacters(in: range, with: "?" + resigned))
            else {
                return ("query", nil)
            }
            guard rule.key(for: other) == rule.key(for: url) else {
                return ("query", "new signature values changed the key: \(other)")
            }
            return (dropsSome ? "dropped" : "kept", nil)
        }
        try Mutator.expectVaried(outcomes, ["dropped", "kept"])
    }

    /// The model of ``DASHManifest/rewritten(base:map:)``: read again, the output has the
    /// input's elements in order (and an added base first in MPD when it had none), with the
    /// same attribute names, the same values except URL attributes, each of which is either as
    /// it was or mapped; and the text of each BaseURL, Location and PatchLocation is either as
    /// it was or mapped.
    @Test func manifestsParseOrAreRefusedAndRewriteOnlyURLs() throws {
        let base = URL(string: "https://cdn.example/a/b/m.mpd?token=t")!
        let outcomes = try Mutator.run("mpd", share: 5) { input in
            let text = input.replacingOccurrences(of: "|", with: "\n")
            let manifest: DASHManifest
            do {
                manifest = try DASHManifest(parsing: Array(text.utf8))
            } catch let error as DASHManifestError {
                return error.message.isEmpty ? ("refused", "an empty reason") : ("refused", nil)
            } catch {
                return ("refused", "threw \(error), not a DASHManifestError")
            }
            // What the proxy lists of each manifest it serves, to read ahead of its players: within
            // the limits, the representations the manifest has, each URL absolute (a relative one
            // resolved against the https base; an absolute one keeps its own scheme).
            let presentation = manifest.presentation(base: base)
            let representations = presentation.periods.flatMap(\.adaptationSets).flatMap(\.representations)
            guard representations.count <= manifest.elements.filter({ $0.name == "Representation" }).count,
                representations.allSatisfy({ $0.resources.count <= DASHPresentation.maximumSegments + 1 }),
                representations.reduce(0, { $0 + $1.resources.count }) <= DASHPresentation.maximumResources
                    + representations.count,
                representations.allSatisfy({ $0.resources.allSatisfy { $0.url.scheme != nil } })
            else { return ("parsed", "a presentation past its limits or with a relative URL") }
            let output = manifest.rewritten(base: base) { "P[" + $0.absoluteString + "]" }
            guard let again = try? DASHManifest(parsing: Array(output.utf8)) else {
                return ("parsed", "the output does not read again")
            }
            var before = manifest.elements
            var after = again.elements
            let added =
                after.count == before.count + 1 && after.count > 1 && after[1].name == "BaseURL" && after[1].parent == 0
            if added {
                guard !before.contains(where: { $0.name == "BaseURL" && $0.parent == 0 }) else {
                    return ("parsed", "a base added beside one")
                }
                guard Self.text(of: after[1], in: again).hasPrefix("P[https://cdn.example/a/b/]") else {
                    return ("parsed", "the added base is not the folder")
                }
                after.remove(at: 1)
                before = before.map {
                    var element = $0
                    element.parent = element.parent.map { $0 == 0 ? 0 : $0 + 1 }
                    return element
                }
            }
            guard before.count == after.count else {
                return ("parsed", "\(before.count) elements became \(after.count)")
            }
            var rewrote = false
            for (old, new) in zip(before, after) {
                guard old.name == new.name, old.attributes.map(\.name) == new.attributes.map(\.name) else {
                    return ("parsed", "<\(old.name)> became <\(new.name)> or its attributes changed names")
                }
                let urlNames = DASHManifest.urlAttributes[old.name] ?? []
                for (a, b) in zip(old.attributes, new.attributes) {
                    let was = String(decoding: manifest.bytes[a.value], as: UTF8.self)
                    let now = String(decoding: again.bytes[b.value], as: UTF8.self)
                    guard was != now else { continue }
                    guard urlNames.contains(a.name) || a.name.hasSuffix(":href"), now.hasPrefix("P[http") else {
                        return (
                            "parsed", "\(old.name)@\(a.name) \(was.debugDescription) became \(now.debugDescription)"
                        )
                    }
                    rewrote = true
                }
                if DASHManifest.urlTextElements.contains(old.name) {
                    let was = Self.text(of: old, in: manifest)
                    let now = Self.text(of: new, in: again)
                    guard was == now || now.hasPrefix("P[http") else {
                        return ("parsed", "<\(old.name)> \(was.debugDescription) became \(now.debugDescription)")
                    }
                    if was != now { rewrote = true }
                }
            }
            return (rewrote || added ? "rewritten" : "unchanged", nil)
        }
        try Mutator.expectVaried(outcomes, ["rewritten", "refused"])
    }

    /// An export's rewrite (``DASHManifest/rewritten(base:removing:relative:map:)`` leaving out
    /// every other `Representation`, references relative): read again, the output has the
    /// input's elements in order less the removed ones and everything inside them (and an added
    /// base first in MPD when it had none), each with its attribute names.
    @Test func exportRewritesLeaveOutWhatTheyRemoveAndReadAgain() throws {
        let base = URL(string: "https://cdn.example/a/b/m.mpd?token=t")!
        let outcomes = try Mutator.run("mpd", share: 5) { input in
            guard let manifest = try? DASHManifest(parsing: Array(input.replacingOccurrences(of: "|", with: "\n").utf8))
            else { return ("refused", nil) }
            let representations = manifest.elements.indices.filter { manifest.elements[$0].name == "Representation" }
            let removed = Set(representations.enumerated().filter { $0.offset % 2 == 0 }.map(\.element))
            let output = manifest.rewritten(base: base, removing: removed, relative: true) { url in
                url.host == "cdn.example" ? "o0" + url.path(percentEncoded: false) : url.absoluteString
            }
            guard let again = try? DASHManifest(parsing: Array(output.utf8)) else {
                return ("parsed", "the output does not read again")
            }
            var gone = [Bool](repeating: false, count: manifest.elements.count)
            for (index, element) in manifest.elements.enumerated() {
                gone[index] = removed.contains(index) || element.parent.map { gone[$0] } ?? false
            }
            let kept = manifest.elements.indices.filter { !gone[$0] }.map { manifest.elements[$0] }
            var after = again.elements
            if after.count == kept.count + 1, after.count > 1, after[1].name == "BaseURL", after[1].parent == 0,
                !kept.contains(where: { $0.name == "BaseURL" && $0.parent == 0 })
            {
                guard Self.text(of: after[1], in: again) == "o0/a/b/" else {
                    return ("parsed", "the added base is \(Self.text(of: after[1], in: again))")
                }
                after.remove(at: 1)
            }
            guard kept.map(\.name) == after.map(\.name),
                kept.map({ $0.attributes.map(\.name) }) == after.map({ $0.attributes.map(\.name) })
            else {
                return ("parsed", "\(kept.count) elements kept, \(after.count) read again, or their names differ")
            }
            return (removed.isEmpty ? "nothing removed" : "removed", nil)
        }
        try Mutator.expectVaried(outcomes, ["removed", "refused"])
    }

    static func text(of element: DASHManifest.Element, in manifest: DASHManifest) -> String {
        element.text.map { String(decoding: manifest.bytes[$0], as: UTF8.self) } ?? ""
    }
}
