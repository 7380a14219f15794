// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Crypto
import Foundation
import MediaCacheHTTPFields

/// The master key of an encrypted store: 256 bits, from a key file of 32 raw bytes or 64
/// hexadecimal characters (a final line end allowed).
package enum EncryptionKey {
    /// Reads the key in `contents` (a key file's bytes).
    /// - Throws: ``EncryptionKeyError`` that says what the file holds instead.
    package static func parse(_ contents: [UInt8]) throws(EncryptionKeyError) -> SymmetricKey {
        if contents.count == 32 { return SymmetricKey(data: contents) }
        var text = contents[...]
        while let last = text.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { text = text.dropLast() }
        guard text.count == 64 else {
            throw EncryptionKeyError(
                "The key file holds \(contents.count) bytes: it must hold 32 raw bytes or 64 hexadecimal characters (head -c 32 /dev/urandom > key)."
            )
        }
        var key: [UInt8] = []
        key.reserveCapacity(32)
        var index = text.startIndex
        while index < text.endIndex {
            guard let high = HexDigit.value(of: text[index]), let low = HexDigit.value(of: text[index + 1]) else {
                throw EncryptionKeyError("The key file's 64 characters must all be hexadecimal (0-9, a-f).")
            }
            key.append(high << 4 | low)
            index += 2
        }
        return SymmetricKey(data: key)
    }

    /// Reads the key file at `path`, and says (as `warning`) when users other than its owner
    /// may read it.
    package static func load(path: String) throws(EncryptionKeyError) -> (key: SymmetricKey, warning: String?) {
        let contents: Data
        do {
            contents = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw EncryptionKeyError("Cannot read the key file \(path): \((error as NSError).localizedDescription)")
        }
        let key = try parse(Array(contents))
        var warning: String?
        if let mode = (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int,
            mode & 0o077 != 0
        {
            warning =
                "The key file \(path) may be read by other users (mode \(String(mode & 0o777, radix: 8))): chmod 600 it."
        }
        return (key, warning)
    }

}

/// A key file that cannot be used, and why.
package struct EncryptionKeyError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}
