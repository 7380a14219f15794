// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import Synchronization

/// The stored regions a connection sent with `sendfile`, held until its client has read them.
///
/// `sendfile` gives the socket the data file's page-cache pages, not a copy of them: until the
/// client has read the bytes (on loopback, until it takes them from its own socket's queue),
/// the socket still sends from those pages. Cutting the file (a trim, after its commit) zeroes,
/// in place, the part past the new end of the page that straddles it, and the client then
/// reads zeros under a `206` (seen on ext4 with large folios, Linux 6.18: open ranges of the
/// nginx load test came back with up to 64 KiB of zeros). The store cuts only a file no
/// region holds; a region held here holds its file, so the cut waits for the next commit.
///
/// A client has read an answer once it sends its next request on the connection (players and
/// browsers do not pipeline), or once it has closed the connection; when the proxy closes first
/// (an answer with `Connection: close`, a deadline, a failure), the client may still be reading
/// from its socket, and the regions are held for as long as an idle connection is kept.
final class SentRegions: Sendable {
    private let held = Mutex<[StoredRegion]>([])

    /// Holds `region` until ``release()``: one region per data file, the file being what the
    /// cut looks at.
    func hold(_ region: StoredRegion) {
        held.withLock { held in
            if !held.contains(where: { $0.descriptor == region.descriptor }) { held.append(region) }
        }
    }

    /// Lets every held region go: the client has read what was sent, or is gone.
    func release() {
        let regions = held.withLock { held in
            defer { held = [] }
            return held
        }
        withExtendedLifetime(regions) {}  // let go outside the lock (a file may close)
    }
}
