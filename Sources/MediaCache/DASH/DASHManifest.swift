// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// An MPEG-DASH manifest (MPD) from outside: read with bounds, kept as its bytes, rewritten
/// only where it names a URL.
///
/// It is not a general XML parser: it reads tags, attributes, text, comments, CDATA and
/// processing instructions well enough to know each element's name, parents and attributes,
/// and refuses what it cannot read (a tag left open, an end tag that closes another element,
/// more than ``maximumDepth`` levels). Everything it does not rewrite stays byte for byte.
package struct DASHManifest: Sendable {
    /// The largest manifest read.
    package static let maximumSize = 16 << 20
    /// The deepest nesting of elements read.
    package static let maximumDepth = 64

    /// One element as read: its local name (the part after a namespace prefix), its parent,
    /// its attributes (value ranges in the bytes, entities undecoded), and, for elements whose
    /// text is a URL, that text's range.
    struct Element: Sendable {
        var name: String
        var parent: Int?
        /// Where the start tag begins (its `<`) and where the element ends (just past the end
        /// tag's `>`, or the start tag's when it closes itself).
        var extent: Range<Int>
        /// Where the start tag ends (just past `>`), for an insertion after it.
        var startTagEnd: Int
        var attributes: [(name: String, value: Range<Int>)]
        var text: Range<Int>?
    }

    let bytes: [UInt8]
    let elements: [Element]

    /// Whether the manifest is `type="dynamic"` (live).
    package let isDynamic: Bool
    /// `minimumUpdatePeriod` in seconds, when given and readable.
    package let minimumUpdatePeriod: Double?

    /// The elements whose text is a URL.
    static let urlTextElements: Set<String> = ["BaseURL", "Location", "PatchLocation", "ContentSteering"]
    /// The attributes that hold a URL (or a URL template), by element.
    /// The scheme of an `EventStream` whose events name a URL the player fetches.
    static let callbackScheme = "urn:mpeg:dash:event:callback:2015"

    static let urlAttributes: [String: Set<String>] = [
        "SegmentURL": ["media", "index"],
        "Initialization": ["sourceURL"],
        "RepresentationIndex": ["sourceURL"],
        "BitstreamSwitching": ["sourceURL"],
        "SegmentTemplate": ["media", "initialization", "index", "bitstreamSwitching"],
    ]

    /// Reads `bytes`.
    /// - Throws: ``DASHManifestError`` saying what is wrong.
    package init(parsing bytes: [UInt8]) throws(DASHManifestError) {
        guard bytes.count <= Self.maximumSize else {
            throw DASHManifestError("The manifest is larger than \(Self.maximumSize >> 20) MiB.")
        }
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw DASHManifestError("The manifest is not UTF-8 text.")
        }
        self.bytes = bytes
        elements = try Self.scan(bytes)
        guard let root = elements.first, root.name == "MPD", root.parent == nil else {
            throw DASHManifestError("The document's root element is not MPD.")
        }
        let type = Self.attribute("type", of: root, in: bytes)
        isDynamic = type == "dynamic"
        minimumUpdatePeriod = Self.attribute("minimumUpdatePeriod", of: root, in: bytes).flatMap(
            Self.seconds(ofISO8601Duration:))
    }

    /// Whether `bytes` look like an MPD: after a byte order mark, white space, an XML
    /// declaration and comments, the first element is named `MPD` (any namespace prefix).
    package static func looksLikeManifest(_ bytes: some Collection<UInt8>) -> Bool {
        var rest = Array(bytes.prefix(4096))[...]
        if rest.starts(with: [0xEF, 0xBB, 0xBF]) { rest = rest.dropFirst(3) }
        while true {
            rest = rest.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
            if rest.starts(with: Array("<?".utf8)) || rest.starts(with: Array("<!--".utf8))
                || rest.starts(with: Array("<!".utf8))
            {
                guard let end = rest.firstIndex(of: UInt8(ascii: ">")) else { return false }
                rest = rest[(end + 1)...]
                continue
            }
            guard rest.first == UInt8(ascii: "<") else { return false }
            let name = rest.dropFirst().prefix { !Self.isNameEnd($0) }
            return Self.localName(String(decoding: name, as: UTF8.self)) == "MPD"
        }
    }

    // MARK: Reading

    /// The elements of `bytes`, in document order.
    private static func scan(_ bytes: [UInt8]) throws(DASHManifestError) -> [Element] {
        var elements: [Element] = []
        var open: [Int] = []
        var index = 0
        let count = bytes.count
        func find(_ needle: [UInt8], from start: Int) -> Int? {
            guard needle.count <= count else { return nil }
            var position = start
            while position + needle.count <= count {
                if bytes[position] == needle[0], bytes[position..<(position + needle.count)].elementsEqual(needle) {
                    return position
                }
                position += 1
            }
            return nil
        }
        while index < count {
            guard bytes[index] == UInt8(ascii: "<") else {
                index += 1
                continue
            }
            if bytes[index...].starts(with: Array("<!--".utf8)) {
                guard let end = find(Array("-->".utf8), from: index + 4) else {
                    throw DASHManifestError("A comment is not closed.")
                }
                index = end + 3
            } else if bytes[index...].starts(with: Array("<![CDATA[".utf8)) {
                guard let end = find(Array("]]>".utf8), from: index + 9) else {
                    throw DASHManifestError("A CDATA section is not closed.")
                }
                index = end + 3
            } else if bytes[index...].starts(with: Array("<?".utf8)) {
                guard let end = find(Array("?>".utf8), from: index + 2) else {
                    throw DASHManifestError("A processing instruction is not closed.")
                }
                index = end + 2
            } else if bytes[index...].starts(with: Array("<!".utf8)) {
                guard let end = bytes[index...].firstIndex(of: UInt8(ascii: ">")) else {
                    throw DASHManifestError("A declaration is not closed.")
                }
                index = end + 1
            } else if index + 1 < count, bytes[index + 1] == UInt8(ascii: "/") {
                let nameStart = index + 2
                var nameEnd = nameStart
                while nameEnd < count, !isNameEnd(bytes[nameEnd]) { nameEnd += 1 }
                guard let close = bytes[nameEnd...].firstIndex(of: UInt8(ascii: ">")) else {
                    throw DASHManifestError("An end tag is not closed.")
                }
                let name = localName(String(decoding: bytes[nameStart..<nameEnd], as: UTF8.self))
                guard let top = open.popLast(), elements[top].name == name else {
                    throw DASHManifestError("The end tag </\(name.prefix(40))> does not close the element open there.")
                }
                // Text only: an element with elements inside is not a URL, whatever its name.
                if urlTextElements.contains(name), elements.count - 1 == top {
                    elements[top].text = elements[top].startTagEnd..<index
                }
                index = close + 1
                elements[top].extent = elements[top].extent.lowerBound..<index
            } else {
                let (element, end, selfClosing) = try startTag(bytes, at: index, parent: open.last)
                guard open.count < maximumDepth else {
                    throw DASHManifestError("The manifest nests deeper than \(maximumDepth) levels.")
                }
                guard !open.isEmpty || elements.isEmpty else {
                    throw DASHManifestError("The manifest has more than one root element.")
                }
                elements.append(element)
                if !selfClosing { open.append(elements.count - 1) }
                index = end
            }
        }
        guard open.isEmpty else {
            throw DASHManifestError("The element <\(elements[open.last!].name.prefix(40))> is not closed.")
        }
        guard !elements.isEmpty else { throw DASHManifestError("The manifest has no element.") }
        return elements
    }

    /// The start tag at `start`: the element, where the tag ends and whether it closes itself.
    private static func startTag(_ bytes: [UInt8], at start: Int, parent: Int?) throws(DASHManifestError) -> (
        Element, Int, Bool
    ) {
        let count = bytes.count
        var index = start + 1
        while index < count, !isNameEnd(bytes[index]) { index += 1 }
        guard index > start + 1 else { throw DASHManifestError("A tag has no name.") }
        let name = localName(String(decoding: bytes[(start + 1)..<index], as: UTF8.self))
        var attributes: [(name: String, value: Range<Int>)] = []
        while true {
            while index < count, isSpace(bytes[index]) { index += 1 }
            guard index < count else { throw DASHManifestError("The tag <\(name.prefix(40))> is not closed.") }
            if bytes[index] == UInt8(ascii: ">") {
                return (
                    Element(
                        name: name, parent: parent, extent: start..<(index + 1), startTagEnd: index + 1,
                        attributes: attributes), index + 1, false
                )
            }
            if bytes[index] == UInt8(ascii: "/") {
                guard index + 1 < count, bytes[index + 1] == UInt8(ascii: ">") else {
                    throw DASHManifestError("The tag <\(name.prefix(40))> is malformed.")
                }
                return (
                    Element(
                        name: name, parent: parent, extent: start..<(index + 2), startTagEnd: index + 2,
                        attributes: attributes), index + 2, true
                )
            }
            let nameStart = index
            while index < count, !isNameEnd(bytes[index]), bytes[index] != UInt8(ascii: "=") { index += 1 }
            guard index > nameStart else {
                throw DASHManifestError("The tag <\(name.prefix(40))> has a malformed attribute.")
            }
            let attributeName = String(decoding: bytes[nameStart..<index], as: UTF8.self)
            while index < count, isSpace(bytes[index]) { index += 1 }
            guard index < count, bytes[index] == UInt8(ascii: "=") else {
                throw DASHManifestError("The attribute \(attributeName.prefix(40)) has no value.")
            }
            index += 1
            while index < count, isSpace(bytes[index]) { index += 1 }
            guard index < count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") else {
                throw DASHManifestError("The attribute \(attributeName.prefix(40)) has no quoted value.")
            }
            let quote = bytes[index]
            guard let close = bytes[(index + 1)...].firstIndex(of: quote) else {
                throw DASHManifestError("The attribute \(attributeName.prefix(40)) is not closed.")
            }
            guard !bytes[(index + 1)..<close].contains(UInt8(ascii: "<")) else {
                throw DASHManifestError("The attribute \(attributeName.prefix(40)) holds a <.")
            }
            attributes.append((attributeName, (index + 1)..<close))
            index = close + 1
        }
    }

    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    static func isNameEnd(_ byte: UInt8) -> Bool {
        isSpace(byte) || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "/")
    }

    /// `name` without its namespace prefix.
    static func localName(_ name: String) -> String {
        name.split(separator: ":", maxSplits: 1).last.map(String.init) ?? name
    }

    static func attribute(_ name: String, of element: Element, in bytes: [UInt8]) -> String? {
        element.attributes.first { $0.name == name }.map { decodedText(bytes[$0.value]) }
    }

    /// An element's text as a value: a CDATA section's content as it is, otherwise decoded.
    static func textValue(_ text: ArraySlice<UInt8>) -> String {
        let string = String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if string.hasPrefix("<![CDATA["), string.hasSuffix("]]>"), string.count >= 12 {
            return String(string.dropFirst(9).dropLast(3))
        }
        return decodedText(text)
    }

    /// `text` with XML's predefined entities and character references decoded; an unknown
    /// entity stays as it is.
    static func decodedText(_ text: ArraySlice<UInt8>) -> String {
        let string = String(decoding: text, as: UTF8.self)
        guard string.contains("&") else { return string }
        var output = ""
        var rest = Substring(string)
        while let amp = rest.firstIndex(of: "&") {
            output += rest[..<amp]
            let after = rest[amp...]
            guard let semicolon = after.prefix(12).firstIndex(of: ";") else {
                output += "&"
                rest = rest[rest.index(after: amp)...]
                continue
            }
            let entity = after[after.index(after: after.startIndex)..<semicolon]
            let named = ["amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'"][String(entity)]
            var scalar: Unicode.Scalar?
            if entity.hasPrefix("#x") || entity.hasPrefix("#X") {
                scalar = UInt32(entity.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init)
            } else if entity.hasPrefix("#") {
                scalar = UInt32(entity.dropFirst(), radix: 10).flatMap(Unicode.Scalar.init)
            }
            if let replacement = named ?? scalar.map({ String(Character($0)) }) {
                output += replacement
                rest = rest[rest.index(after: semicolon)...]
            } else {
                output += "&"
                rest = rest[rest.index(after: amp)...]
            }
        }
        return output + rest
    }

    /// `text` safe as XML text or a quoted attribute value.
    static func escaped(_ text: String) -> String {
        MarkupText.escaped(text)
    }

    /// An ISO 8601 duration as DASH writes it (`PT2S`, `PT1M30.5S`, `P1DT2H`), in seconds;
    /// `nil` when it is not one or is beyond a year.
    static func seconds(ofISO8601Duration text: String) -> Double? {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        guard rest.hasPrefix("P"), rest.count <= 64 else { return nil }
        rest = rest.dropFirst()
        var total = 0.0
        var inTime = false
        var number = ""
        var sawValue = false
        for character in rest {
            if character == "T" {
                guard !inTime, number.isEmpty else { return nil }
                inTime = true
                continue
            }
            if character.isASCII, character.isNumber || character == "." {
                number.append(character)
                continue
            }
            guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
            number = ""
            sawValue = true
            switch (character, inTime) {
            case ("Y", false): total += value * 365 * 86400
            case ("M", false): total += value * 30 * 86400
            case ("W", false): total += value * 7 * 86400
            case ("D", false): total += value * 86400
            case ("H", true): total += value * 3600
            case ("M", true): total += value * 60
            case ("S", true): total += value
            default: return nil
            }
        }
        guard number.isEmpty, sawValue, total <= 366 * 86400 else { return nil }
        return total
    }
}

/// Why a manifest cannot be read.
package struct DASHManifestError: Error, Sendable, CustomStringConvertible {
    package var message: String
    init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// Text for XML and HTML.
package enum MarkupText {
    /// `text` safe as XML or HTML text and as a quoted attribute value.
    package static func escaped(_ text: String) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&#39;"
            default: output.append(character)
            }
        }
        return output
    }
}
