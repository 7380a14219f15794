// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// A manifest written again: its URLs mapped (the proxy's, an export's), or one element's XML
/// as the origin wrote it (a recording's).
extension DASHManifest {

    /// The manifest with every URL it names mapped by `map` (given the absolute URL, it
    /// returns the text to write): each `BaseURL` resolved (RFC 3986) against its parent's
    /// base and written absolute, so players need not agree on nested relative bases; an
    /// absolute base for the whole manifest (`base`'s folder) added when it has none, so
    /// relative references resolve through `map` too; `Location`, `PatchLocation`,
    /// `xlink:href` and absolute segment, initialization and index URLs (templates included)
    /// mapped. `UTCTiming` and `ContentProtection` are left alone, and so is everything else.
    /// - Parameters:
    ///   - base: the URL the manifest came from, after redirects.
    ///   - removing: elements (by index) left out whole, children included.
    ///   - relative: whether `map` gives paths relative to the manifest's own folder (an
    ///     export); each is then written relative to the base it is resolved against, as
    ///     RFC 3986 resolves it, rather than as given.
    package func rewritten(base: URL, removing removed: Set<Int> = [], relative: Bool = false, map: (URL) -> String)
        -> String
    {
        var edits: [(range: Range<Int>, text: String)] = []
        // The base each element's children resolve against, before and after its own BaseURL,
        // and (relative) each as written.
        var inherited: [URL] = []
        var bases: [URL] = []
        var writtenInherited: [String] = []
        var writtenBases: [String] = []
        var hasOwnBase: [Bool] = []
        // A base for the whole manifest is added only where it has none at all: one that
        // cannot be read is the origin's to answer for, not replaced by a guess.
        let rootHasBase = elements.contains { $0.name == "BaseURL" && $0.parent == 0 }
        // The folder the manifest came from (RFC 3986: `./` keeps neither the file name nor the query).
        let folder = rootHasBase ? nil : URL(string: "./", relativeTo: base)?.absoluteURL
        let writtenFolder = folder.map(map)
        func write(_ mapped: String, from anchor: String) -> String {
            Self.escaped(relative ? Self.relativeReference(to: mapped, from: anchor) : mapped)
        }
        for (index, element) in elements.enumerated() {
            let parentBase = element.parent.map { bases[$0] } ?? base
            let parentWritten = element.parent.map { writtenBases[$0] } ?? ""
            inherited.append(parentBase)
            bases.append(parentBase)
            writtenInherited.append(parentWritten)
            writtenBases.append(element.parent == nil ? writtenFolder ?? "" : parentWritten)
            hasOwnBase.append(false)
            if removed.contains(index) { edits.append((element.extent, "")) }
            if let text = element.text {
                let value = Self.textValue(bytes[text])
                if element.name == "BaseURL", let parent = element.parent,
                    let resolved = Self.resolve(value, against: inherited[parent])
                {
                    let mapped = map(resolved)
                    edits.append((text, write(mapped, from: writtenInherited[parent])))
                    if !hasOwnBase[parent] {
                        hasOwnBase[parent] = true
                        bases[parent] = resolved
                        writtenBases[parent] = mapped
                    }
                } else if element.name != "BaseURL", let resolved = Self.resolve(value, against: base) {
                    edits.append((text, write(map(resolved), from: "")))
                }
            }
            var urlNames = Self.urlAttributes[element.name] ?? []
            // A callback event's data is a URL the player fetches (ISO/IEC 23009-1 §5.10.4.5).
            if element.name == "Event", let parent = element.parent, elements[parent].name == "EventStream",
                Self.attribute("schemeIdUri", of: elements[parent], in: bytes) == Self.callbackScheme
            {
                urlNames = ["messageData"]
            }
            for attribute in element.attributes {
                let isLink = attribute.name.hasSuffix(":href")
                guard isLink || urlNames.contains(attribute.name) else { continue }
                let value = Self.decodedText(bytes[attribute.value])
                if isLink {
                    guard value != "urn:mpeg:dash:resolve-to-zero:2013",
                        let resolved = Self.resolve(value, against: parentBase)
                    else { continue }
                    edits.append((attribute.value, write(map(resolved), from: parentWritten)))
                } else if Self.isAbsoluteHTTP(value), let resolved = Self.resolve(value, against: parentBase) {
                    // A relative one resolves against the (rewritten) base by itself.
                    edits.append((attribute.value, write(map(resolved), from: parentWritten)))
                }
            }
        }
        if let writtenFolder, let root = elements.first {
            edits.append(
                (root.startTagEnd..<root.startTagEnd, "<BaseURL>" + write(writtenFolder, from: "") + "</BaseURL>"))
        }
        // Earlier first; of two at one place, the longer (a removal) first, so that an edit
        // inside a removed element is dropped with it.
        edits.sort { ($0.range.lowerBound, -$0.range.count) < ($1.range.lowerBound, -$1.range.count) }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + edits.count * 64)
        var cursor = 0
        for edit in edits where edit.range.lowerBound >= cursor {
            output += bytes[cursor..<edit.range.lowerBound]
            output += Array(edit.text.utf8)
            cursor = edit.range.upperBound
        }
        output += bytes[cursor...]
        return String(decoding: output, as: UTF8.self)
    }

    /// `path` (slash-separated, relative to one root; a folder ends with `/`) as a reference
    /// relative to `folder` (likewise, or empty for the root); an absolute URL as it is.
    static func relativeReference(to path: String, from folder: String) -> String {
        guard !path.contains("://"), !path.hasPrefix("/") else { return path }
        let from = folder.split(separator: "/", omittingEmptySubsequences: true)
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        let directories = parts.dropLast()
        var common = 0
        while common < from.count, common < directories.count, from[common] == directories[common] { common += 1 }
        let reference = String(repeating: "../", count: from.count - common) + parts[common...].joined(separator: "/")
        return reference.isEmpty ? "./" : reference
    }

    /// `text` resolved against `base`, when the result is an http(s) URL with a host.
    static func resolve(_ text: String, against base: URL) -> URL? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, let url = URL(string: trimmed, relativeTo: base)?.absoluteURL,
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else { return nil }
        return url
    }

    static func isAbsoluteHTTP(_ text: String) -> Bool {
        let lower = text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }

    // MARK: Elements as XML

    /// The XML of `element` without its end tag: its start tag (opened, were it self-closing)
    /// and its child elements but those named in `skipping`, as the origin wrote them.
    package func opening(_ element: Int, skipping: Set<String>) -> String {
        let item = elements[element]
        var text = String(decoding: bytes[item.extent.lowerBound..<item.startTagEnd], as: UTF8.self)
        if text.hasSuffix("/>") { text = String(text.dropLast(2)) + ">" }
        for child in elements[(element + 1)...] where child.parent == element && !skipping.contains(child.name) {
            text += String(decoding: bytes[child.extent], as: UTF8.self)
        }
        return text
    }

    /// The root's namespace declarations (`xmlns:cenc="…"` …) but the default one.
    package var namespaceDeclarations: String {
        guard let root = elements.first else { return "" }
        return root.attributes.filter { $0.name.hasPrefix("xmlns:") }.map {
            "\($0.name)=\"\(String(decoding: bytes[$0.value], as: UTF8.self))\""
        }
        .joined(separator: " ")
    }
}

extension DASHManifest {
    /// The groups of `BaseURL`s that are siblings (children of one element, ISO/IEC 23009-1
    /// §5.6: alternative locations of the same resources), each resolved against its parent's
    /// base, the manifest's from `base`; only groups of two or more, in document order.
    package func siblingBases(base: URL) -> [[URL]] {
        var children: [Int: [URL]] = [:]
        var inherited: [URL] = []  // what each element's own BaseURLs resolve against
        var effective: [URL] = []  // what its other children resolve against
        for element in elements {
            let from = element.parent.map { effective[$0] } ?? base
            inherited.append(from)
            effective.append(from)
            guard element.name == "BaseURL", let parent = element.parent, let text = element.text,
                let resolved = Self.resolve(Self.textValue(bytes[text]), against: inherited[parent])
            else { continue }
            if children[parent] == nil {
                // The first sibling is the base the parent's children resolve against.
                effective[parent] = resolved
                children[parent] = [resolved]
            } else if children[parent]?.contains(resolved) == false {
                children[parent]?.append(resolved)
            }
        }
        return children.keys.sorted().compactMap { children[$0] }.filter { $0.count >= 2 }
    }
}
