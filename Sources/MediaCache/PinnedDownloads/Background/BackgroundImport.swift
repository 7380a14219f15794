// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCacheHTTPFields

/// Whether a file a system transfer session downloaded is what its `BackgroundTransfer`
/// asked for, and what it says of the resource: pure, so every answer an origin may give is
/// tested without a session.
package enum BackgroundImport {
    /// The verdict on one finished download.
    package enum Verdict: Sendable, Equatable {
        /// Its bytes are `range` of the resource, of the version `metadata` describes.
        case store(range: ByteRange, metadata: ContentMetadata)
        /// Not stored, and why (said in the warning).
        case reject(String)
    }

    /// Judges the answer (`status`, `fields`) whose body the session saved as a file of
    /// `fileLength` bytes, to `transfer`'s request. A `206` must carry the range asked for,
    /// with the total length; a `200` is the whole resource (an origin that ignores ranges),
    /// taken whole. `Content-Length`, when sent, must agree with the file. Every number is
    /// parsed strictly and within ``ByteRange/maximumOffset``.
    package static func verdict(
        for transfer: BackgroundTransfer, status: Int, fields: [ContentMetadata.HeaderField], fileLength: Int64
    ) -> Verdict {
        func field(_ name: String) -> String? {
            fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
        var metadata = ContentMetadata(
            length: nil, mimeType: field("content-type"),
            acceptsRanges: field("accept-ranges")?.lowercased() == "bytes",
            etag: field("etag"), lastModified: field("last-modified"))
        metadata.isStorable = !CacheControl(fields.filter { $0.name.lowercased() == "cache-control" }.map(\.value))
            .noStore
        metadata.responseHeaders = Array(
            fields.filter {
                let name = $0.name.lowercased()
                return !ContentMetadata.HeaderField.notStored.contains(name) && !name.hasPrefix("access-control-")
            }
            .prefix(64))
        guard metadata.isStorable else { return .reject("the origin forbids storing it (no-store)") }
        guard (0..<ByteRange.maximumOffset).contains(fileLength) else {
            return .reject("the file has \(fileLength) bytes")
        }
        if let text = field("content-length") {
            guard let declared = HTTPNumber.strict(text.trimmingHTTPWhitespace()), declared == fileLength else {
                return .reject("Content-Length \(text.prefix(40)) does not match the \(fileLength) bytes received")
            }
        }
        switch status {
        case 206:
            guard let text = field("content-range"), let contentRange = ContentRange(parsing: text),
                let bounds = contentRange.bounds, let total = contentRange.totalLength
            else { return .reject("a 206 without a complete Content-Range") }
            let got = ByteRange(bounds.lowerBound, bounds.upperBound)
            guard got == transfer.range || (transfer.range == nil && got.lowerBound == 0) else {
                return .reject(
                    "Content-Range \(text.prefix(80)) for \(transfer.rangeField ?? "the whole resource")")
            }
            guard got.length == fileLength, got.upperBound <= total else {
                return .reject("Content-Range \(text.prefix(80)) with \(fileLength) bytes received")
            }
            metadata.length = total
            metadata.acceptsRanges = true
            return .store(range: got, metadata: metadata)
        case 200:
            guard fileLength > 0 || transfer.range == nil else { return .reject("an empty 200 to a range request") }
            metadata.length = fileLength
            if transfer.range != nil { metadata.acceptsRanges = false }
            return fileLength == 0
                ? .reject("an empty resource") : .store(range: ByteRange(0, fileLength), metadata: metadata)
        default:
            return .reject("the origin answered \(status)")
        }
    }
}
