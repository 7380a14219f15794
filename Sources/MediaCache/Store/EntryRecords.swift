// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// Each entry's row of the index, also kept as a record in the entries' journal
/// (``EntryJournal``, `entries/.journal`; stores of before kept a small file per entry,
/// `entries/<data file>`, still read), and each download job as `jobs/<id>`: what the index
/// says, said again beside the data, so that an index that is damaged, half-written or gone can
/// be rebuilt with every entry's key, validators, stored spans and pin, and every job.
///
/// A record is written after the index commit that wrote its row, so it never claims a span
/// the index did not (whose bytes were on disk before that commit); one that cannot be read is
/// skipped: its entry is forgotten and fetched again, never served wrong. In an encrypted store
/// the whole record is sealed (``IndexSealer``) and bound to its name, as the index's rows are.
struct EntryRecords: Sendable {
    let entriesDirectory: String
    let jobsDirectory: String
    let sealer: IndexSealer?
    /// Told of each folder and record file made (``CacheStore/Configuration/markCreated``).
    let markCreated: (@Sendable (URL) -> Void)?

    let journal: EntryJournal

    init(folder: URL, sealer: IndexSealer?, markCreated: (@Sendable (URL) -> Void)? = nil) {
        entriesDirectory = folder.appendingPathComponent("entries").path
        jobsDirectory = folder.appendingPathComponent("jobs").path
        self.sealer = sealer
        self.markCreated = markCreated
        journal = EntryJournal(path: entriesDirectory + "/.journal", markCreated: markCreated)
    }

    /// The fields of a row, as a record holds them.
    private struct Record: Codable {
        var key: String
        var metadata: ContentMetadata
        var spans: String
        var createdAt: Double
        var lastAccess: Double
        var pinned: Bool
        /// ``BlockChecksums/encoded``, in Base64 (absent in records of earlier stores).
        var checksums: String?
        var damaged: String?
        /// ``EvictionPolicy/Mark/encoded`` (absent in records of earlier stores).
        var policy: String?
    }

    /// Makes the folders (private to their owner) if they are missing.
    func prepare() throws {
        for folder in [entriesDirectory, jobsDirectory] {
            if mkdir(folder, 0o700) != 0, errno != EEXIST {
                throw CacheError(.cannotOpenStore, "Cannot create \(folder): \(String(cString: strerror(errno))).")
            }
            markCreated?(URL(fileURLWithPath: folder, isDirectory: true))
        }
    }

    /// Writes the records of `rows` in one append to the journal; a record that cannot be
    /// encoded is skipped (the index has the row; only a rebuild would miss it).
    func write(_ rows: [CacheIndex.Row]) {
        journal.append(
            rows.compactMap { row in
                // A `Record`, written as `JSONEncoder` writes it (see `JSONObjectWriter`).
                guard let metadata = row.metadata.json() else { return nil }
                var record = JSONObjectWriter()
                record.field("key", row.key.rawValue)
                record.field("metadata", json: metadata)
                record.field("spans", row.spans.encoded)
                record.field("createdAt", row.createdAt.timeIntervalSince1970)
                record.field("lastAccess", row.lastAccess.timeIntervalSince1970)
                record.field("pinned", row.isPinned)
                record.field("checksums", row.checksums.encoded.base64EncodedString())
                record.field("damaged", row.damaged.encoded)
                record.field("policy", row.mark?.encoded)
                guard let json = record.finish(), let sealed = try? sealed(Data(json), boundTo: row.fileName)
                else { return nil }
                return EntryJournal.Frame(name: row.fileName, payload: sealed)
            })
    }

    /// Removes the records of the entries whose data files are `fileNames`.
    func remove(fileNames: [String]) {
        guard !fileNames.isEmpty else { return }
        journal.append(fileNames.map { EntryJournal.Frame(name: $0, payload: nil) })
        for name in fileNames where Self.isPlainName(name) { unlink(entriesDirectory + "/" + name) }
    }

