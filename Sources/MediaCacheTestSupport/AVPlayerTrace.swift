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
        (4849664, 65536), (30129037, 31445200), (30146560, 31427677), (32112640, 29461597), (7798784, 720896),
        (8650752, 65536), (8847360, 65536), (8978432, 65536), (9109504, 65536), (9240576, 131072),
        (9437184, 65536), (9633792, 65536), (9764864, 196608), (10027008, 65536), (10289152, 65536),
        (10551296, 65536), (10813440, 131072), (11075584, 65536), (11206656, 65536), (11403264, 65536),
        (11665408, 65536),
    ]
}
