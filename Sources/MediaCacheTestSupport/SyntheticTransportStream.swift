// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// MPEG-2 transport stream bytes made by hand (ISO/IEC 13818-1): a video PES packet with a
/// known presentation timestamp, then null packets, for tests that need a segment's first
/// timestamp without an encoder.
public enum SyntheticTransportStream {
    /// `length` bytes (a multiple of 188) whose first packet begins a video PES with `pts`
    /// (90 kHz, below 2^33).
    public static func segment(pts: Int64, length: Int = 188 * 200) -> [UInt8] {
        var bytes: [UInt8] = [0x47, 0x41, 0x00, 0x10]  // PID 0x100, payload unit start, payload only
        bytes += [0x00, 0x00, 0x01, 0xE0, 0x00, 0x00, 0x80, 0x80, 0x05]  // PES: video, PTS only
        bytes += [
            UInt8(0x21 | ((pts >> 29) & 0x0E)), UInt8((pts >> 22) & 0xFF), UInt8(((pts >> 14) & 0xFE) | 1),
            UInt8((pts >> 7) & 0xFF), UInt8(((pts << 1) & 0xFE) | 1),
        ]
        bytes += [UInt8](repeating: 0xFF, count: 188 - bytes.count)
        let null: [UInt8] = [0x47, 0x1F, 0xFF, 0x10] + [UInt8](repeating: 0xFF, count: 184)
        while bytes.count + 188 <= length { bytes += null }
        return bytes
    }
}
