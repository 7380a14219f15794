// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation

/// The server's limit on open descriptors, raised as servers raise it (nginx's
/// `worker_rlimit_nofile`, Go's runtime at start): its soft limit, often 1,024 (256 on macOS),
/// up to its hard limit, at most 65,536. Connections and the store's open data files both
/// need descriptors; the store keeps an eighth of the limit's files open for replays.
enum DescriptorLimit {
    /// Raises the soft limit; the limit in force after, or `nil` when it cannot be read.
    @discardableResult
    static func raise() -> Int? {
        #if os(Linux)
            let resource = Int32(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        var limits = rlimit()
        guard getrlimit(resource, &limits) == 0 else { return nil }
        var wanted = min(limits.rlim_max, 65_536)
        #if canImport(Darwin)
            wanted = min(wanted, rlim_t(OPEN_MAX))  // macOS refuses more than OPEN_MAX
        #endif
        if limits.rlim_cur < wanted {
            var raised = limits
            raised.rlim_cur = wanted
            if setrlimit(resource, &raised) == 0 { limits = raised }
        }
        return Int(clamping: limits.rlim_cur)
    }
}
