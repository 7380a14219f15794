import Foundation
import Logging
import NIOCore

/// Moves one download's bytes from the origin into the store and to its readers: asks for
/// them (doubling request sizes, never asking for bytes the store has), checks each answer,
/// stores each chunk and then delivers it to the ``Download`` (which wakes only the readers
/// waiting for it), and resumes a broken connection. Runs on the download's own task.
struct OriginTransfer: Sendable {
    let reader: CachingReader
    let download: Download
    /// An answer that was already asked for (the probe's), used for the first request.
    let firstResponse: OriginResponse?

    private var configuration: CachingReader.Configuration { reader.configuration }
    private var url: URL { download.url }

    func run() async {
        let handle = download.stores ? try? reader.store.openEntry(download.key) : nil
        defer {
            handle?.close()
            // Every way out ends the download, so no reader waits on a transfer that is gone.
            download.fail(CacheError(.originUnavailable, "The origin download of \(url.absoluteString) stopped."))
        }
        var storeWorks = handle != nil
        var firstResponse = firstResponse
        while !download.isFinished, !Task.isCancelled {
            let position = download.position
            if position >= download.end {
                download.complete()
                return
            }
            // Each request asks for as many bytes as were delivered so far, within the bounds.
            let delivered = position - download.start
            var requestEnd = download.isFullBody ? download.end
                : min(download.end, position + min(configuration.maximumRequest, max(configuration.minimumRequest, delivered)))
            if !download.isFullBody, firstResponse == nil, let spans = try? handle?.spans() {
                // Never ask the origin for bytes the store has: another download may have
                // stored them since this one was planned.
                guard let hole = spans.holes(in: ByteRange(position, requestEnd)).first, hole.lowerBound == position else {
                    download.complete()
                    return
                }
                requestEnd = hole.upperBound
            }
            do {
                let stored = try handle?.metadata()
                let response: OriginResponse
                if let first = firstResponse {
                    response = first
                    firstResponse = nil
                } else {
                    response = try await reader.fetcher.fetch(url, range: download.isFullBody ? nil : ByteRange(position, requestEnd),
                                                              ifRange: stored?.ifRangeValidator, headers: download.headers)
                }
                try reader.checked(response, askedFrom: position, known: stored, url: url)
                if !response.metadata.isStorable { storeWorks = false }  // `no-store`: stream it through
                if let handle, let stored, !stored.isSameVersion(as: response.metadata) {
                    try handle.updateMetadata(response.metadata)
                    configuration.logger.info("Resource changed at the origin; dropped the cached version", metadata: ["url": "\(url)"])
                    download.fail(CacheError(.resourceChanged, "\(url.absoluteString) changed at the origin while it was being read."))
                    return
                }
                try handle?.updateMetadata(response.metadata)
                reader.markValidated(download.key)
                download.responseReceived()
                switch try await receive(response, until: requestEnd, into: storeWorks ? handle : nil) {
                case .done: break
                case .stop: return
                case .storeFailed: storeWorks = false
                }
                if download.position < requestEnd, !download.isFinished, !Task.isCancelled {
                    throw CacheError(.originUnavailable, "The origin's response ended at \(download.position) before \(requestEnd).")
                }
            } catch {
                if download.isFinished || Task.isCancelled { return }
                let cacheError = error as? CacheError
                let retryable = cacheError.map { [.originUnavailable, .originTimedOut].contains($0.code) } ?? true
                let finalError = cacheError ?? CacheError(.originUnavailable, "The origin connection failed and could not be resumed.", underlyingError: error)
                guard let attempt = download.requestFailed(finalError, retryable: retryable, maxRetries: configuration.maxRetries) else { return }
                configuration.logger.warning("Resuming an origin download", metadata: ["url": "\(url)", "at": "\(download.position)", "error": "\(error)"])
                try? await Task.sleep(for: configuration.retryDelay * attempt)
                download.resuming()
            }
        }
    }

    private enum BodyEnd {
        /// The body reached `requestEnd` or ended.
        case done
        /// The download is over (its readers left, or another download stored the rest).
        case stop
        /// A write failed: the rest goes to readers from memory only.
        case storeFailed
    }

    /// Stores and delivers the body's bytes from the download's position up to `requestEnd`.
    private func receive(_ response: OriginResponse, until requestEnd: Int64, into handle: CacheEntryHandle?) async throws -> BodyEnd {
        var offset = response.bodyOffset
        var handle = handle
        var result = BodyEnd.done
        for try await var chunk in response.body {
            let chunkStart = offset
            offset += Int64(chunk.readableBytes)
            if download.isFinished || Task.isCancelled { return .stop }
            let position = download.position
            guard offset > position else { continue }  // before what is wanted (a full body)
            // The body is contiguous and every byte before `offset` was delivered or skipped,
            // so the position is never past `chunkStart` while the download runs.
            guard chunkStart <= position else { return .stop }
            chunk.moveReaderIndex(forwardBy: Int(position - chunkStart))
            if Int64(chunk.readableBytes) > requestEnd - position {
                chunk = chunk.getSlice(at: chunk.readerIndex, length: Int(requestEnd - position))!
            }
            await download.pace(readAhead: configuration.readAhead)
            if download.isFinished || Task.isCancelled { return .stop }
            var isStored = false
            if let writer = handle {
                if !download.isFullBody, (try? writer.spans().span(containing: position)) != nil {
                    // Another download stored these bytes first: stop here, the readers go on from the store.
                    download.complete()
                    return .stop
                }
                do {
                    try await writer.write(chunk, at: position)
                    isStored = true
                } catch let error as CacheError where error.code == .entryInvalidated {
                    throw CacheError(.resourceChanged, "\(url.absoluteString) changed at the origin while it was being read.")
                } catch let error where error is CancellationError || Task.isCancelled {
                    return .stop  // the last reader left during the write; nobody needs the bytes
                } catch {
                    configuration.logger.warning("Cannot store fetched bytes; streaming them uncached", metadata: ["url": "\(url)", "error": "\(error)"])
                    handle = nil
                    result = .storeFailed
                }
            }
            download.deliver(chunk, isStored: isStored)
            if download.position >= requestEnd { break }
        }
        return result
    }
}
