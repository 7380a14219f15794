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
    private let downloads = Mutex<[CacheKey: [Download]]>([:])
    private let configuration: CachingReader.Configuration

    init(configuration: CachingReader.Configuration) {
        self.configuration = configuration
    }

    /// What each running download fetches.
    var summaries: [DownloadSummary] {
        let all = downloads.withLock { $0.values.flatMap { $0 } }
        return all.map { DownloadSummary(url: $0.url.absoluteString, start: $0.start, end: $0.end, position: $0.position) }
    }

    /// How many downloads are running.
    var count: Int {
        downloads.withLock { $0.values.reduce(0) { $0 + $1.count } }
    }

    /// A download for the hole `cursor ..< holeEnd` of `key`, with a reader added at `cursor`:
    /// one under way that will soon reach `cursor`, or a new one (`isNew`), registered but not
    /// started (see ``start(_:transfer:)``).
    func join(url: URL, key: CacheKey, cursor: Int64, holeEnd: Int64, acceptsRanges: Bool, stores: Bool,
              headers: RequestHeaders) -> (download: Download, reader: UInt64, isNew: Bool) {
        downloads.withLock { downloads in
            let active = (downloads[key] ?? []).filter { !$0.isFinished }
            for candidate in active {
                let position = candidate.position
                // Bytes a download holds only in memory may be gone before a reader behind it.
                let unstored = candidate.holdsUnstoredBytes
                let reachable = acceptsRanges
                    ? candidate.start <= cursor && cursor < candidate.end && cursor <= position + configuration.joinDistance
                        && (!unstored || cursor >= position)
                    : candidate.isFullBody && (!unstored || cursor >= position)
                if reachable, let id = candidate.addReader(at: cursor) {
                    return (candidate, id, false)
                }
            }
            // Stop where another download already fetches, rather than fetch its bytes twice.
            let nextStart = active.filter { $0.start > cursor }.map(\.start).min() ?? holeEnd
            let download = makeDownload(url: url, key: key, start: cursor, end: acceptsRanges ? min(holeEnd, nextStart) : holeEnd,
                                        isFullBody: !acceptsRanges, stores: stores, headers: headers)
            let id = download.addReader(at: cursor)!
            downloads[key] = active + [download]
            return (download, id, true)
        }
    }

    func makeDownload(url: URL, key: CacheKey, start: Int64, end: Int64, isFullBody: Bool, stores: Bool, headers: RequestHeaders) -> Download {
        Download(url: url, key: key, start: start, end: end, isFullBody: isFullBody, stores: stores, headers: headers,
                 keptBytes: configuration.readAhead)
    }

    /// Registers `download` (if it is not yet) and runs `transfer` for it on a task of its own,
    /// which ends it and unregisters it.
    func start(_ download: Download, transfer: OriginTransfer) {
        downloads.withLock { downloads in
            if downloads[download.key]?.contains(where: { $0 === download }) != true {
                downloads[download.key, default: []].append(download)
            }
            CacheMetrics.downloadsInFlight.record(downloads.values.reduce(0) { $0 + $1.count })
        }
        download.attach(Task { [self] in
            await transfer.run()
            downloads.withLock { downloads in
                downloads[download.key]?.removeAll { $0 === download }
                if downloads[download.key]?.isEmpty == true { downloads[download.key] = nil }
                CacheMetrics.downloadsInFlight.record(downloads.values.reduce(0) { $0 + $1.count })
            }
        })
    }
}
