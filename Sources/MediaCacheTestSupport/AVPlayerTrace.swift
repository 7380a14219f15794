// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// Requests AVPlayer makes through a resource loader, as recorded on a Mac and kept here as
/// data: the trace is the whole of it (the recording is not part of the repository).
public enum AVPlayerTrace {
    /// The length of the MP4 of the recorded session.
    public static let mp4Length: Int64 = 61_574_237

    /// The 21 data requests (offset, length) AVPlayer made for a 61,574,237-byte MP4 whose
    /// `moov` is at the end, in order.
    public static let mp4: [(offset: Int64, length: Int64)] = [
        (4_849_664, 65536), (30_129_037, 31_445_200), (30_146_560, 31_427_677), (32_112_640, 29_461_597),
        (7_798_784, 720896),
        (8_650_752, 65536), (8_847_360, 65536), (8_978_432, 65536), (9_109_504, 65536), (9_240_576, 131072),
        (9_437_184, 65536), (9_633_792, 65536), (9_764_864, 196608), (10_027_008, 65536), (10_289_152, 65536),
        (10_551_296, 65536), (10_813_440, 131072), (11_075_584, 65536), (11_206_656, 65536), (11_403_264, 65536),
        (11_665_408, 65536),
    ]
}
