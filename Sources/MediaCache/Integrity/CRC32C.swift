// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import CMediaCacheChecksum

/// CRC-32C (Castagnoli), extended over bytes as they come: the checksum every stored block of
/// an unencrypted store carries (``BlockChecksums``). The processor's instruction where
/// there is one (about 20 GB/s here), a table otherwise (the same values).
package struct CRC32C: Sendable, Equatable {
    /// The checksum of the bytes so far (0 for none).
    package private(set) var value: UInt32 = 0

    package init() {}

    /// Goes on from `value`, the checksum of some bytes already seen.
    package init(continuing value: UInt32) {
        self.value = value
    }

    /// The checksum of the bytes so far extended by `bytes`.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        value = mediacache_crc32c_extend(value, base, bytes.count)
    }

    /// The checksum of `bytes`.
    package static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = CRC32C()
        crc.update(bytes)
        return crc.value
    }

    /// The checksum of `bytes` by the table, whatever the processor has (tests compare the two).
    package static func tableChecksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress else { return 0 }
        return mediacache_crc32c_extend_table(0, base, bytes.count)
    }

    /// Whether this machine computes it with the processor's instruction.
    package static var isHardware: Bool { mediacache_crc32c_is_hardware() != 0 }
}
