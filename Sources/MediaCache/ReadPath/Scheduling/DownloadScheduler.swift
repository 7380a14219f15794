// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// Decides which download serves which reader, and when one starts or ends.
///
/// A reader at a hole joins a download under way that will soon reach its cursor, or gets a
/// new one that stops where another download already fetches, so no byte is asked for twice.
/// The reader is added to the download in the same step as the choice, so the download cannot
/// end for lack of readers in between. Each download's bytes are moved by an
/// ``OriginTransfer`` on a task of its own.
final class DownloadScheduler: Sendable {
    private let downloads = Mutex<[CacheKey: [SharedDownload]]>([:])
    /// What a probe got that exists nowhere else, held for the read that planned it until
    /// that read takes it or lets it go. The whole protocol, in one place:
    ///
    /// 1. A front door that reads next asks with ``CachingReader/contentInfoForRead(_:from:length:headers:)``
    ///    (the probe is the read's first origin request).
    /// 2. `CachingReader.adopt` holds a reader on the probe's download for the read
    ///    (``reserve(_:)``), so the download goes on until that read has joined it: otherwise
    ///    it would end when another reader left it first (a look at the body's first bytes),
    ///    and bytes that are not stored (`no-store`) would be lost. A body without a length is
    ///    held whole (``reserve(body:for:)``). One per resource, a newer one letting the older go.
    /// 3. The read takes it: ``ReadSession/joinReservedDownload()`` takes the held reader
    ///    (``takeReservation(_:at:)``), `passThrough` the held body (``takeReservedBody(_:)``).
    /// 4. Whatever the front door did, it calls ``CachingReader/releaseReservation(for:)`` when
    ///    its answer is planned (the proxy in a `defer` in `throughCache`): what was not taken
    ///    is let go (``Reservation/release()``), so a held download ends with its last reader
    ///    and a held body's request is dropped.
    private enum Reservation {
        /// A reader on a download that does not store (a `no-store` probe's).
        case download(SharedDownload, reader: UInt64)
        /// A body without a length (chunked or close-delimited), not yet read.
        case body(OriginResponse)

        /// Lets it go: the download loses its held reader (and ends if nobody else reads);
        /// the body is dropped, which ends its request.
        func release() {
            if case .download(let download, let reader) = self { download.removeReader(reader) }
        }
    }
    private let reservations = Mutex<[CacheKey: Reservation]>([:])
    private let configuration: CachingReader.Configuration
    /// Set by ``shutDown()``: a download started after it ends at once.
    private let isShutDown = Atomic<Bool>(false)

    /// Whether ``shutDown()`` was called.
    var hasShutDown: Bool { isShutDown.load(ordering: .acquiring) }

    init(configuration: CachingReader.Configuration) {
        self.configuration = configuration
    }

    /// What each running download fetches.
    var summaries: [DownloadSummary] {
        let all = downloads.withLock { $0.values.flatMap { $0 } }
        return all.map {
            DownloadSummary(url: $0.url.absoluteString, start: $0.start, end: $0.end, position: $0.position)
        }
    }

    /// How many downloads are running.
    var count: Int {
        downloads.withLock { $0.values.reduce(0) { $0 + $1.count } }
    }

    /// A download for the hole `cursor ..< holeEnd` of `key`, with a reader of `requester`'s
    /// added at `cursor` (whose read ends at `readEnd`): one under way that will soon reach
    /// `cursor`, or a new one (`isNew`), `requester`'s, registered but not started (see
    /// ``start(_:transfer:)``).
    func join(
        url: URL, key: CacheKey, cursor: Int64, holeEnd: Int64, readEnd: Int64, acceptsRanges: Bool, stores: Bool,
        headers: RequestHeaders, requester: Requester
    ) -> (download: SharedDownload, reader: UInt64, isNew: Bool) {
        downloads.withLock { downloads in
            let active = (downloads[key] ?? []).filter { !$0.isFinished }
            for candidate in active {
                let position = candidate.position
                // Bytes a download holds only in memory may be gone before a reader behind it.
                let unstored = candidate.holdsUnstoredBytes
                let reachable =
                    acceptsRanges
                    ? candidate.start <= cursor && cursor < candidate.end
                        && cursor <= position + configuration.joinDistance
                        && (!unstored || cursor >= position)
                    : candidate.isFullBody && (!unstored || cursor >= position)
                if reachable, let id = candidate.addReader(at: cursor, until: readEnd, for: requester) {
                    return (candidate, id, false)
                }
            }
            // Stop where another download already fetches, rather than fetch its bytes twice.
            let nextStart = active.filter { $0.start > cursor }.map(\.start).min() ?? holeEnd
            let download = makeDownload(
                url: url, key: key, start: cursor, end: acceptsRanges ? min(holeEnd, nextStart) : holeEnd,
                isFullBody: !acceptsRanges, stores: stores, headers: headers, startedBy: requester)
            let id = download.addReader(at: cursor, until: readEnd, for: requester)!
            // Ended downloads stay while their bytes are being written (see `waitForWrites`).
            let writing = (downloads[key] ?? []).filter {
                $0.isFinishedAndWriting(in: ByteRange(0, ByteRange.maximumOffset))
            }
            downloads[key] = writing + active + [download]
            return (download, id, true)
        }
    }

    /// Waits until no download of `key` that has ended is still writing bytes of `range` (its
    /// readers may have sent them already: a player that asks again at once must find them
    /// in the store, not fetch them a second time); whether it waited.
    func waitForWrites(_ key: CacheKey, in range: ByteRange) async -> Bool {
        let writing = downloads.withLock { ($0[key] ?? []).filter { $0.isFinishedAndWriting(in: range) } }
        for download in writing { await download.waitForStored(upTo: range.upperBound) }
        return !writing.isEmpty && !Task.isCancelled
    }

