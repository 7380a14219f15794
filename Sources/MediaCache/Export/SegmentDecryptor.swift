// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import _CryptoExtras

/// Undoes an HLS segment's AES-128 (RFC 8216 §5.2: AES-128-CBC, PKCS7 padding) as its bytes
/// come, in pieces of any size: each piece's whole blocks are deciphered with the last cipher
/// block before them as their IV, and the last block waits for ``finish()`` to lose its padding.
struct SegmentDecryptor {
    private let key: SymmetricKey
    private var iv: [UInt8]
    /// Cipher bytes not yet deciphered: less than a block, or the last block.
    private var pending: [UInt8] = []

    /// - Throws: ``MediaParseError`` for a key that is not 16 bytes or an IV that is not.
    init(key: [UInt8], iv: [UInt8]) throws(MediaParseError) {
        guard key.count == 16 else { throw MediaParseError("The AES-128 key is \(key.count) bytes, not 16.") }
        guard iv.count == 16 else { throw MediaParseError("The AES-128 IV is \(iv.count) bytes, not 16.") }
        self.key = SymmetricKey(data: key)
        self.iv = iv
    }

    /// The plain bytes `cipher` completes, all but the last block's.
    mutating func decrypt(_ cipher: some Collection<UInt8>) throws(MediaParseError) -> [UInt8] {
        pending.append(contentsOf: cipher)
        // Keep the last whole block (it may be the padded one) and any part block.
        let ready = pending.count <= 16 ? 0 : (pending.count - 1) / 16 * 16
        guard ready > 0 else { return [] }
        let plain = try Self.cbc(pending[..<ready], key: key, iv: iv)
        iv = Array(pending[(ready - 16)..<ready])
        pending.removeFirst(ready)
        return plain
    }

    /// The last block's plain bytes without their padding.
    /// - Throws: ``MediaParseError`` when the bytes are not whole blocks or the padding is not PKCS7's.
    mutating func finish() throws(MediaParseError) -> [UInt8] {
        guard pending.count == 16 else {
            throw MediaParseError("An AES-128 segment is not a whole number of 16-byte blocks.")
        }
        let last = try Self.cbc(pending[...], key: key, iv: iv)
        pending = []
        guard let pad = last.last, (1...16).contains(pad), last.suffix(Int(pad)).allSatisfy({ $0 == pad }) else {
            throw MediaParseError("An AES-128 segment's padding is not PKCS7's (a wrong key?).")
        }
        return Array(last.dropLast(Int(pad)))
    }

    private static func cbc(_ cipher: ArraySlice<UInt8>, key: SymmetricKey, iv: [UInt8]) throws(MediaParseError)
        -> [UInt8]
    {
        do {
            return Array(try AES._CBC.decrypt(cipher, using: key, iv: AES._CBC.IV(ivBytes: iv), noPadding: true))
        } catch {
            throw MediaParseError("AES-128 deciphering failed: \(error).")
        }
    }
}
