// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation

/// Reads of resources whose length the origin does not say: streamed through from one `GET`,
/// shared while the body grows (``GrowingBody``), and written to the store as they pass when
/// whole and storable. Reads through its ``CachingReader`` (``CachingReader/lengthless``); keeps
/// nothing of its own.
package struct LengthlessReads: Sendable {
    let reader: CachingReader

    /// A read of a resource whose length the origin does not say (a chunked or
    /// close-delimited body: internet radio, a generated file, a low-latency HLS segment
    /// still being made): one `GET`, streamed straight to this reader from `offset` until the
    /// body ends, shared with every read that starts at the same byte while it comes
    /// (``GrowingBody``). It asks for the read's range, so an origin that
    /// serves a growing resource by range (`206` with `bytes a-b/*`) sends the bytes from
    /// `offset` as they are made; one that answers whole is read from its start. A whole read
    /// of a storable body is also written to a new entry, which becomes complete when the body
    /// ends. The stream's range then ends at ``ByteRange/maximumOffset`` or the part's end.
    func read(
        _ url: URL, key: CacheKey, offset: Int64, length: Int64?, headers: RequestHeaders, as requester: Requester
    ) async throws -> ReadStream {
        let asked = ByteRange(
            offset, length.map { min(offset + $0, ByteRange.maximumOffset) } ?? ByteRange.maximumOffset)
        let response: OriginResponse
        if let held = reader.scheduler.takeReservedBody(key), held.bodyOffset == 0 || held.bodyOffset == offset {
            response = held  // the probe's, held for this read (see `contentInfoForRead`)
        } else if let joined = joinGrowing(key, at: offset) {
            response = joined  // another read's, still coming: shared
        } else {
            let range = asked == ByteRange(0, ByteRange.maximumOffset) || asked.isEmpty ? nil : asked
            let fetched = try await reader.fetcher.fetch(
                url, range: range, ifRange: nil, headers: headers, as: requester)
            response = fetched.metadata.length == nil ? reader.validator.sharing(fetched, key: key) : fetched
        }
        try response.check(askedFrom: offset, known: nil, url: url, logger: reader.configuration.logger)
        let end = min(
            asked.upperBound, response.metadata.length ?? ByteRange.maximumOffset,
            response.bodyEnd ?? ByteRange.maximumOffset)
        guard offset < end || (offset == 0 && end == 0) else {
            var error = CacheError(.rangeNotSatisfiable, "The range starts at \(offset), past the end of the resource.")
            error.resourceLength = response.metadata.length
            throw error
        }
        let range = ByteRange(offset, end)
        // A whole read of a storable body writes it to a new entry as it passes; the entry
        // gets its length when the body ends (see `ReadSession.PassThrough`). One such
        // writer per resource at a time. (Not a part of a resource of unknown length: where
        // a part ends says nothing of where the resource does.)
        var writer: CacheEntryHandle?
        if offset == 0, length == nil, response.bodyEnd == nil, response.metadata.isStorable,
            reader.context.passThroughWriters.withLock({ $0.insert(key).inserted })
        {
            // An entry without a length is the leftover of a writer that did not finish.
            if let stale = reader.store.metadata(for: key), stale.length == nil { try? await reader.store.remove(key) }
            if reader.store.metadata(for: key) == nil, let handle = try? reader.store.openEntry(key),
                (try? handle.updateMetadata(response.metadata)) != nil
            {
                writer = handle
            } else {
                reader.context.passThroughWriters.withLock { _ = $0.remove(key) }
            }
        }
        reader.configuration.logger.info(
            "Streaming an answer without a length through",
            metadata: ["url": "\(url.absoluteString.prefix(200))", "stores": "\(writer != nil)"])
        let session = ReadSession(
            context: reader.context, url: url, key: key, range: range, headers: headers, handle: nil,
            requester: requester,
            passThrough: ReadSession.PassThrough(body: response.body, offset: response.bodyOffset, writer: writer))
        var stream = ReadStream(metadata: response.metadata, range: range, session: session)
        stream.isPartOfUnknownLength = response.metadata.length == nil && response.bodyEnd != nil
        return stream
    }

    /// Whether a read is writing the body without a length of `url` to the store, or removing
    /// what an unfinished one left (a new whole read stores it only once this is over).
    package func isWritingThrough(_ url: URL) -> Bool {
        let key = reader.store.key(for: url)
        return reader.context.passThroughWriters.withLock { $0.contains(key) }
    }

    /// A reader of the body without a length coming for `key` from `offset`, if one may be joined.
    private func joinGrowing(_ key: CacheKey, at offset: Int64) -> OriginResponse? {
        guard let growing = reader.validator.growingBodies.withLock({ $0[key] }), growing.bodyOffset == offset,
            let subscriber = growing.subscribe()
        else { return nil }
        var response = OriginResponse(metadata: growing.metadata, bodyOffset: growing.bodyOffset, body: subscriber)
        response.bodyEnd = growing.bodyEnd
        return response
    }
}

extension CachingReader {
    /// Reads of resources whose length the origin does not say (``LengthlessReads``).
    package var lengthless: LengthlessReads { LengthlessReads(reader: self) }
}
