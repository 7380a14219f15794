// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// What a DASH manifest presents, as far as storing it ahead of play needs: each period's
/// adaptation sets, their representations, and each representation's resources (an
/// initialization and media segments, whole files or byte ranges of one), with durations.
/// Read with bounds: at most ``maximumSegments`` segments per representation and
/// ``maximumResources`` resources in all, so a manifest of many representations, or of
/// timelines with huge repeat counts, costs bounded work to read.
package struct DASHPresentation: Sendable {
    package static let maximumSegments = 100_000
    package static let maximumResources = 200_000

    package struct Resource: Sendable, Equatable {
        package var url: URL
        package var range: ByteRange?
        /// Seconds of media (0 for an initialization or an index).
        package var duration: Double
        /// A media segment's number (`$Number$`, or its place in a list from `startNumber`),
        /// its media time and its duration, in its representation's timescale.
        package var number: Int64? = nil
        package var time: Int64? = nil
        package var units: Int64? = nil
    }

    /// How a representation's media time maps to its period's (for a recording of it).
    package struct Timing: Sendable, Equatable {
        package var timescale: Int64 = 1
        /// `presentationTimeOffset`: the media time at the period's start.
        package var offset: Int64 = 0
        /// The initialization segment, when there is one.
        package var initialization: URL?
        /// The segments are listed by time (a `SegmentTimeline`), not only by number.
        package var byTime = false
    }

    package struct Representation: Sendable {
        /// Its element in the manifest (``DASHManifest/rewritten(base:removing:relative:map:)``).
        package var element: Int
        package var id: String
        package var bandwidth: Int64
        package var resources: [Resource]
        /// `height`, its own or its adaptation set's, when given.
        package var height: Int64? = nil
        package var timing = Timing()
    }

    /// What an adaptation set carries, as far as choosing renditions needs.
    package enum Content: String, Sendable, Codable {
        case video, audio, text, images
        /// Video for fast forward and rewind only (DASH-IF trick mode).
        case trickPlay
    }

    package struct AdaptationSet: Sendable {
        /// Its element in the manifest.
        package var element: Int = 0
        package var representations: [Representation]
        /// From `contentType`, else `mimeType` (its own or its first representation's);
        /// `nil` when neither says.
        package var content: Content? = nil
        /// `lang`, when given.
        package var language: String? = nil
        /// The values of its `Role`s (`main`, `forced-subtitle`, …).
        package var roles: [String] = []
    }

    package struct Period: Sendable {
        package var adaptationSets: [AdaptationSet]
        /// Seconds, when known.
        package var duration: Double?
        /// Seconds from the presentation's start, and `id` (else its place).
        package var start: Double = 0
        package var id: String = ""
    }

    package var periods: [Period]
    package var isDynamic: Bool
}

