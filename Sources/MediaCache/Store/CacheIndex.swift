import Foundation
import GRDB

/// The persistent index of entries: key, data file, metadata, spans and access times.
///
/// SQLite (through GRDB) in WAL mode. A row claims spans only after their bytes were
/// written (and, with data synchronisation on, flushed to disk), so after a crash at any
/// instant every span the index claims is on disk. SQLite's own journal makes each
/// commit all-or-nothing.
struct CacheIndex: Sendable {
    /// One row of the index.
    struct Row: Sendable {
        var key: CacheKey
        var fileName: String
        var metadata: ContentMetadata
        var spans: SpanSet
        var createdAt: Date
        var lastAccess: Date
    }

    let queue: DatabaseQueue

    init(path: String) throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1") { db in
                try db.execute(sql: """
                    CREATE TABLE entry (
                        key BLOB PRIMARY KEY NOT NULL, -- UTF-8 bytes: a key may hold any character, NUL included
                        fileName TEXT NOT NULL,
                        metadata TEXT NOT NULL,
                        spans TEXT NOT NULL,
                        byteCount INTEGER NOT NULL,
                        createdAt DOUBLE NOT NULL,
                        lastAccess DOUBLE NOT NULL
                    )
                    """)
            }
            try migrator.migrate(queue)
        } catch {
            throw CacheError(.indexFailure, "Cannot open the cache index at \(path). Remove the cache folder if it is damaged.", underlyingError: error)
        }
    }

    /// Every row; rows that cannot be decoded are skipped (and so forgotten).
    func loadAll() throws -> [Row] {
        do {
            return try queue.read { db in
                try GRDB.Row.fetchAll(db, sql: "SELECT * FROM entry").compactMap { row -> Row? in
                    let metadataText: String = row["metadata"]
                    guard let metadata = try? JSONDecoder().decode(ContentMetadata.self, from: Data(metadataText.utf8)),
                          let spans = SpanSet(encoded: row["spans"]) else { return nil }
                    return Row(
                        key: CacheKey(String(decoding: row["key"] as Data, as: UTF8.self)),
                        fileName: row["fileName"],
                        metadata: metadata,
                        spans: spans,
                        createdAt: Date(timeIntervalSince1970: row["createdAt"]),
                        lastAccess: Date(timeIntervalSince1970: row["lastAccess"])
                    )
                }
            }
        } catch {
            throw CacheError(.indexFailure, "Cannot read the cache index.", underlyingError: error)
        }
    }

    /// What one commit writes, and what to do once it is committed or rolled back.
    struct Changes: Sendable {
        var rows: [Row] = []
        var deletedKeys: [CacheKey] = []
        /// Runs on the index's queue right after the commit, before any later commit.
        var onCommit: @Sendable () -> Void = {}
        /// Runs if the transaction is rolled back.
        var onRollback: @Sendable () -> Void = {}
    }

    /// Writes the rows and deletions `prepare` returns in one transaction, on the index's
    /// own serial queue. `prepare` runs in the same critical section (it takes the snapshot
    /// and synchronises data files), so snapshots are committed in the order they are taken.
    func commit(_ prepare: @escaping @Sendable () throws -> Changes) async throws {
        do {
            try await queue.write { db in
                let changes = try prepare()
                let (rows, deletedKeys) = (changes.rows, changes.deletedKeys)
                db.afterNextTransaction(onCommit: { _ in changes.onCommit() }, onRollback: { _ in changes.onRollback() })
                for key in deletedKeys {
                    try db.execute(sql: "DELETE FROM entry WHERE key = ?", arguments: [Data(key.rawValue.utf8)])
                }
                for row in rows {
                    let metadata = String(decoding: try JSONEncoder().encode(row.metadata), as: UTF8.self)
                    try db.execute(
                        sql: """
                            INSERT INTO entry (key, fileName, metadata, spans, byteCount, createdAt, lastAccess)
                            VALUES (?, ?, ?, ?, ?, ?, ?)
                            ON CONFLICT(key) DO UPDATE SET fileName = excluded.fileName, metadata = excluded.metadata,
                                spans = excluded.spans, byteCount = excluded.byteCount,
                                createdAt = excluded.createdAt, lastAccess = excluded.lastAccess
                            """,
                        arguments: [
                            Data(row.key.rawValue.utf8), row.fileName, metadata, row.spans.encoded, row.spans.byteCount,
                            row.createdAt.timeIntervalSince1970, row.lastAccess.timeIntervalSince1970,
                        ])
                }
            }
        } catch let error as CacheError {
            throw error
        } catch {
            throw CacheError(.indexFailure, "Writing the cache index failed; the cached bytes stay, but the newest may be forgotten on restart.", underlyingError: error)
        }
    }

    func close() throws {
        try queue.close()
    }
}
