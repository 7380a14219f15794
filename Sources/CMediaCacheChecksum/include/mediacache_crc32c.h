// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

#ifndef MEDIACACHE_CRC32C_H
#define MEDIACACHE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Extends the CRC-32C (Castagnoli) `crc` of some bytes by `length` more bytes at `bytes`:
/// the CRC of the concatenation. The CRC of nothing is 0. Uses the processor's CRC32
/// instruction where there is one (SSE 4.2, ARMv8 CRC), a table otherwise; the results
/// are the same.
uint32_t mediacache_crc32c_extend(uint32_t crc, const void *bytes, size_t length);

/// The same as ``mediacache_crc32c_extend``, always by the table (for tests that compare the two).
uint32_t mediacache_crc32c_extend_table(uint32_t crc, const void *bytes, size_t length);

/// Whether ``mediacache_crc32c_extend`` uses the processor's instruction on this machine.
int mediacache_crc32c_is_hardware(void);

#endif