extension DASHManifest {
    /// The presentation, its URLs resolved against `base` (the manifest's URL after
    /// redirects) through every level's `BaseURL`. A representation whose segments cannot be
    /// listed (a template it cannot expand; a live template without an end, unless `now` is
    /// given) has none. With `now`, a live presentation lists the segments available then
    /// (``LiveEdge``).
    package func presentation(base: URL, now: Date? = nil) -> DASHPresentation {
        var children = [[Int]](repeating: [], count: elements.count)
        for (index, element) in elements.enumerated() {
            if let parent = element.parent { children[parent].append(index) }
        }
        func child(_ index: Int, named name: String) -> Int? { children[index].first { elements[$0].name == name } }
        func kids(_ index: Int, named name: String) -> [Int] { children[index].filter { elements[$0].name == name } }
        func attribute(_ name: String, _ index: Int?) -> String? {
            index.flatMap { Self.attribute(name, of: elements[$0], in: bytes) }
        }
        func baseURL(of index: Int, inherited: URL) -> URL {
            guard let baseElement = child(index, named: "BaseURL"), let text = elements[baseElement].text,
                let resolved = Self.resolve(Self.textValue(bytes[text]), against: inherited)
            else { return inherited }
            return resolved
        }
        let root = 0
        let rootBase = baseURL(of: root, inherited: base)
        let total = attribute("mediaPresentationDuration", root).flatMap(Self.seconds(ofISO8601Duration:))
        let edge = now.flatMap { LiveEdge(manifest: self, now: $0) }
        var periods: [DASHPresentation.Period] = []
        var budget = DASHPresentation.maximumResources
        let periodIndices = kids(root, named: "Period")
        for (position, period) in periodIndices.enumerated() {
            let periodBase = baseURL(of: period, inherited: rootBase)
            let start = attribute("start", period).flatMap(Self.seconds(ofISO8601Duration:)) ?? 0
            var duration = attribute("duration", period).flatMap(Self.seconds(ofISO8601Duration:))
            if duration == nil {
                if position + 1 < periodIndices.count,
                    let next = attribute("start", periodIndices[position + 1]).flatMap(Self.seconds(ofISO8601Duration:))
                {
                    duration = next - start
                } else if let total {
                    duration = total - start
                }
            }
            var sets: [DASHPresentation.AdaptationSet] = []
            for set in kids(period, named: "AdaptationSet") {
                let setBase = baseURL(of: set, inherited: periodBase)
                var representations: [DASHPresentation.Representation] = []
                for representation in kids(set, named: "Representation") {
                    let representationBase = baseURL(of: representation, inherited: setBase)
                    let id = attribute("id", representation) ?? ""
                    let bandwidth =
                        attribute("bandwidth", representation).flatMap { HLSPlaylist.decimal(Substring($0)) } ?? 0
                    // Segment information is inherited level by level, the nearest level winning per attribute.
                    let levels = [period, set, representation]
                    var resources: [DASHPresentation.Resource] = []
                    var timing = DASHPresentation.Timing()
                    let limit = min(budget, DASHPresentation.maximumSegments)
                    if let list = levels.compactMap({ child($0, named: "SegmentList") }).last {
                        (resources, timing) = segmentList(
                            list, base: representationBase, id: id, bandwidth: bandwidth, limit: limit, child: child,
                            kids: kids)
                    } else if levels.contains(where: { child($0, named: "SegmentTemplate") != nil }) {
                        let templates = levels.compactMap { child($0, named: "SegmentTemplate") }
                        (resources, timing) = segmentTemplate(
                            templates, base: representationBase, id: id, bandwidth: bandwidth, duration: duration,
                            limit: limit,
                            live: edge.map { ($0, start) }, child: child, kids: kids)
                    } else {
                        // SegmentBase, or nothing: the representation's base is one file.
                        resources = [
                            DASHPresentation.Resource(url: representationBase, range: nil, duration: duration ?? 0)
                        ]
                    }
                    budget = max(0, budget - resources.count)
                    let height = (attribute("height", representation) ?? attribute("height", set)).flatMap {
                        HLSPlaylist.decimal(Substring($0))
                    }
                    representations.append(
                        DASHPresentation.Representation(
                            element: representation, id: id, bandwidth: bandwidth, resources: resources, height: height,
                            timing: timing))
                }
                let first = kids(set, named: "Representation").first
                let isTrickPlay = (kids(set, named: "EssentialProperty") + kids(set, named: "SupplementalProperty"))
                    .contains {
                        attribute("schemeIdUri", $0) == "http://dashif.org/guidelines/trickmode"
                    }
                let type =
                    attribute("contentType", set)
                    ?? (attribute("mimeType", set) ?? attribute("mimeType", first))?.split(separator: "/").first.map(
                        String.init)
                let codecs = attribute("codecs", set) ?? attribute("codecs", first) ?? ""
                var content: DASHPresentation.Content? =
                    switch type?.lowercased() {
                    case "video": .video
                    case "audio": .audio
                    case "text": .text
                    case "image": .images
                    case "application": codecs.hasPrefix("stpp") || codecs.hasPrefix("wvtt") ? .text : nil
                    default: nil
                    }
                if isTrickPlay, content == .video || content == nil { content = .trickPlay }
                sets.append(
                    DASHPresentation.AdaptationSet(
                        element: set, representations: representations, content: content,
                        language: attribute("lang", set),
                        roles: kids(set, named: "Role").compactMap { attribute("value", $0) }))
            }
            periods.append(
                DASHPresentation.Period(
                    adaptationSets: sets, duration: duration, start: start,
                    id: attribute("id", period) ?? String(position)))
        }
        return DASHPresentation(periods: periods, isDynamic: isDynamic)
    }

    /// The resources of a `SegmentList`: its initialization and at most `limit` segments.
    private func segmentList(
        _ list: Int, base: URL, id: String, bandwidth: Int64, limit: Int, child: (Int, String) -> Int?,
        kids: (Int, String) -> [Int]
    ) -> ([DASHPresentation.Resource], DASHPresentation.Timing) {
        var resources: [DASHPresentation.Resource] = []
        func value(_ name: String) -> String? { Self.attribute(name, of: elements[list], in: bytes) }
        var timing = DASHPresentation.Timing(
            timescale: value("timescale").flatMap { Int64($0) }.map { max(1, $0) } ?? 1)
        timing.offset = value("presentationTimeOffset").flatMap { Int64($0) } ?? 0
        let units = value("duration").flatMap { Int64($0) }.map { max(0, $0) } ?? 0
        let startNumber = value("startNumber").flatMap { HLSPlaylist.decimal(Substring($0)) } ?? 1
        if let initialization = child(list, "Initialization") {
            let source = Self.attribute("sourceURL", of: elements[initialization], in: bytes)
            if let url = source.map({ Self.resolve($0, against: base) }) ?? base {
                resources.append(
                    .init(
                        url: url,
                        range: Self.attribute("range", of: elements[initialization], in: bytes).flatMap(Self.byteRange),
                        duration: 0))
                timing.initialization = url
            }
        }
        for (index, segment) in kids(list, "SegmentURL").prefix(limit).enumerated() {
            let media = Self.attribute("media", of: elements[segment], in: bytes)
            guard let url = media.map({ Self.resolve($0, against: base) }) ?? base else { continue }
            let time = Int64(index).multipliedReportingOverflow(by: units)
            resources.append(
                .init(
                    url: url,
                    range: Self.attribute("mediaRange", of: elements[segment], in: bytes).flatMap(Self.byteRange),
                    duration: Double(units) / Double(timing.timescale), number: startNumber &+ Int64(index),
                    time: time.overflow ? nil : timing.offset &+ time.partialValue, units: units))
        }
        return (resources, timing)
    }

