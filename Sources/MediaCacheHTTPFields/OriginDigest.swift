// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import StructuredFieldValues

/// A digest of a representation's bytes that its origin sent: `Repr-Digest` (RFC 9530 §3), the
/// `Content-Digest` of a whole, unencoded `200` (then the same bytes), S3's
/// `x-amz-checksum-sha256` and `x-amz-checksum-crc32c` of an object uploaded in one part, or
/// Google Cloud Storage's `x-goog-hash` (`crc32c`, `md5`). The cache keeps them with the version
/// and checks them when it holds the whole representation. Pure; from outside, so every value
/// is bounded and one that does not parse is left out (as are algorithms it does not know, RFC
/// 9530 §5).
package struct OriginDigest: Sendable, Hashable, Codable {
    /// The algorithms the cache can compute, strongest first.
    package enum Algorithm: String, Sendable, Hashable, Codable, CaseIterable {
        case sha512 = "sha-512"
        case sha256 = "sha-256"
        case md5
        case crc32c

        /// The digest's length in bytes.
        package var length: Int {
            switch self {
            case .sha512: 64
            case .sha256: 32
            case .md5: 16
            case .crc32c: 4
            }
        }
    }

    package var algorithm: Algorithm
    /// The digest's bytes (a CRC-32C big-endian, as S3 and GCS send it).
    package var value: [UInt8]
    /// The field it came in, as named here (`Repr-Digest`, `x-goog-hash`, …).
    package var field: String

    package init(algorithm: Algorithm, value: [UInt8], field: String) {
        self.algorithm = algorithm
        self.value = value
        self.field = field
    }

    /// How logs and `mediacache info` write it: `sha-256=:…:` (RFC 9530's form).
    package var text: String { algorithm.rawValue + "=:" + Data(value).base64EncodedString() + ":" }

    /// The longest field value read; a longer one is left out whole.
    static let maximumFieldLength = 4096

    /// The digests that `fields` (an answer's, in order) carry. `wholeContent`: the answer is
    /// a `200` whose body is the whole representation with no content coding, so its
    /// `Content-Digest` counts. Several lines of one field are read as one list (RFC 9110
    /// §5.3).
    package static func digests(in fields: [(name: String, value: String)], wholeContent: Bool) -> [OriginDigest] {
        func joined(_ name: String) -> String? {
            let lines = fields.filter { $0.name.lowercased() == name }.map(\.value)
            guard !lines.isEmpty else { return nil }
            let value = lines.joined(separator: ", ")
            return value.utf8.count <= maximumFieldLength ? value : nil
        }
        var found: [OriginDigest] = []
        if let value = joined("repr-digest") { found += dictionary(value, field: "Repr-Digest") }
        if wholeContent, let value = joined("content-digest") { found += dictionary(value, field: "Content-Digest") }
        let composite = joined("x-amz-checksum-type").map { $0.uppercased().contains("COMPOSITE") } ?? false
        for (name, algorithm) in [("x-amz-checksum-sha256", Algorithm.sha256), ("x-amz-checksum-crc32c", .crc32c)] {
            // A multipart upload's checksum is of its parts' checksums (`…-N`), not of the bytes.
            guard !composite, let value = joined(name), !value.contains("-"),
                let digest = decoded(value, algorithm: algorithm, field: name)
            else { continue }
            found.append(digest)
        }
        if let value = joined("x-goog-hash") {
            // `crc32c=<base64>,md5=<base64>`: not a structured field (its base64 keeps `=`).
            for member in value.split(separator: ",") {
                let pair = member.split(separator: "=", maxSplits: 1)
                guard pair.count == 2 else { continue }
                let name = pair[0].trimmingCharacters(in: .whitespaces).lowercased()
                guard let algorithm = [Algorithm.crc32c, .md5].first(where: { $0.rawValue == name }),
                    let digest = decoded(String(pair[1]), algorithm: algorithm, field: "x-goog-hash")
                else { continue }
                found.append(digest)
            }
        }
        var seen = Set<OriginDigest>()
        return found.filter { seen.insert($0).inserted }
    }

    /// The `sha-256` and `sha-512` members of a `Repr-Digest` or `Content-Digest` dictionary.
    private static func dictionary(_ value: String, field: String) -> [OriginDigest] {
        guard let parsed = try? StructuredFieldValueDecoder().decode(DigestDictionary.self, from: Array(value.utf8))
        else { return [] }
        return [(Algorithm.sha512, parsed.sha512), (.sha256, parsed.sha256)].compactMap { algorithm, data in
            guard let data, data.count == algorithm.length else { return nil }
            return OriginDigest(algorithm: algorithm, value: Array(data), field: field)
        }
    }

    /// A digest sent as base64 text, when it decodes to the algorithm's length.
    private static func decoded(_ text: String, algorithm: Algorithm, field: String) -> OriginDigest? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 128, let data = Data(base64Encoded: trimmed), data.count == algorithm.length
        else { return nil }
        return OriginDigest(algorithm: algorithm, value: Array(data), field: field)
    }
}

/// RFC 9530's digest dictionary, the members the cache computes; others are ignored.
private struct DigestDictionary: StructuredFieldValue {
    static let structuredFieldType = StructuredFieldType.dictionary
    var sha256: Data?
    var sha512: Data?

    enum CodingKeys: String, CodingKey {
        case sha256 = "sha-256"
        case sha512 = "sha-512"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        // A member that is not a byte sequence is left out, not the whole field.
        sha256 = try? container.decodeIfPresent(Data.self, forKey: .sha256)
        sha512 = try? container.decodeIfPresent(Data.self, forKey: .sha512)
    }
}
