// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import RawStructuredFieldValues

/// Common Media Client Data (CTA-5004): what a player says of itself on each request, as a
/// `CMCD` query parameter or in `CMCD-Object`, `CMCD-Request`, `CMCD-Session` and
/// `CMCD-Status` fields. The cache keeps it out of keys and passes a player's on to the
/// origin; with `serve --cmcd` it writes its own for players that send none, with the keys it
/// knows: object type (`ot`), streaming format (`sf`), session id (`sid`), duration (`d`), and
/// for its own fetches the custom key ``ownKey``.
package struct CMCD: Sendable, Equatable {
    /// `ot`: `m` manifest, `i` init segment, `k` key, `c` caption, `a`, `v`, `av` media.
    package var objectType: String?
    /// `sf`: `h` HLS, `d` DASH.
    package var streamingFormat: String?
    /// `sid`: one playback, from its first playlist to its last segment.
    package var sessionID: String?
    /// `d`: the object's duration, milliseconds.
    package var duration: Int?
    /// Whether the request is the cache's own (prefetch, preload, read-ahead, pinned download).
    package var isCachesOwn = false

    /// The custom key (CTA-5004 §3.3: a reverse-domain prefix, a hyphen, a name) that marks a
    /// request the cache makes for itself, not for a waiting player.
    package static let ownKey = "io.mediacache-own"

    /// A new session ID: a random UUID (version 4) in lower case, from the system's random
    /// source without opening a device (Foundation's `UUID()` opens `/dev/urandom` on Linux, a
    /// blocking call on the cooperative pool the proxy answers on).
    package static func newSessionID() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes[6] = bytes[6] & 0x0F | 0x40  // version 4
        bytes[8] = bytes[8] & 0x3F | 0x80  // the RFC 9562 variant
        let hex = bytes.map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }
        return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]].map { $0.joined() }.joined(
            separator: "-")
    }

    package init(
        objectType: String? = nil, streamingFormat: String? = nil, sessionID: String? = nil, duration: Int? = nil,
        isCachesOwn: Bool = false
    ) {
        self.objectType = objectType
        self.streamingFormat = streamingFormat
        self.sessionID = sessionID
        self.duration = duration
        self.isCachesOwn = isCachesOwn
    }

    /// The name of the query parameter CMCD travels in (CTA-5004 §2.3).
    package static let queryName = "CMCD"

    /// The names of the fields CMCD travels in.
    package static let fieldNames = ["CMCD-Object", "CMCD-Request", "CMCD-Session", "CMCD-Status"]

    /// Whether a request (its fields and its URL's query) carries CMCD already.
    package static func isPresent(fields: [(name: String, value: String)], query: String?) -> Bool {
        fields.contains { field in fieldNames.contains { $0.caseInsensitiveCompare(field.name) } }
            || (query?.split(separator: "&").contains { $0.prefix { $0 != "=" }.caseInsensitiveEquals(queryName) }
                ?? false)
    }

    /// The fields to send, each key in its shard (CTA-5004 §2.2), keys in alphabetical order;
    /// none for what is unknown. Each is an RFC 8941 dictionary, written by the structured-field
    /// serializer.
    package var fields: [(name: String, value: String)] {
        var object: [(String, RFC9651BareItem)] = []
        if let duration { object.append(("d", .integer(Int64(duration)))) }
        if let objectType { object.append(("ot", .token(objectType))) }
        var session: [(String, RFC9651BareItem)] = []
        if let streamingFormat { session.append(("sf", .token(streamingFormat))) }
        if let sessionID { session.append(("sid", .string(sessionID))) }
        var result: [(name: String, value: String)] = []
        if !object.isEmpty { result.append(("CMCD-Object", Self.serialized(object))) }
        if isCachesOwn { result.append(("CMCD-Request", Self.serialized([(Self.ownKey, .bool(true))]))) }
        if !session.isEmpty { result.append(("CMCD-Session", Self.serialized(session))) }
        return result
    }

    /// The compact text the proxy carries in a URI it rewrites (`d=2000,ot=m,sf=h,sid="…"`,
    /// one dictionary of every known key), which ``init(parsing:)`` reads back.
    package var text: String {
        var keys: [(String, RFC9651BareItem)] = []
        if let duration { keys.append(("d", .integer(Int64(duration)))) }
        if let objectType { keys.append(("ot", .token(objectType))) }
        if let streamingFormat { keys.append(("sf", .token(streamingFormat))) }
        if let sessionID { keys.append(("sid", .string(sessionID))) }
        return Self.serialized(keys)
    }

    /// The object types (`ot`) and streaming formats (`sf`) CTA-5004 defines.
    private static let objectTypes: Set<String> = ["m", "i", "k", "c", "a", "v", "av", "tt", "o"]
    private static let streamingFormats: Set<String> = ["h", "d", "s", "o"]

    /// Reads CMCD keys from outside (``text``, a URI a player could change, or a player's
    /// `CMCD-Session`): an RFC 8941 dictionary read by the structured-field parser, of which
    /// the known keys with values of their type and in bounds are kept; at most 512 bytes. A
    /// value that is not a dictionary gives nothing.
    package init(parsing text: String) {
        self.init()
        guard text.utf8.count <= 512 else { return }
        var parser = StructuredFieldValueParser(Array(text.utf8))
        guard let dictionary = try? parser.parseDictionaryFieldValue() else { return }
        for (key, member) in dictionary {
            guard case .item(let item) = member else { continue }
            switch (key, item.rfc9651BareItem) {
            case ("d", .integer(let value)) where (0...86_400_000).contains(value): duration = Int(value)
            case ("ot", .token(let value)) where Self.objectTypes.contains(value): objectType = value
            case ("sf", .token(let value)) where Self.streamingFormats.contains(value): streamingFormat = value
            case ("sid", .string(let value)):
                sessionID =
                    !value.isEmpty && value.utf8.count <= 64 && value.utf8.allSatisfy { Self.isSessionByte($0) }
                    ? value : nil
            default: continue
            }
        }
    }

    /// `members` as one RFC 8941 dictionary, each member written by the structured-field
    /// serializer (empty when it refuses one, which the keys and values above never are), joined
    /// by `,` with no space: as every player writes CMCD (hls.js, dash.js, Shaka, ExoPlayer), so
    /// log pipelines that split it on `,` read the keys; RFC 8941's parsers read both forms.
    private static func serialized(_ members: [(String, RFC9651BareItem)]) -> String {
        var written: [String] = []
        for (key, value) in members {
            var dictionary = OrderedMap<String, ItemOrInnerList>()
            dictionary[key] = .item(Item(bareItem: value, parameters: OrderedMap()))
            var serializer = StructuredFieldValueSerializer()
            guard let bytes = try? serializer.writeDictionaryFieldValue(dictionary) else { return "" }
            written.append(String(decoding: bytes, as: UTF8.self))
        }
        return written.joined(separator: ",")
    }

    /// The session keys (`sf`, `sid`) of the `CMCD-Session` field among `fields`, if any.
    package static func session(in fields: [(name: String, value: String)]) -> CMCD? {
        guard let value = fields.first(where: { $0.name.lowercased() == "cmcd-session" })?.value else { return nil }
        let parsed = CMCD(parsing: value)
        return parsed.sessionID == nil
            ? nil : CMCD(streamingFormat: parsed.streamingFormat, sessionID: parsed.sessionID)
    }

    /// Letters, digits and `-`: what a session id the proxy makes holds.
    private static func isSessionByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
    }
}

extension String {
    fileprivate func caseInsensitiveCompare(_ other: String) -> Bool {
        lowercased() == other.lowercased()
    }
}

extension Substring {
    fileprivate func caseInsensitiveEquals(_ other: String) -> Bool {
        lowercased() == other.lowercased()
    }
}