    /// The resources of the `SegmentTemplate`s of a representation's levels: its
    /// initialization and at most `limit` segments. With `live` (the live edge and the period's
    /// start), a live template lists the segments available at the edge.
    private func segmentTemplate(
        _ templates: [Int], base: URL, id: String, bandwidth: Int64, duration: Double?, limit: Int,
        live: (LiveEdge, Double)?,
        child: (Int, String) -> Int?, kids: (Int, String) -> [Int]
    ) -> ([DASHPresentation.Resource], DASHPresentation.Timing) {
        // The nearest level's attribute wins.
        func value(_ name: String) -> String? {
            templates.reversed().lazy.compactMap { Self.attribute(name, of: self.elements[$0], in: self.bytes) }.first
        }
        var timing = DASHPresentation.Timing(
            timescale: value("timescale").flatMap { Int64($0) }.map { max(1, $0) } ?? 1)
        timing.offset = value("presentationTimeOffset").flatMap { Int64($0) } ?? 0
        let timescale = Double(timing.timescale)
        let startNumber = value("startNumber").flatMap { HLSPlaylist.decimal(Substring($0)) } ?? 1
        var resources: [DASHPresentation.Resource] = []
        if let initialization = value("initialization"),
            let url = Self.expand(initialization, id: id, bandwidth: bandwidth, number: nil, time: nil).flatMap({
                Self.resolve($0, against: base)
            })
        {
            resources.append(.init(url: url, range: nil, duration: 0))
            timing.initialization = url
        }
        guard let media = value("media") else { return (resources, timing) }
        // (number, time, units) of each segment.
        var segments: [(Int64, Int64, Int64)] = []
        if let timeline = templates.reversed().compactMap({ child($0, "SegmentTimeline") }).first {
            timing.byTime = true
            var number = startNumber
            var time: Int64 = 0
            var reachesEdge = false
            let entries = kids(timeline, "S")
            // The media time the live edge is at, for a last `r="-1"`.
            var edge = live.map { edge, start in
                timing.offset &+ Self.clampedInteger((edge.elapsed - start) * timescale, limit: .max / 2)
            }
            if !isDynamic, let duration {
                edge = timing.offset &+ Self.clampedInteger(duration * timescale, limit: .max / 2)
            }
            // The media time the time shift buffer begins at (a minute, when the manifest does not say).
            let bufferStart = live.map { edge, start in
                timing.offset
                    &+ Self.clampedInteger(
                        (edge.elapsed - (edge.window ?? LiveEdge.defaultWindow) - start) * timescale, limit: .max / 2)
            }
            for (position, entry) in entries.enumerated() where segments.count < limit {
                let s = elements[entry]
                if let t = Self.attribute("t", of: s, in: bytes).flatMap({ Int64($0) }) { time = t }
                guard let d = Self.attribute("d", of: s, in: bytes).flatMap({ Int64($0) }), d > 0 else { break }
                var repeats = Self.attribute("r", of: s, in: bytes).flatMap { Int64($0) } ?? 0
                if repeats < 0 {
                    // To the next S's time, or (the last) to the live edge or the period's end; else unknown.
                    let next = entries.dropFirst(position + 1).first.flatMap {
                        Self.attribute("t", of: elements[$0], in: bytes)
                    }.flatMap { Int64($0) }
                    guard let end = next ?? edge, end > time else { break }
                    if next == nil, let earliest = bufferStart {
                        // Straight to the time shift buffer's start: what is older is gone (and
                        // the newest must not fall past the limit).
                        reachesEdge = true
                        if earliest > time {
                            let skip = min(earliest - time, end - time) / d
                            number &+= skip
                            time &+= skip * d
                        }
                    }
                    repeats = (end - time) / d - 1
                    guard repeats >= 0 else { break }
                }
                // Each S repeats at most up to the limit: a huge `r` costs no more than that.
                for _ in 0...min(repeats, Int64(limit - segments.count - 1)) {
                    segments.append((number, time, d))
                    number += 1
                    time = time.addingReportingOverflow(d).partialValue
                }
            }
            if reachesEdge, let earliest = bufferStart {
                // A timeline run to the live edge: only what is in the time shift buffer (what
                // the manifest lists one by one is the origin's word, whatever this clock says).
                segments.removeAll { $0.1 &+ $0.2 <= earliest }
            }
        } else if let each = value("duration").flatMap({ Int64($0) }), each > 0 {
            let seconds = Double(each) / timescale
            var first: Int64 = 0
            var count: Int64 = 0
            if let (edge, start) = live {
                // Segment i is available once it has ended: at start + (i + 1) * seconds.
                let elapsed = min(edge.elapsed - start, duration ?? .infinity)
                let available = Self.clampedInteger((elapsed / seconds).rounded(.down), limit: .max / 2)
                first = max(
                    0,
                    Self.clampedInteger(
                        ((elapsed - (edge.window ?? LiveEdge.defaultWindow)) / seconds).rounded(.down), limit: .max / 2)
                )
                first = max(first, available - Int64(limit))
                count = max(0, available - first)
            } else if let duration, duration > 0, !isDynamic {
                // Checked conversions: a manifest's numbers may make any ratio or product (a
                // duration of 1e300 in segments of 1e-300 s once trapped here).
                count = Self.clampedInteger((duration / seconds).rounded(.up), limit: Int64(limit))
            }
            for index in first..<(first + count) {
                let time = index.multipliedReportingOverflow(by: each)
                guard !time.overflow else { break }
                segments.append((startNumber &+ index, timing.offset &+ time.partialValue, each))
            }
        }
        for (number, time, units) in segments {
            guard let text = Self.expand(media, id: id, bandwidth: bandwidth, number: number, time: time),
                let url = Self.resolve(text, against: base)
            else { continue }
            var seconds = Double(units) / timescale
            if live == nil, !timing.byTime, let duration {
                // The last segment of a static template ends with the period.
                seconds = max(0, min(seconds, duration - Double(time &- timing.offset) / timescale))
            }
            resources.append(.init(url: url, range: nil, duration: seconds, number: number, time: time, units: units))
        }
        return (resources, timing)
    }

