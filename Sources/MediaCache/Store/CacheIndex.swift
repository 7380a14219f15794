// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import GRDB

/// The persistent index of entries: key, data file, metadata, spans and access times.
///
/// SQLite (through GRDB) in WAL mode. A row claims spans only after their bytes were
/// written (and, with data synchronisation on, flushed to disk), so after a crash at any
/// instant every span the index claims is on disk. SQLite's own journal makes each
/// commit all-or-nothing. In an encrypted store (``IndexSealer``) rows are named by an HMAC
/// of their key and their key and metadata are sealed.
struct CacheIndex: Sendable {
    /// One row of the index.
    struct Row: Sendable {
        var key: CacheKey
        var fileName: String
        var metadata: ContentMetadata
        var spans: SpanSet
        var createdAt: Date
        var lastAccess: Date
        /// Kept whatever the store's size and age limits (``CacheStore/pin(_:)``).
        var isPinned = false
        /// The stored blocks' checksums (``BlockChecksums/encoded``).
        var checksums = BlockChecksums()
        /// Bytes dropped because their block failed its check, not stored again since.
        var damaged = SpanSet()
        /// The eviction policy's state of the entry; `nil` in a row of an earlier store.
        var mark: EvictionPolicy.Mark?
    }

    /// A row this store cannot use as an entry: sealed with another key (or sealed, and the
    /// store has no key), or not sealed in a store that has a key.
    struct OtherRow: Sendable {
        enum Kind: Sendable { case sealed, unsealed }
        var kind: Kind
        /// The row's key column, as stored.
        var rowKey: Data
        var fileName: String
        var byteCount: Int64
        var lastAccess: Date
    }

    let queue: DatabaseQueue
    let sealer: IndexSealer?
    /// The rows and jobs said again beside the data (see ``EntryRecords``), if kept.
    let records: EntryRecords?

