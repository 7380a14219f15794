// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// Variable substitution (RFC 8216bis §4.3 `EXT-X-DEFINE`, protocol version 8): a playlist's
/// `NAME`/`VALUE` definitions, `QUERYPARAM` ones (a query parameter of the playlist's own URL)
/// and `IMPORT` ones (a media playlist taking a definition of the multivariant playlist it was
/// reached from) replace each `{$name}` in URI lines and quoted attribute values.
///
/// The cache resolves them before it reads or rewrites a playlist, and writes the playlist
/// without its `EXT-X-DEFINE` lines: a player then needs no variable it could not resolve (the
/// `QUERYPARAM` of a URL inside the proxy's, a value that names the origin). Values are put in
/// as they are, never substituted again, so a definition cannot recurse. Bounded: at most
/// ``maximumDefinitions`` definitions, names of `[A-Za-z0-9_-]`, and the result within
/// ``HLSPlaylist/maximumSize``.
package enum HLSVariables {
    package static let maximumDefinitions = 1_000

    /// `text` with its variables resolved and its `EXT-X-DEFINE` lines left out, and its
    /// definitions (which a media playlist reached from it may import); `nil` when it defines
    /// and references nothing (the playlist is used as it is).
    /// - Parameters:
    ///   - url: the playlist's URL, whose query `QUERYPARAM` reads.
    ///   - imports: the definitions of the multivariant playlist, for `IMPORT`.
    /// - Throws: ``HLSPlaylistError`` for a malformed or duplicate definition, an undefined
    ///   reference, a missing import or query parameter, or too much.
    package static func resolved(_ text: String, url: URL?, imports: [String: String]) throws(HLSPlaylistError) -> (
        text: String, definitions: [String: String]
    )? {
        guard text.contains("#EXT-X-DEFINE") || text.contains("{$") else { return nil }
        var definitions: [String: String] = [:]
        var output = ""
        output.reserveCapacity(text.utf8.count)
        let query = url.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: false)?.queryItems } ?? []
        var lineNumber = 0
        for (content, ending) in HLSPlaylist.splitLines(text) {
            lineNumber += 1
            do throws(HLSPlaylistError) {
                if content.hasPrefix("#EXT-X-DEFINE:") {
                    let (name, value) = try definition(
                        String(content.dropFirst("#EXT-X-DEFINE:".count)), query: query, imports: imports)
                    guard definitions[name] == nil else {
                        throw HLSPlaylistError("\(name.prefix(64)) is defined twice.")
                    }
                    guard definitions.count < maximumDefinitions else {
                        throw HLSPlaylistError("More than \(maximumDefinitions) definitions.")
                    }
                    definitions[name] = value
                    continue
                }
                output += try substituted(content, definitions)
                output += ending
            } catch {
                throw HLSPlaylistError("Line \(lineNumber): \(error.message)")
            }
            guard output.utf8.count <= HLSPlaylist.maximumSize else {
                throw HLSPlaylistError(
                    "The playlist grows past \(HLSPlaylist.maximumSize >> 20) MiB as its variables are put in.")
            }
        }
        return (output, definitions)
    }

    /// The name and value of an `EXT-X-DEFINE` attribute list.
    private static func definition(_ list: String, query: [URLQueryItem], imports: [String: String])
        throws(HLSPlaylistError) -> (String, String)
    {
        let attributes: [String: String]
        do {
            attributes = try HLSPlaylist.attributes(list)
        } catch let error as HLSPlaylistError {
            throw error
        } catch {
            throw HLSPlaylistError("EXT-X-DEFINE cannot be read.")
        }
        let forms = [attributes["NAME"], attributes["IMPORT"], attributes["QUERYPARAM"]].compactMap { $0 }
        guard forms.count == 1, let name = forms.first, isName(name) else {
            throw HLSPlaylistError(
                "EXT-X-DEFINE needs one of NAME, IMPORT or QUERYPARAM, a name of letters, digits, - and _.")
        }
        if attributes["NAME"] != nil {
            guard let value = attributes["VALUE"] else {
                throw HLSPlaylistError("EXT-X-DEFINE NAME=\"\(name.prefix(64))\" has no VALUE.")
            }
            return (name, value)
        }
        if attributes["IMPORT"] != nil {
            guard let value = imports[name] else {
                throw HLSPlaylistError(
                    "EXT-X-DEFINE imports \(name.prefix(64)), which the multivariant playlist does not define.")
            }
            return (name, value)
        }
        guard let value = query.first(where: { $0.name == name })?.value else {
            throw HLSPlaylistError(
                "EXT-X-DEFINE reads the query parameter \(name.prefix(64)), which the playlist's URL does not have.")
        }
        return (name, value)
    }

    /// Whether `name` is a variable name: 1 to 256 of `[A-Za-z0-9_-]`.
    static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 256
            && name.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }

    /// `line` with its references replaced: all of a URI line, the quoted values of a tag
    /// (RFC 8216bis: quoted strings and hexadecimal sequences; a hexadecimal sequence cannot
    /// hold `{$`). A comment or a tag's unquoted text is left as it is.
    static func substituted(_ line: String, _ definitions: [String: String]) throws(HLSPlaylistError) -> String {
        guard line.contains("{$") else { return line }
        if !line.hasPrefix("#") { return try replacing(Substring(line), definitions) }
        guard line.hasPrefix("#EXT") else { return line }
        var result = ""
        var rest = Substring(line)
        // Quoted strings alternate with the text around them: replace inside the quotes only.
        while let open = rest.firstIndex(of: "\"") {
            result += rest[...open]
            let afterOpen = rest.index(after: open)
            guard let close = rest[afterOpen...].firstIndex(of: "\"") else {
                result += rest[afterOpen...]
                return result
            }
            result += try replacing(rest[afterOpen..<close], definitions) + "\""
            rest = rest[rest.index(after: close)...]
        }
        return result + rest
    }

    /// `text` with each `{$name}` replaced by its value.
    private static func replacing(_ text: Substring, _ definitions: [String: String]) throws(HLSPlaylistError) -> String
    {
        var result = ""
        var rest = text
        while let start = rest.range(of: "{$") {
            result += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                throw HLSPlaylistError("A variable reference without its closing brace.")
            }
            let name = String(rest[start.upperBound..<end])
            guard let value = definitions[name] else {
                throw HLSPlaylistError("The variable \(name.prefix(64)) is used but not defined.")
            }
            result += value
            rest = rest[rest.index(after: end)...]
        }
        return result + rest
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}

extension HLSPlaylist {
    /// The playlist `bytes` (from `url`), its variables resolved first (``HLSVariables``):
    /// what the cache reads, rewrites and serves of a playlist.
    /// - Parameter imports: the multivariant playlist's definitions, for a media playlist's `IMPORT`.
    /// - Throws: ``HLSPlaylistError``, as ``init(parsing:)``, or for its variables.
    package init(parsing bytes: some Collection<UInt8>, url: URL?, imports: [String: String] = [:]) throws {
        guard let text = String(validating: Array(bytes), as: UTF8.self),
            let (resolved, definitions) = try HLSVariables.resolved(text, url: url, imports: imports)
        else {
            try self.init(parsing: bytes)
            return
        }
        try self.init(parsing: Array(resolved.utf8))
        self.definitions = definitions
    }
}