    /// Holds a reader of `requester`'s at `download`'s start for the read that will join it, in
    /// place of any reservation before (which is let go).
    func reserve(_ download: SharedDownload, for requester: Requester) {
        guard let id = download.addReader(at: download.start, until: download.end, for: requester) else { return }
        hold(.download(download, reader: id), for: download.key)
    }

    /// The first `length` bytes of the download held for `key` (a probe's, reserved for the read
    /// that answers), from memory as they arrive, the reservation left in place: what a look at
    /// the body's start reads, so that it waits neither for the store's write nor for a request
    /// of its own. `nil` when no held download fetches them from byte 0, or they are no longer
    /// in memory, or it ended first. `wait` runs each wait for more bytes.
    func reservedStart(of key: CacheKey, length: Int64, waiting wait: (() async -> Void) async -> Void) async
        -> [UInt8]?
    {
        guard case .download(let download, _)? = reservations.withLock({ $0[key] }), download.start == 0,
            download.end >= length
        else { return nil }
        while true {
            if let held = download.heldBytes(at: 0, joiningUpTo: Int(length)), held.readableBytes >= length {
                return Array(held.readableBytesView)
            }
            let snapshot = download.snapshot(at: 0)
            guard !snapshot.state.isTerminal, snapshot.position < length, !Task.isCancelled else { return nil }
            await wait { await download.waitForBytes(at: snapshot.position) }
        }
    }

    /// Holds a probe's body without a length for the read that will stream it, so that read
    /// costs no second request; in place of any reservation before (which is let go).
    func reserve(body response: OriginResponse, for key: CacheKey) {
        hold(.body(response), for: key)
    }

    private func hold(_ reservation: Reservation, for key: CacheKey) {
        let replaced = reservations.withLock { reservations in
            defer { reservations[key] = reservation }
            return reservations[key]
        }
        replaced?.release()
    }

    /// The download held for `key` with its reader, moved to `cursor` and made the reader of
    /// `requester`'s read that ends at `end`, when it fetches the bytes there; the reservation is
    /// then the caller's. (A newer request of the resource may take what an older one's probe
    /// left held, from another byte: the reader is the taker's from then on.)
    func takeReservation(_ key: CacheKey, at cursor: Int64, until end: Int64, for requester: Requester)
        -> (download: SharedDownload, reader: UInt64)?
    {
        let reserved = reservations.withLock { reservations -> (download: SharedDownload, reader: UInt64)? in
            guard case .download(let download, let reader)? = reservations[key], download.start <= cursor,
                cursor < download.end
            else { return nil }
            reservations[key] = nil
            return (download, reader)
        }
        reserved?.download.claim(reserved!.reader, at: cursor, until: end, for: requester)
        return reserved
    }

    /// The body without a length held for `key`, if any; it is then the caller's.
    func takeReservedBody(_ key: CacheKey) -> OriginResponse? {
        reservations.withLock { reservations in
            guard case .body(let response)? = reservations[key] else { return nil }
            reservations[key] = nil
            return response
        }
    }

    /// Lets go of what is held for `key`, if no read took it: a download nobody joined ends.
    func releaseReservation(_ key: CacheKey) {
        let held = reservations.withLock { reservations in
            defer { reservations[key] = nil }
            return reservations[key]
        }
        held?.release()
    }

    func makeDownload(
        url: URL, key: CacheKey, start: Int64, end: Int64, isFullBody: Bool, stores: Bool, headers: RequestHeaders,
        startedBy requester: Requester
    ) -> SharedDownload {
        SharedDownload(
            url: url, key: key, start: start, end: end, isFullBody: isFullBody, stores: stores, headers: headers,
            keptBytes: configuration.downloadLead, startedBy: requester)
    }

    /// Registers `download` (if it is not yet) and runs `transfer` for it on a task of its own,
    /// which ends it and unregisters it.
    func start(_ download: SharedDownload, transfer: OriginTransfer) {
        guard !hasShutDown else {
            download.fail(Self.shutDownError)
            return
        }
        downloads.withLock { downloads in
            if downloads[download.key]?.contains(where: { $0 === download }) != true {
                downloads[download.key, default: []].append(download)
            }
            CacheMetrics.downloadsInFlight.record(downloads.values.reduce(0) { $0 + $1.count })
        }
        // The download owns its transfer's task (``shutDown()`` ends and awaits it).
        let running = TaskPlacement.task { [self] in
            await transfer.run()
            downloads.withLock { downloads in
                downloads[download.key]?.removeAll { $0 === download }
                if downloads[download.key]?.isEmpty == true { downloads[download.key] = nil }
                CacheMetrics.downloadsInFlight.record(downloads.values.reduce(0) { $0 + $1.count })
            }
        }
        download.attach(running)
    }

    static let shutDownError = CacheError(.storeClosed, "The cache is shutting down.")

    /// Ends every download and waits for their transfers to stop, so nothing writes to the
    /// store afterwards; downloads started later end at once.
    func shutDown() async {
        isShutDown.store(true, ordering: .releasing)
        let held = reservations.withLock { reservations in
            defer { reservations = [:] }
            return Array(reservations.values)
        }
        for reservation in held { reservation.release() }
        let all = downloads.withLock { $0.values.flatMap { $0 } }
        await withTaskGroup(of: Void.self) { group in
            for download in all { group.addTask { await download.stop(Self.shutDownError) } }
        }
    }
}
