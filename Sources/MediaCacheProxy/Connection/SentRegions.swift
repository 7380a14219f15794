// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import NIOCore
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
    /// One region per data file: nearly always one (an answer's regions are of one file), held
    /// without an array to allocate at each answer.
    private struct Held {
        var first: StoredRegion?
        var more: [StoredRegion] = []
    }

    private let held = Mutex(Held())

    /// Holds `region` until ``release()``: one region per data file, the file being what the
    /// cut looks at.
    func hold(_ region: StoredRegion) {
        held.withLock { held in
            guard let first = held.first else {
                held.first = region
                return
            }
            if first.descriptor != region.descriptor, !held.more.contains(where: { $0.descriptor == region.descriptor })
            {
                held.more.append(region)
            }
        }
    }

    /// Lets every held region go: the client has read what was sent, or is gone.
    func release() {
        let regions = held.withLock { held in
            defer { held = Held() }
            return held
        }
        withExtendedLifetime(regions) {}  // let go outside the lock (a file may close)
    }
}

/// The sent regions of connections the proxy closed first, each held until its deadline (an
/// idle connection's time after the close), and let go in order as later connections end. (A
/// timer for each closed connection put one more task in its event loop's timer heap for that
/// long, which every later timer paid for: 8 % more instructions for a cold miss after a
/// burst of closes, under callgrind.) With no connection ending after it, a hold lasts longer:
/// a cut then waits longer, which is safe.
final class ClosedConnectionHolds: Sendable {
    private struct State {
        var held: [(until: NIODeadline, sent: SentRegions)] = []
        /// The first entry still held.
        var head = 0
    }

    private let state = Mutex(State())

    /// Holds `sent` until `deadline` at least.
    func hold(_ sent: SentRegions, until deadline: NIODeadline) {
        state.withLock { $0.held.append((deadline, sent)) }
    }

    /// Lets go of the regions whose deadline has passed (those behind a later one wait for it).
    func letGo(now: NIODeadline) {
        let expired = state.withLock { state -> [SentRegions] in
            var expired: [SentRegions] = []
            while state.head < state.held.count, state.held[state.head].until <= now {
                expired.append(state.held[state.head].sent)
                state.head += 1
            }
            if state.head > 64, state.head * 2 > state.held.count {
                state.held.removeFirst(state.head)
                state.head = 0
            }
            return expired
        }
        for sent in expired { sent.release() }
    }
}