    /// Every record that can be read, as rows (the journal's over a file of a store of before);
    /// the names of the others.
    func load() -> (rows: [CacheIndex.Row], unreadable: [String]) {
        var stored: [(name: String, bytes: Data?)] = Self.names(in: entriesDirectory).map {
            ($0, Self.read(entriesDirectory + "/" + $0))
        }
        let journaled = journal.load()
        let names = Set(journaled.map(\.name))
        stored = stored.filter { !names.contains($0.name) } + journaled.map { ($0.name, $0.payload) }
        var rows: [CacheIndex.Row] = []
        var unreadable: [String] = []
        for (name, bytes) in stored {
            guard let data = opened(bytes, boundTo: name),
                let record = try? JSONDecoder().decode(Record.self, from: data),
                let spans = SpanSet(encoded: record.spans)
            else {
                unreadable.append(name)
                continue
            }
            rows.append(
                CacheIndex.Row(
                    key: CacheKey(record.key), fileName: name, metadata: record.metadata, spans: spans,
                    createdAt: Date(timeIntervalSince1970: record.createdAt),
                    lastAccess: Date(timeIntervalSince1970: record.lastAccess),
                    isPinned: record.pinned,
                    checksums: BlockChecksums(
                        encoded: record.checksums.flatMap { Data(base64Encoded: $0) } ?? Data(), for: spans),
                    damaged: record.damaged.flatMap(SpanSet.init(encoded:)) ?? SpanSet(),
                    mark: record.policy.flatMap(EvictionPolicy.Mark.init(encoded:))))
        }
        return (rows, unreadable)
    }

    /// Writes the job `id` (JSON), or removes it when `body` is `nil`.
    func writeJob(_ id: String, body: Data?) {
        guard Self.isPlainName(id) else { return }
        guard let body else {
            unlink(jobsDirectory + "/" + id)
            return
        }
        guard let text = try? sealed(body, boundTo: id) else { return }
        replace(jobsDirectory + "/" + id, with: text)
    }

    /// Every job that can be read (JSON bodies, by id).
    func loadJobs() -> [(id: String, body: Data)] {
        Self.names(in: jobsDirectory).compactMap { id in
            opened(Self.read(jobsDirectory + "/" + id), boundTo: id).map { (id, $0) }
        }
    }

    /// Whether any record is there to rebuild from.
    var isEmpty: Bool {
        Self.names(in: entriesDirectory).isEmpty && Self.names(in: jobsDirectory).isEmpty && journal.isEmpty
    }

    private func sealed(_ plaintext: Data, boundTo name: String) throws -> Data {
        guard let sealer else { return plaintext }
        return Data(try sealer.seal(plaintext, boundTo: name).utf8)
    }

    private func opened(_ stored: Data?, boundTo name: String) -> Data? {
        guard let stored else { return nil }
        guard let sealer else { return stored.first == UInt8(ascii: "{") ? stored : nil }
        return sealer.open(String(decoding: stored, as: UTF8.self), boundTo: name)
    }

    /// The names in `folder` that a record may have (no dot files: a write's temporary file
    /// starts with one).
    private static func names(in folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter(isPlainName)
    }

    private static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".") && !name.contains("/") && name.utf8.count <= 200
    }

    /// A record's bytes, at most 4 MiB, never through a link.
    private static func read(_ path: String) -> Data? { readAll(path, limit: 4 << 20) }

    /// Writes `bytes` beside `path` (mode 0600, never through a link) and renames it over `path`;
    /// or, `inPlace`, over `path`'s own bytes: an entry's record is rewritten at each commit that
    /// changes its row, and a file made and renamed each time cost a new inode each (on ext4, a
    /// fifth of a cold miss's CPU time went to finding free inodes). A record cut short by a crash
    /// is a prefix of its JSON or of its sealed bytes, which never reads: its entry is forgotten
    /// on a rebuild, as one whose record was never written (a job's record is replaced whole:
    /// a pinned download is not forgotten).
    private func replace(_ path: String, with bytes: Data, inPlace: Bool = false) {
        let folder = (path as NSString).deletingLastPathComponent
        let temporary = inPlace ? path : folder + "/." + (path as NSString).lastPathComponent + ".new"
        let descriptor = openDescriptor(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return }
        let written = writeAll(bytes, to: descriptor)
        closeDescriptor(descriptor)
        if !written || (!inPlace && rename(temporary, path) != 0) {
            unlink(temporary)
        } else {
            markCreated?(URL(fileURLWithPath: path))
        }
    }
}