    init(path: String, sealer: IndexSealer? = nil, records: EntryRecords? = nil) throws {
        self.sealer = sealer
        self.records = records
        var configuration = Configuration()
        let encrypted = sealer != nil
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // Deleted rows are overwritten, not left in free pages (an unencrypted folder
            // opened with a key loses its rows, and they must not stay readable).
            if encrypted { try db.execute(sql: "PRAGMA secure_delete = ON") }
        }
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1") { db in
                try db.execute(
                    sql: """
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
            migrator.registerMigration("v2 pins and jobs") { db in
                try db.execute(sql: "ALTER TABLE entry ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
                try db.execute(
                    sql: """
                        CREATE TABLE job (
                            id TEXT PRIMARY KEY NOT NULL,
                            body TEXT NOT NULL -- JSON, sealed in an encrypted store
                        )
                        """)
            }
            migrator.registerMigration("v3 checksums") { db in
                // Rows of earlier stores have none: their blocks gain them as they are read.
                try db.execute(sql: "ALTER TABLE entry ADD COLUMN checksums BLOB NOT NULL DEFAULT x''")
                try db.execute(sql: "ALTER TABLE entry ADD COLUMN damaged TEXT NOT NULL DEFAULT ''")
            }
            migrator.registerMigration("v4 eviction marks") { db in
                // Rows of earlier stores have none: they join the main queue in the order of their last access.
                try db.execute(sql: "ALTER TABLE entry ADD COLUMN policy TEXT NOT NULL DEFAULT ''")
                // One row: the store's `UsageHistory` (its text form, sealed in an encrypted store).
                try db.execute(sql: "CREATE TABLE usage (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL)")
            }
            try migrator.migrate(queue)
        } catch {
            throw CacheError(.indexFailure, "Cannot open the cache index at \(path).", underlyingError: error)
        }
    }

    /// What SQLite's check of every page (`PRAGMA quick_check`) finds wrong, or `nil` when the
    /// index is sound.
    func damage() -> String? {
        do {
            let findings = try queue.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check(5)") }
            return findings == ["ok"] ? nil : findings.joined(separator: "; ").prefix(300).description
        } catch {
            return "its check failed (\(String(describing: error).prefix(200)))"
        }
    }

    /// Whether `error` says the index file is damaged (not a database, corrupt, its schema
    /// unreadable), rather than that it cannot be reached now (permissions, a full disk).
    static func isDamage(_ error: (any Error)?) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return [.SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_ERROR, .SQLITE_FORMAT, .SQLITE_SCHEMA, .SQLITE_MISMATCH]
            .contains(error.resultCode)
    }

    /// Every row this store can use, and the others; rows that cannot be decoded are
    /// skipped (and so forgotten).
    func loadAll() throws -> (rows: [Row], others: [OtherRow]) {
        do {
            return try queue.read { db in
                var rows: [Row] = []
                var others: [OtherRow] = []
                for row in try GRDB.Row.fetchAll(db, sql: "SELECT * FROM entry") {
                    let metadataText: String = row["metadata"]
                    let fileName: String = row["fileName"]
                    let rowKey: Data = row["key"]
                    guard let spans = SpanSet(encoded: row["spans"]) else { continue }
                    let lastAccess = Date(timeIntervalSince1970: row["lastAccess"])
                    let sealed = metadataText.hasPrefix(IndexSealer.prefix)
                    let other = OtherRow(
                        kind: sealed ? .sealed : .unsealed, rowKey: rowKey, fileName: fileName,
                        byteCount: spans.byteCount, lastAccess: lastAccess)
                    let opened: (key: CacheKey, metadata: ContentMetadata)?
                    switch (sealer, sealed) {
                    case (let sealer?, true): opened = sealer.open(metadataText, fileName: fileName)
                    case (nil, false):
                        opened = (try? JSONDecoder().decode(ContentMetadata.self, from: Data(metadataText.utf8))).map {
                            (CacheKey(String(decoding: rowKey, as: UTF8.self)), $0)
                        }
                        if opened == nil { continue }
                    default: opened = nil
                    }
                    guard let opened else {
                        others.append(other)
                        continue
                    }
                    rows.append(
                        Row(
                            key: opened.key, fileName: fileName, metadata: opened.metadata, spans: spans,
                            createdAt: Date(timeIntervalSince1970: row["createdAt"]), lastAccess: lastAccess,
                            isPinned: (row["pinned"] as Int?) == 1,
                            checksums: BlockChecksums(encoded: row["checksums"] ?? Data(), for: spans),
                            damaged: SpanSet(encoded: row["damaged"] ?? "") ?? SpanSet(),
                            mark: (row["policy"] as String?).flatMap(EvictionPolicy.Mark.init(encoded:))))
                }
                return (rows, others)
            }
        } catch {
            throw CacheError(.indexFailure, "Cannot read the cache index.", underlyingError: error)
        }
    }

    /// The key column of `key`'s row.
    func rowKey(for key: CacheKey) -> Data {
        sealer?.rowKey(for: key) ?? Data(key.rawValue.utf8)
    }

    /// What one commit writes, and what to do once it is committed or rolled back.
    struct Changes: Sendable {
        var rows: [Row] = []
        var deletedKeys: [CacheKey] = []
        /// Rows to delete by their key column (``OtherRow``s).
        var deletedRowKeys: [Data] = []
        /// The store's usage history, when it changed.
        var usage: UsageHistory?
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
                db.afterNextTransaction(
                    onCommit: { [records] _ in
                        records?.write(rows)
                        changes.onCommit()
                    }, onRollback: { _ in changes.onRollback() })
                let delete = try db.cachedStatement(sql: "DELETE FROM entry WHERE key = ?")
                for rowKey in deletedKeys.map(rowKey(for:)) + changes.deletedRowKeys {
                    try delete.execute(arguments: [rowKey])
                }
                for row in rows { try insert(row, into: db) }
                if let usage = changes.usage { try saveUsage(usage, into: db) }
            }
        } catch let error as CacheError {
            throw error
        } catch {
            throw CacheError(
                .indexFailure,
                "Writing the cache index failed; the cached bytes stay, but the newest may be forgotten on restart.",
                underlyingError: error)
        }
    }

    private func insert(_ row: Row, into db: Database) throws {
        let metadata =
            try sealer?.seal(key: row.key, metadata: row.metadata, fileName: row.fileName)
            ?? String(decoding: try row.metadata.json() ?? Array(JSONEncoder().encode(row.metadata)), as: UTF8.self)
        // Prepared once per connection: parsing the statement cost more than running it.
        try db.cachedStatement(
            sql: """
                INSERT INTO entry (
                    key, fileName, metadata, spans, byteCount, createdAt, lastAccess, pinned, checksums, damaged,
                    policy)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(key) DO UPDATE SET fileName = excluded.fileName, metadata = excluded.metadata,
                    spans = excluded.spans, byteCount = excluded.byteCount,
                    createdAt = excluded.createdAt, lastAccess = excluded.lastAccess, pinned = excluded.pinned,
                    checksums = excluded.checksums, damaged = excluded.damaged, policy = excluded.policy
                """
        ).execute(
            arguments: [
                rowKey(for: row.key), row.fileName, metadata, row.spans.encoded, row.spans.byteCount,
                row.createdAt.timeIntervalSince1970, row.lastAccess.timeIntervalSince1970, row.isPinned ? 1 : 0,
                row.checksums.encoded, row.damaged.encoded, row.mark?.encoded ?? "",
            ])
    }

    private func insertJob(_ id: String, body: Data, into db: Database) throws {
        let column = try sealer?.seal(body, boundTo: id) ?? String(decoding: body, as: UTF8.self)
        try db.execute(
            sql: "INSERT INTO job (id, body) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body",
            arguments: [id, column])
    }

    /// Writes `rows` and `jobs` into this index in one transaction, now (on the calling
    /// thread: the store is being opened, on a thread made for blocking work). Two rows of
    /// one key keep the one used last.
    func rebuild(rows: [Row], jobs: [(id: String, body: Data)]) throws {
        do {
            try queue.write { db in
                for row in rows.sorted(by: { $0.lastAccess < $1.lastAccess }) { try insert(row, into: db) }
                for job in jobs { try insertJob(job.id, body: job.body, into: db) }
            }
        } catch {
            throw CacheError(.indexFailure, "Cannot write the rebuilt cache index.", underlyingError: error)
        }
    }

    // MARK: Usage

    private func saveUsage(_ usage: UsageHistory, into db: Database) throws {
        let text = usage.encoded
        let body = try sealer?.seal(Data(text.utf8), boundTo: "usage") ?? text
        try db.execute(
            sql: "INSERT INTO usage (id, body) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body",
            arguments: [body])
    }

    /// The store's usage history; a new one when there is none or it cannot be read.
    func loadUsage() -> UsageHistory {
        let body = try? queue.read { db in try String.fetchOne(db, sql: "SELECT body FROM usage WHERE id = 1") }
        guard let body = body ?? nil else { return UsageHistory() }
        let text = sealer.map { $0.open(body, boundTo: "usage").map { String(decoding: $0, as: UTF8.self) } } ?? body
        return text.flatMap(UsageHistory.init(encoded:)) ?? UsageHistory()
    }

    // MARK: Jobs

    /// The stored download jobs (JSON), by id; rows that cannot be opened (sealed with
    /// another key) are skipped.
    func loadJobs() throws -> [(id: String, body: Data)] {
        do {
            return try queue.read { db in
                try GRDB.Row.fetchAll(db, sql: "SELECT id, body FROM job").compactMap { row -> (String, Data)? in
                    let id: String = row["id"]
                    let body: String = row["body"]
                    if let sealer { return sealer.open(body, boundTo: id).map { (id, $0) } }
                    return body.hasPrefix(IndexSealer.prefix) ? nil : (id, Data(body.utf8))
                }
            }
        } catch {
            throw CacheError(
                .indexFailure, "Cannot read the download jobs from the cache index.", underlyingError: error)
        }
    }

    /// Writes the job `id` as `body` gives it when the write runs (JSON), or deletes it when
    /// `body` gives `nil`. Writes run one at a time in the order called, each with the job as
    /// it is then, so a slower caller never writes an older state over a newer one.
    func saveJob(_ id: String, body: @escaping @Sendable () throws -> Data?) async throws {
        do {
            try await queue.write { [records] db in
                let body = try body()
                db.afterNextTransaction(onCommit: { _ in records?.writeJob(id, body: body) })
                guard let body else {
                    try db.execute(sql: "DELETE FROM job WHERE id = ?", arguments: [id])
                    return
                }
                try insertJob(id, body: body, into: db)
            }
        } catch {
            throw CacheError(.indexFailure, "Cannot write a download job to the cache index.", underlyingError: error)
        }
    }

    func close() throws {
        try queue.close()
    }
}
