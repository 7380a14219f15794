// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
package import MediaCache

/// A prefetch, pin or export as the command line and the admin endpoints describe it.
package struct PrefetchRequest: Sendable, Equatable {
    package var range: ByteRange?
    package var seconds: Double?
    /// What of an HLS asset or a DASH presentation; parts left unsaid are empty (see ``RenditionChoice``).
    package var renditions = RenditionChoice()

    package init(range: ByteRange? = nil, seconds: Double? = nil, renditions: RenditionChoice = RenditionChoice()) {
        self.range = range
        self.seconds = seconds
        self.renditions = renditions
    }

    package init(range: ByteRange? = nil, seconds: Double? = nil, variant: HLSPrefetchOptions.VariantChoice) {
        self.init(range: range, seconds: seconds, renditions: RenditionChoice(variants: [variant]))
    }

    /// The first variant chosen (`.first` when none is said).
    package var variant: HLSPrefetchOptions.VariantChoice { renditions.variants.first ?? .first }

    /// The options an admin endpoint's query gives (``queryItems``).
    /// - Throws: `ProxyRequestError` (400) that says which is wrong.
    init(reading query: AdminQueryItems) throws {
        do {
            self = try Self.parse(
                range: query.value("range"), seconds: query.value("seconds"), variant: query.value("variant"),
                audio: query.value("audio"), subtitles: query.value("subtitles"), trickPlay: query.value("trick-play"),
                subtitleFiles: query.values("subtitle-file"))
        } catch {
            throw ProxyRequestError(status: .badRequest, error.message { $0 + "=" })
        }
    }

    /// The query an admin endpoint reads these options from.
    package var queryItems: [URLQueryItem] {
        var items: [URLQueryItem] = []
        if let range { items.append(URLQueryItem(name: "range", value: "\(range.lowerBound)-\(range.upperBound - 1)")) }
        if let seconds { items.append(URLQueryItem(name: "seconds", value: String(seconds))) }
        if let variant = renditions.variants.first {
            items.append(URLQueryItem(name: "variant", value: Self.text(of: variant)))
        }
        if let audio = renditions.audio { items.append(URLQueryItem(name: "audio", value: audio.text)) }
        if let subtitles = renditions.subtitles { items.append(URLQueryItem(name: "subtitles", value: subtitles.text)) }
        if renditions.trickPlay { items.append(URLQueryItem(name: "trick-play", value: "yes")) }
        for track in renditions.sideLoaded {
            items.append(
                URLQueryItem(
                    name: "subtitle-file", value: "\(track.language)=\(track.url.absoluteString),\(track.name)"))
        }
        return items
    }

    /// Parses the options' text forms: `range` `a-b` (inclusive, as in HTTP), `seconds` a
    /// positive number, `variant` `first`, `lowest`, `highest`, a height (`720p`) or a number
    /// of bits per second; `audio` and `subtitles` as ``RenditionChoice/Languages/parse(_:option:)``
    /// reads them; `trickPlay` `yes` or `no`; each of `subtitleFiles` `LANG=URL[,NAME]`
    /// (``SideLoadedSubtitle/init(parsing:)``).
    package static func parse(
        range: String?, seconds: String?, variant: String?, audio: String? = nil, subtitles: String? = nil,
        trickPlay: String? = nil, subtitleFiles: [String] = []
    ) throws(PrefetchRequestError) -> PrefetchRequest {
        var request = PrefetchRequest()
        if let range {
            let parts = range.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let first = HLSPlaylist.decimal(parts[0]), let last = HLSPlaylist.decimal(parts[1]),
                first <= last,
                last < ByteRange.maximumOffset
            else {
                throw PrefetchRequestError("range", takes: "a-b, the first and last byte (0-1048575)", given: range)
            }
            request.range = ByteRange(first, last + 1)
        }
        if let seconds {
            guard let value = Double(seconds), value.isFinite, value > 0, value <= 1e7 else {
                throw PrefetchRequestError("seconds", takes: "a positive number of seconds", given: seconds)
            }
            request.seconds = value
        }
        switch variant?.lowercased() {
        case nil: break
        case "first": request.renditions.variants = [.first]
        case "lowest": request.renditions.variants = [.lowestBandwidth]
        case "highest": request.renditions.variants = [.highestBandwidth]
        case let text?:
            if text.hasSuffix("p"), let height = HLSPlaylist.decimal(text.dropLast()), height > 0, height <= 1 << 20 {
                request.renditions.variants = [.atMostHeight(height)]
            } else if let bps = HLSPlaylist.decimal(Substring(text)), bps > 0 {
                request.renditions.variants = [.atMost(bitsPerSecond: bps)]
            } else {
                throw PrefetchRequestError(
                    "variant", takes: "first, lowest, highest, a height (720p) or a number of bits per second",
                    given: text)
            }
        }
        if let audio { request.renditions.audio = try RenditionChoice.Languages.parse(audio, option: "audio") }
        if let subtitles {
            request.renditions.subtitles = try RenditionChoice.Languages.parse(subtitles, option: "subtitles")
        }
        switch trickPlay?.lowercased() {
        case nil, "no", "false", "0": break
        case "yes", "true", "1": request.renditions.trickPlay = true
        case let text?: throw PrefetchRequestError("trick-play", takes: "yes or no", given: text)
        }
        for text in subtitleFiles {
            guard let track = SideLoadedSubtitle(parsing: text) else {
                throw PrefetchRequestError(
                    "subtitle-file", takes: "LANG=URL[,NAME]: a language tag, an http(s) URL, a name", given: text)
            }
            request.renditions.sideLoaded.append(track)
        }
        return request
    }

    /// The text form of `variant` that ``parse(range:seconds:variant:audio:subtitles:trickPlay:subtitleFiles:)`` reads.
    package static func text(of variant: HLSPrefetchOptions.VariantChoice) -> String {
        switch variant {
        case .first: "first"
        case .lowestBandwidth: "lowest"
        case .highestBandwidth: "highest"
        case .atMost(let bps): String(bps)
        case .atMostHeight(let height): "\(height)p"
        }
    }

    /// Prefetches `url` through `source` (``AdminSource/prefetchAsset(_:range:options:progress:)``):
    /// an HLS asset or a DASH presentation as ``seconds`` and ``renditions`` say, else the file
    /// (``range`` applies).
    package func run(
        _ url: URL, source: any AdminSource, progress: @escaping @Sendable (PrefetchProgress) -> Void
    ) async throws -> PrefetchProgress {
        try await source.prefetchAsset(
            url, range: range, options: HLSPrefetchOptions(renditions: renditions, seconds: seconds),
            progress: progress)
    }
}
