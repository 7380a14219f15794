// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// An HLS playlist (RFC 8216), read from outside and so trusted in nothing: parsed line by
/// line, every number bounded, every byte kept so that a rewrite changes only URIs.
///
/// ```swift
/// let playlist = try HLSPlaylist(parsing: body)
/// let text = playlist.rewritten(base: finalURL) { absolute, tag in proxyURL(for: absolute) }
/// ```
package struct HLSPlaylist: Sendable {
    /// The largest playlist read (a 10,000-segment playlist is about 1 MiB).
    public static let maximumSize = 16 << 20
    /// The longest line read.
    public static let maximumLineLength = 64 << 10

    /// One line, as it was, with what it means.
    public struct Line: Sendable {
        public enum Kind: Sendable, Equatable {
            case blank
            /// A line starting with `#` that is not a tag.
            case comment
            /// `#EXT…`: the tag's name (without `#`) and what follows its `:`, if anything.
            case tag(name: String, value: String?)
            /// A URI line: a segment or, in a master playlist, a variant playlist.
            case uri(String)
        }

        /// The line without its end.
        public var text: String
        /// `"\n"`, `"\r\n"`, or for a last line `"\r"` or `""`.
        public var ending: String
        public var kind: Kind
    }

    /// A variant stream of a master playlist (`EXT-X-STREAM-INF` and the URI after it).
    public struct Variant: Sendable, Equatable {
        public var bandwidth: Int64
        public var uri: String
        /// The `AUDIO` group whose renditions (``HLSPlaylist/renditions``) carry its sound, if any.
        public var audioGroup: String?
        /// The height of `RESOLUTION` (`1280x720`: 720), when given.
        package var height: Int64?
        /// The `VIDEO` and `SUBTITLES` groups it names, if any.
        package var videoGroup: String?
        package var subtitlesGroup: String?
    }

    /// An alternative rendition (`EXT-X-MEDIA`) that has its own playlist.
    public struct Rendition: Sendable, Equatable {
        /// `AUDIO`, `VIDEO`, `SUBTITLES` or `CLOSED-CAPTIONS`.
        public var type: String
        public var groupID: String
        public var uri: String
        /// `DEFAULT=YES`: the rendition a player picks without a preference.
        public var isDefault: Bool
        /// `LANGUAGE` (an RFC 5646 tag) and `NAME`, when given.
        package var language: String? = nil
        package var name: String? = nil
        /// `FORCED=YES` (subtitles): shown without the user asking, for speech in another language.
        package var isForced = false
    }

    /// A media initialization section (`EXT-X-MAP`): what a player needs before the segments after it.
    public struct InitSection: Sendable, Equatable {
        public var uri: String
        /// The bytes of the resource at `uri` that hold it, when it is a sub-range.
        public var byteRange: ByteRange?
    }

    /// A media segment (`EXTINF`, an optional `EXT-X-BYTERANGE`, and the URI after them).
    public struct Segment: Sendable, Equatable {
        /// Seconds.
        public var duration: Double
        public var uri: String
        /// The bytes of the resource at `uri` that hold the segment, when it is a sub-range.
        public var byteRange: ByteRange?
        /// The `EXT-X-MAP` in force for the segment, if any.
        public var initSection: InitSection?
    }

    public private(set) var lines: [Line] = []
    /// Whether the body starts with a UTF-8 byte-order mark (kept on output).
    public private(set) var hasByteOrderMark = false
    public private(set) var variants: [Variant] = []
    public private(set) var segments: [Segment] = []
    /// The `EXT-X-MEDIA` renditions that name a playlist.
    public private(set) var renditions: [Rendition] = []
    /// The variables it defined (``HLSVariables``), resolved already: for a media playlist's `IMPORT`.
    package var definitions: [String: String] = [:]
    /// The I-frame and image playlists of a master playlist.
    package private(set) var trickPlayPlaylists: [TrickPlayPlaylist] = []
    /// The `EXT-X-MAP` in force after the lines read so far.
    private var currentInitSection: InitSection?
    /// `EXT-X-TARGETDURATION`, seconds.
    public private(set) var targetDuration: Int64?
    /// `EXT-X-MEDIA-SEQUENCE`.
    public private(set) var mediaSequence: Int64 = 0
    /// `EXT-X-PLAYLIST-TYPE` (`VOD` or `EVENT`).
    public private(set) var playlistType: String?
    /// Whether `EXT-X-ENDLIST` is present: no segment will be added.
    public private(set) var hasEndList = false

    /// Whether the playlist names variants (a master playlist) rather than segments.
    public var isMaster: Bool { !variants.isEmpty }
    /// Whether the playlist will not change: `EXT-X-ENDLIST`, or `PLAYLIST-TYPE:VOD`, or a
    /// master playlist (RFC 8216 §6.2.4: its contents do not change in a live presentation).
    public var isFinal: Bool { hasEndList || playlistType?.uppercased() == "VOD" || isMaster }

    /// The tags whose `URI` attribute names a resource (RFC 8216 §4.3 and draft-pantos-hls-rfc8216bis).
    public static let tagsWithURIAttribute: Set<String> = [
        "EXT-X-KEY", "EXT-X-SESSION-KEY", "EXT-X-MAP", "EXT-X-MEDIA", "EXT-X-I-FRAME-STREAM-INF",
        "EXT-X-SESSION-DATA", "EXT-X-PART", "EXT-X-PRELOAD-HINT", "EXT-X-RENDITION-REPORT", "EXT-X-IMAGE-STREAM-INF",
    ]

    /// The tag that names a content steering server, in its `SERVER-URI` attribute (RFC
    /// 8216bis §4.4.6.6).
    package static let steeringTag = "EXT-X-CONTENT-STEERING"

    /// The tags whose `URI` names a key: the proxy keeps these resources in memory only
    /// while the store is not encrypted.
    public static let keyTags: Set<String> = ["EXT-X-KEY", "EXT-X-SESSION-KEY"]

    /// Whether `bytes` look like a playlist: `#EXTM3U` first (after an optional byte-order mark).
    public static func looksLikePlaylist(_ bytes: some Collection<UInt8>) -> Bool {
        let marker = Array("#EXTM3U".utf8)
        var body = bytes[...]
        if body.starts(with: [0xEF, 0xBB, 0xBF]) { body = body.dropFirst(3) }
        return body.starts(with: marker)
    }

    /// Parses a playlist.
    /// - Throws: ``HLSPlaylistError`` for a body that is too large, not UTF-8, not starting
    ///   with `#EXTM3U`, with a line that is too long, or with a tag it cannot read (an
    ///   unbalanced quote in an attribute list, a number out of bounds).
    public init(parsing bytes: some Collection<UInt8>) throws {
        guard bytes.count <= Self.maximumSize else {
            throw HLSPlaylistError("The playlist is larger than \(Self.maximumSize >> 20) MiB.")
        }
        var body = Array(bytes)
        if body.starts(with: [0xEF, 0xBB, 0xBF]) {
            hasByteOrderMark = true
            body.removeFirst(3)
        }
        guard let text = String(validating: body, as: UTF8.self) else {
            throw HLSPlaylistError("The playlist is not UTF-8 text.")
        }
        guard text.utf8.starts(with: "#EXTM3U".utf8) else {
            throw HLSPlaylistError("The playlist does not start with #EXTM3U.")
        }
        var pendingDuration: Double?
        var pendingRange: (length: Int64, offset: Int64?)?
        var pendingVariant: Variant?
        var previousRangeEnd: Int64?
        var lineNumber = 0
        for (content, ending) in Self.splitLines(text) {
            lineNumber += 1
            guard content.utf8.count <= Self.maximumLineLength else {
                throw HLSPlaylistError("Line \(lineNumber) is longer than \(Self.maximumLineLength >> 10) KiB.")
            }
            let kind = Self.classify(content)
            lines.append(Line(text: content, ending: ending, kind: kind))
            switch kind {
            case .blank, .comment:
                break
            case .tag(let name, let value):
                do {
                    try readTag(name, value, duration: &pendingDuration, range: &pendingRange, variant: &pendingVariant)
                } catch let error as HLSPlaylistError {
                    throw HLSPlaylistError("Line \(lineNumber): \(error.message)")
                }
            case .uri(let uri):
                if var variant = pendingVariant {
                    variant.uri = uri
                    variants.append(variant)
                    pendingVariant = nil
                } else if let duration = pendingDuration {
                    var byteRange: ByteRange?
                    if let (length, offset) = pendingRange {
                        // Without an offset a sub-range starts where the previous one ended.
                        guard let start = offset ?? previousRangeEnd else {
                            throw HLSPlaylistError(
                                "Line \(lineNumber): EXT-X-BYTERANGE without an offset follows no sub-range.")
                        }
                        guard start <= ByteRange.maximumOffset - length else {
                            throw HLSPlaylistError(
                                "Line \(lineNumber): EXT-X-BYTERANGE ends past \(ByteRange.maximumOffset).")
                        }
                        byteRange = ByteRange(start, start + length)
                        previousRangeEnd = start + length
                    } else {
                        previousRangeEnd = nil
                    }
                    segments.append(
                        Segment(duration: duration, uri: uri, byteRange: byteRange, initSection: currentInitSection))
                    pendingDuration = nil
                    pendingRange = nil
                }
            }
        }
    }

    /// The playlist with every URI that resolves (against `base`, by RFC 3986) to an `http`
    /// or `https` URL replaced by `map(url)`: URI lines, the `URI` attributes of
    /// ``tagsWithURIAttribute``, the `SERVER-URI` of ``steeringTag`` and an interstitial's
    /// `X-ASSET-URI` and `X-ASSET-LIST` (`EXT-X-DATERANGE`). Other URIs (`skd://`, `data:`) and
    /// every other byte stay as they were. `map` is also given the name of the tag the URI is in
    /// (`EXT-X-KEY`, …), the attribute's for an interstitial (`X-ASSET-LIST`), or `nil` for a URI line.
    public func rewritten(base: URL, map: (_ url: URL, _ tag: String?) -> String) -> String {
        var output = hasByteOrderMark ? "\u{FEFF}" : ""
        output.reserveCapacity(lines.reduce(0) { $0 + $1.text.utf8.count + 2 } + lines.count * 64)
        for line in lines {
            switch line.kind {
            case .uri(let uri):
                output += Self.resolve(uri, base: base).map { map($0, nil) } ?? line.text
            case .tag(let name, let value?) where Self.tagsWithURIAttribute.contains(name) || name == Self.steeringTag:
                let attribute = name == Self.steeringTag ? "SERVER-URI" : "URI"
                output +=
                    "#" + name + ":" + Self.rewritingURIAttribute(attribute, in: value, base: base) { map($0, name) }
            case .tag(Self.dateRangeTag, let value?):
                // An interstitial's asset (a multivariant playlist) or its asset list (JSON).
                var list = value
                for attribute in Self.interstitialAttributes {
                    list = Self.rewritingURIAttribute(attribute, in: list, base: base) { map($0, attribute) }
                }
                output += "#" + Self.dateRangeTag + ":" + list
            default:
                output += line.text
            }
            output += line.ending
        }
        return output
    }

    /// `uri` made absolute against `base`, when that gives an `http` or `https` URL.
    public static func resolve(_ uri: String, base: URL) -> URL? {
        let trimmed = trimmingSpaces(uri)
        guard !trimmed.isEmpty, let url = URL(string: trimmed, relativeTo: base)?.absoluteURL,
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else { return nil }
        return url
    }

    // MARK: Reading

    static func classify(_ line: String) -> Line.Kind {
        if line.allSatisfy({ $0 == " " || $0 == "\t" }) { return .blank }
        guard line.hasPrefix("#") else { return .uri(String(line)) }
        guard line.hasPrefix("#EXT") else { return .comment }
        let body = line.dropFirst()
        guard let colon = body.firstIndex(of: ":") else { return .tag(name: String(body), value: nil) }
        return .tag(name: String(body[..<colon]), value: String(body[body.index(after: colon)...]))
    }

    private mutating func readTag(
        _ name: String, _ value: String?, duration: inout Double?, range: inout (length: Int64, offset: Int64?)?,
        variant: inout Variant?
    ) throws {
        switch name {
        case "EXTINF":
            let number = value?.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            guard let seconds = Double(Self.trimmingSpaces(number)), seconds.isFinite, seconds >= 0, seconds < 1e9
            else {
                throw HLSPlaylistError("EXTINF needs a duration in seconds, not \"\(number.prefix(40))\".")
            }
            duration = seconds
        case "EXT-X-BYTERANGE":
            let parts = (value ?? "").split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
            guard let length = Self.decimal(parts[0]), parts.count == 1 || Self.decimal(parts[1]) != nil else {
                throw HLSPlaylistError(
                    "EXT-X-BYTERANGE needs <length>[@<offset>] with numbers up to \(ByteRange.maximumOffset), not \"\((value ?? "").prefix(60))\"."
                )
            }
            range = (length, parts.count == 2 ? Self.decimal(parts[1]) : nil)
        case "EXT-X-TARGETDURATION":
            guard let seconds = value.flatMap({ Self.decimal(Substring($0)) }) else {
                throw HLSPlaylistError("EXT-X-TARGETDURATION needs a number of seconds.")
            }
            targetDuration = seconds
        case "EXT-X-MEDIA-SEQUENCE":
            guard let sequence = value.flatMap({ Self.decimal(Substring($0)) }) else {
                throw HLSPlaylistError("EXT-X-MEDIA-SEQUENCE needs a number.")
            }
            mediaSequence = sequence
        case "EXT-X-PLAYLIST-TYPE":
            playlistType = value
        case "EXT-X-ENDLIST":
            hasEndList = true
        case "EXT-X-STREAM-INF":
            let attributes = try Self.attributes(value ?? "")
            variant = Variant(
                bandwidth: attributes["BANDWIDTH"].flatMap { Self.decimal(Substring($0)) } ?? 0, uri: "",
                audioGroup: attributes["AUDIO"],
                height: Self.height(attributes["RESOLUTION"]), videoGroup: attributes["VIDEO"],
                subtitlesGroup: attributes["SUBTITLES"])
        case "EXT-X-MEDIA":
            let attributes = try Self.attributes(value ?? "")
            if let uri = attributes["URI"], let type = attributes["TYPE"], let group = attributes["GROUP-ID"] {
                renditions.append(
                    Rendition(
                        type: type, groupID: group, uri: uri, isDefault: attributes["DEFAULT"] == "YES",
                        language: attributes["LANGUAGE"],
                        name: attributes["NAME"], isForced: attributes["FORCED"] == "YES"))
            }
        case "EXT-X-I-FRAME-STREAM-INF", "EXT-X-IMAGE-STREAM-INF":
            let attributes = try Self.attributes(value ?? "")
            if let uri = attributes["URI"] {
                trickPlayPlaylists.append(
                    TrickPlayPlaylist(
                        kind: name == "EXT-X-I-FRAME-STREAM-INF" ? .iFrames : .images, uri: uri,
                        bandwidth: attributes["BANDWIDTH"].flatMap { Self.decimal(Substring($0)) } ?? 0,
                        height: Self.height(attributes["RESOLUTION"]),
                        videoGroup: attributes["VIDEO"]))
            }
        case "EXT-X-MAP":
            let attributes = try Self.attributes(value ?? "")
            guard let uri = attributes["URI"] else { throw HLSPlaylistError("EXT-X-MAP needs a URI.") }
            var byteRange: ByteRange?
            if let text = attributes["BYTERANGE"] {
                let parts = text.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
                guard let length = Self.decimal(parts[0]), let offset = parts.count == 2 ? Self.decimal(parts[1]) : 0,
                    offset <= ByteRange.maximumOffset - length
                else {
                    throw HLSPlaylistError(
                        "EXT-X-MAP needs BYTERANGE=\"<length>[@<offset>]\" ending before \(ByteRange.maximumOffset), not \"\(text.prefix(60))\"."
                    )
                }
                byteRange = ByteRange(offset, offset + length)
            }
            currentInitSection = InitSection(uri: uri, byteRange: byteRange)
        default:
            if Self.tagsWithURIAttribute.contains(name) || name == Self.steeringTag {
                _ = try Self.attributes(value ?? "")
            }
        }
    }

    /// `text` without leading and trailing spaces and tabs (Foundation's
    /// `trimmingCharacters(in:)` took most of a rewrite's time).
    static func trimmingSpaces(_ text: some StringProtocol) -> String {
        let bytes = Array(text.utf8)
        guard let first = bytes.firstIndex(where: { $0 != 32 && $0 != 9 }),
            let last = bytes.lastIndex(where: { $0 != 32 && $0 != 9 })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    /// A decimal integer of at most ``ByteRange/maximumOffset``.
    public static func decimal(_ text: Substring) -> Int64? {
        guard !text.isEmpty else { return nil }
        var value: Int64 = 0
        for byte in text.utf8 {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let digit = Int64(byte - UInt8(ascii: "0"))
            guard value <= (ByteRange.maximumOffset - digit) / 10 else { return nil }  // checked before it can overflow
            value = value * 10 + digit
        }
        return value
    }

    /// An attribute list's attributes, quoted values without their quotes.
    /// - Throws: for an unbalanced quote or an entry without `=`.
    static func attributes(_ list: String) throws -> [String: String] {
        var result: [String: String] = [:]
        for entry in try attributeEntries(list) {
            var value = entry.value
            if value.hasPrefix("\"") { value = String(value.dropFirst().dropLast()) }
            result[entry.name] = value
        }
        return result
    }

    /// The entries of an attribute list in order, each with its exact text range.
    static func attributeEntries(_ list: String) throws -> [(
        name: String, value: String, valueRange: Range<String.Index>
    )] {
        var entries: [(name: String, value: String, valueRange: Range<String.Index>)] = []
        var index = list.startIndex
        while index < list.endIndex {
            guard let equals = list[index...].firstIndex(of: "=") else {
                throw HLSPlaylistError("An attribute without a value: \"\(list[index...].prefix(40))\".")
            }
            let name = trimmingSpaces(list[index..<equals])
            var valueStart = list.index(after: equals)
            var valueEnd: String.Index
            if valueStart < list.endIndex, list[valueStart] == "\"" {
                guard let closing = list[list.index(after: valueStart)...].firstIndex(of: "\"") else {
                    throw HLSPlaylistError("An unbalanced quote in the attribute \(name.prefix(40)).")
                }
                valueEnd = list.index(after: closing)
                guard valueEnd == list.endIndex || list[valueEnd] == "," else {
                    throw HLSPlaylistError("Text after the quoted value of \(name.prefix(40)).")
                }
            } else {
                valueEnd = list[valueStart...].firstIndex(of: ",") ?? list.endIndex
                if list[valueStart..<valueEnd].contains("\"") {
                    throw HLSPlaylistError("A quote inside the unquoted value of \(name.prefix(40)).")
                }
            }
            entries.append((name, String(list[valueStart..<valueEnd]), valueStart..<valueEnd))
            valueStart = valueEnd
            index = valueEnd < list.endIndex ? list.index(after: valueEnd) : valueEnd
        }
        return entries
    }

    /// `list` with the value of its attribute `attribute` rewritten (the quotes kept).
    private static func rewritingURIAttribute(_ attribute: String, in list: String, base: URL, map: (URL) -> String)
        -> String
    {
        guard let entries = try? attributeEntries(list),
            let uri = entries.first(where: { $0.name == attribute }), uri.value.count >= 2, uri.value.hasPrefix("\"")
        else { return list }
        let inner = String(uri.value.dropFirst().dropLast())
        guard let resolved = resolve(inner, base: base) else { return list }
        var result = list
        result.replaceSubrange(uri.valueRange, with: "\"" + map(resolved) + "\"")
        return result
    }
}

/// A playlist that cannot be read, and why.
package struct HLSPlaylistError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
