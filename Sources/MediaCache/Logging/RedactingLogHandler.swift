// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Logging

/// Keeps the secrets URLs carry out of logs: wraps a log handler and, unless its level is
/// `debug` or `trace`, replaces every query value and every user-info part of what it logs with
/// `REDACTED` (message and metadata). Signed media URLs carry their signature, expiry and key
/// in the query (`?Expires=…&Signature=…&Key-Pair-Id=…`, `?token=…`); a log that holds them
/// hands out working links to whoever reads it. The names stay, so a line still says which URL
/// it was about; at `debug` the whole URL is logged, for a developer chasing a problem.
///
/// `mediacache serve` logs through it; an app can too:
/// ```swift
/// LoggingSystem.bootstrap { RedactingLogHandler(StreamLogHandler.standardError(label: $0)) }
/// ```
package struct RedactingLogHandler: LogHandler {
    private var wrapped: any LogHandler

    /// Wraps `handler`.
    public init(_ handler: any LogHandler) {
        wrapped = handler
    }

    public var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    public var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        guard logLevel > .debug else { return wrapped.log(event: event) }
        var redacted = event
        redacted.message = Logger.Message(stringLiteral: LogRedaction.redact(event.message.description))
        redacted.metadata = event.metadata?.mapValues(Self.redact)
        wrapped.log(event: redacted)
    }

    private static func redact(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(LogRedaction.redact(text))
        case .stringConvertible(let item): .string(LogRedaction.redact(item.description))
        case .array(let items): .array(items.map(redact))
        case .dictionary(let items): .dictionary(items.mapValues(redact))
        }
    }
}

/// The rewriting ``RedactingLogHandler`` applies to text, on its UTF-8 bytes.
///
/// Text is cut into runs at whitespace and quotes (`"`, `'`, `` ` ``, `<`, `>`). In a run, the
/// query begins at the first `?` that comes before any `#` and ends at the next `#` or the run's
/// end; each of its `&`-separated parts keeps its name and `=` and loses its value (a part
/// without `=` is all value). The user-info of each `scheme://user:password@host` before the
/// query is replaced too. Everything else is kept byte for byte, and redacting twice changes
/// nothing more.
package enum LogRedaction {
    /// What replaces a value.
    package static let marker = "REDACTED"

    /// `text` with its query values and user-info replaced by ``marker``.
    package static func redact(_ text: String) -> String {
        // Most lines name no URL with a query or a user: nothing to copy.
        guard text.utf8.contains(where: { $0 == question || $0 == at }) else { return text }
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 32)
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count, !isBoundary(bytes[end]) { end += 1 }
            redactRun(bytes[start..<end], into: &out)
            if end < bytes.count { out.append(bytes[end]) }
            start = end + 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let (question, at, hash, ampersand, equals, slash, colon) =
        (
            UInt8(ascii: "?"), UInt8(ascii: "@"), UInt8(ascii: "#"), UInt8(ascii: "&"), UInt8(ascii: "="),
            UInt8(ascii: "/"), UInt8(ascii: ":")
        )
    private static let markerBytes = Array(marker.utf8)

    /// Whether `byte` ends a run: ASCII whitespace or a quote or bracket that ends a URL in prose.
    package static func isBoundary(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x20, 0x09, 0x0A, 0x0D, 0x0B, 0x0C, UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "`"),
            UInt8(ascii: "<"), UInt8(ascii: ">"):
            true
        default: false
        }
    }

    private static func redactRun(_ run: ArraySlice<UInt8>, into out: inout [UInt8]) {
        let headEnd = run.firstIndex { $0 == question || $0 == hash } ?? run.endIndex
        var index = run.startIndex
        while index < headEnd {
            if run[index] == colon, index + 2 < headEnd, run[index + 1] == slash, run[index + 2] == slash {
                out.append(contentsOf: run[index...(index + 2)])
                index += 3
                let authorityEnd = run[index..<headEnd].firstIndex(of: slash) ?? headEnd
                if let userEnd = run[index..<authorityEnd].lastIndex(of: at) {
                    out.append(contentsOf: markerBytes)
                    index = userEnd
                }
                continue
            }
            out.append(run[index])
            index += 1
        }
        guard headEnd < run.endIndex, run[headEnd] == question else {
            out.append(contentsOf: run[headEnd...])
            return
        }
        out.append(question)
        let queryEnd = run[(headEnd + 1)...].firstIndex(of: hash) ?? run.endIndex
        var partStart = headEnd + 1
        while true {
            let partEnd = run[partStart..<queryEnd].firstIndex(of: ampersand) ?? queryEnd
            if let equalsSign = run[partStart..<partEnd].firstIndex(of: equals) {
                out.append(contentsOf: run[partStart...equalsSign])
                if equalsSign + 1 < partEnd { out.append(contentsOf: markerBytes) }
            } else if partStart < partEnd {
                out.append(contentsOf: markerBytes)
            }
            guard partEnd < queryEnd else { break }
            out.append(ampersand)
            partStart = partEnd + 1
        }
        out.append(contentsOf: run[queryEnd...])
    }
}