    /// `value` as an integer within `0...limit`: `limit` for anything larger (infinity too),
    /// 0 for anything smaller or not a number.
    static func clampedInteger(_ value: Double, limit: Int64) -> Int64 {
        guard value > 0 else { return 0 }  // NaN as well
        return value < Double(limit) ? Int64(value) : limit
    }

    /// `a-b` (inclusive) as a byte range.
    static func byteRange(_ text: String) -> ByteRange? {
        let parts = text.split(separator: "-", maxSplits: 1)
        guard parts.count == 2, let first = HLSPlaylist.decimal(parts[0]), let last = HLSPlaylist.decimal(parts[1]),
            first <= last,
            last < ByteRange.maximumOffset
        else { return nil }
        return ByteRange(first, last + 1)
    }

    /// A template with its identifiers substituted (ISO/IEC 23009-1 §5.3.9.4.4): `$$`,
    /// `$RepresentationID$`, `$Bandwidth$`, `$Number$`, `$Time$`, each number with an optional
    /// `%0Nd` width; `nil` for an identifier it does not know or cannot fill.
    static func expand(_ template: String, id: String, bandwidth: Int64, number: Int64?, time: Int64?) -> String? {
        var output = ""
        var rest = Substring(template)
        while let dollar = rest.firstIndex(of: "$") {
            output += rest[..<dollar]
            let after = rest[rest.index(after: dollar)...]
            guard let close = after.firstIndex(of: "$") else { return nil }
            let identifier = after[..<close]
            rest = after[after.index(after: close)...]
            if identifier.isEmpty {
                output += "$"
                continue
            }
            let parts = identifier.split(separator: "%", maxSplits: 1)
            let name = parts.first.map(String.init) ?? ""
            var width = 0
            if parts.count == 2 {
                let format = parts[1]
                guard format.hasPrefix("0"), format.hasSuffix("d"), let n = Int(format.dropFirst().dropLast()),
                    (1...20).contains(n)
                else { return nil }
                width = n
            }
            let value: String
            switch name {
            case "RepresentationID": value = id
            case "Bandwidth": value = String(bandwidth)
            case "Number":
                guard let number else { return nil }
                value = String(number)
            case "Time":
                guard let time else { return nil }
                value = String(time)
            default: return nil
            }
            let digits =
                name == "RepresentationID" ? value : String(repeating: "0", count: max(0, width - value.count)) + value
            output += digits
        }
        return output + rest
    }
}
