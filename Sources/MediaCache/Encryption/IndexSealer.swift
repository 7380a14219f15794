// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation

/// Hides what the index of an encrypted store says about each entry: the row's key is an
/// HMAC of the cache key (so rows can still be found and replaced, but not read), and the
/// cache key with the content metadata (URLs, type, validators, the origin's headers) are
/// sealed (AES-256-GCM) and bound to the row's data file name. What stays readable: the
/// data file names (random), the stored byte ranges and their sizes, and the access times.
struct IndexSealer: Sendable {
    /// The prefix of a sealed metadata column; unencrypted rows hold JSON (`{…}`).
    static let prefix = "sealed:"

    private let sealingKey: KeyBox
    private let namingKey: KeyBox

    init(masterKey: SymmetricKey) {
        sealingKey = KeyBox(
            key: HKDF<SHA256>.deriveKey(
                inputKeyMaterial: masterKey, info: Array("mediacache index v1".utf8), outputByteCount: 32))
        namingKey = KeyBox(
            key: HKDF<SHA256>.deriveKey(
                inputKeyMaterial: masterKey, info: Array("mediacache row key v1".utf8), outputByteCount: 32))
    }

    /// The index's name for the entry `key`.
    func rowKey(for key: CacheKey) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data(key.rawValue.utf8), using: namingKey.key))
    }

    /// What the index stores for `key`'s metadata column.
    func seal(key: CacheKey, metadata: ContentMetadata, fileName: String) throws -> String {
        // A `SealedRow`, written as `JSONEncoder` writes it (see `JSONObjectWriter`).
        guard let json = metadata.json() else {
            return try seal(
                try JSONEncoder().encode(SealedRow(key: key.rawValue, metadata: metadata)), boundTo: fileName)
        }
        var row = JSONObjectWriter()
        row.field("key", key.rawValue)
        row.field("metadata", json: json)
        return try seal(Data(row.finish() ?? []), boundTo: fileName)
    }

    /// `plaintext` sealed for a column, bound to `name` (a row's data file, a job's id).
    func seal(_ plaintext: Data, boundTo name: String) throws -> String {
        let sealed = try AES.GCM.seal(plaintext, using: sealingKey.key, authenticating: Data(name.utf8))
        return Self.prefix + sealed.combined!.base64EncodedString()
    }

    /// What ``seal(_:boundTo:)`` sealed in `column` for `name`, or `nil` when it was sealed
    /// with another key, for another name, or changed since.
    func open(_ column: String, boundTo name: String) -> Data? {
        guard column.hasPrefix(Self.prefix),
            let combined = Data(base64Encoded: String(column.dropFirst(Self.prefix.count))),
            let box = try? AES.GCM.SealedBox(combined: combined)
        else { return nil }
        return try? AES.GCM.open(box, using: sealingKey.key, authenticating: Data(name.utf8))
    }

    /// The key and metadata sealed in `column`, or `nil` when they were sealed with another
    /// key, for another file, or changed since.
    func open(_ column: String, fileName: String) -> (key: CacheKey, metadata: ContentMetadata)? {
        guard let plaintext = open(column, boundTo: fileName),
            let row = try? JSONDecoder().decode(SealedRow.self, from: plaintext)
        else { return nil }
        return (CacheKey(row.key), row.metadata)
    }

    private struct SealedRow: Codable {
        var key: String
        var metadata: ContentMetadata
    }
}
