// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0
//
// CRC-32C (the Castagnoli polynomial, reflected 0x82F63B78) as iSCSI, ext4 and SCTP use it.
// Swift cannot reach the processor's CRC32 instruction; C can, behind a check of the CPU.

#include "mediacache_crc32c.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define MEDIACACHE_X86 1
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define MEDIACACHE_ARM_CRC 1
#endif

// Slicing by 8: eight tables of 256 entries, built once.
static uint32_t table[8][256];
static int tableBuilt = 0;

static void buildTable(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = table[0][crc & 0xFF] ^ (crc >> 8);
            table[k][n] = crc;
        }
    }
    __atomic_store_n(&tableBuilt, 1, __ATOMIC_RELEASE);
}

static uint32_t softwareExtend(uint32_t crc, const unsigned char *p, size_t length) {
    if (!__atomic_load_n(&tableBuilt, __ATOMIC_ACQUIRE)) buildTable();  // idempotent: a race builds it twice
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        word = __builtin_bswap64(word);
#endif
        word ^= crc;
        crc = table[7][word & 0xFF] ^ table[6][(word >> 8) & 0xFF] ^ table[5][(word >> 16) & 0xFF]
            ^ table[4][(word >> 24) & 0xFF] ^ table[3][(word >> 32) & 0xFF] ^ table[2][(word >> 40) & 0xFF]
            ^ table[1][(word >> 48) & 0xFF] ^ table[0][word >> 56];
        p += 8;
        length -= 8;
    }
    while (length--) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if MEDIACACHE_X86
__attribute__((target("sse4.2"))) static uint32_t hardwareExtend(uint32_t crc, const unsigned char *p, size_t length) {
#if defined(__x86_64__)
    uint64_t c = crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        length -= 8;
    }
    crc = (uint32_t)c;
#endif
    while (length--) crc = _mm_crc32_u8(crc, *p++);
    return crc;
}

static int hasHardware(void) {
    static int known = -1;
    int value = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (value < 0) {
        __builtin_cpu_init();
        value = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&known, value, __ATOMIC_RELAXED);
    }
    return value;
}
#elif MEDIACACHE_ARM_CRC
static uint32_t hardwareExtend(uint32_t crc, const unsigned char *p, size_t length) {
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __crc32cd(crc, word);
        p += 8;
        length -= 8;
    }
    while (length--) crc = __crc32cb(crc, *p++);
    return crc;
}

static int hasHardware(void) { return 1; }
#endif

uint32_t mediacache_crc32c_extend(uint32_t crc, const void *bytes, size_t length) {
    const unsigned char *p = (const unsigned char *)bytes;
    crc = ~crc;
#if MEDIACACHE_X86 || MEDIACACHE_ARM_CRC
    if (hasHardware()) return ~hardwareExtend(crc, p, length);
#endif
    return ~softwareExtend(crc, p, length);
}

uint32_t mediacache_crc32c_extend_table(uint32_t crc, const void *bytes, size_t length) {
    return ~softwareExtend(~crc, (const unsigned char *)bytes, length);
}

int mediacache_crc32c_is_hardware(void) {
#if MEDIACACHE_X86 || MEDIACACHE_ARM_CRC
    return hasHardware();
#else
    return 0;
#endif
}
