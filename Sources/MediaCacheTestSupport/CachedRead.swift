// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import Foundation
package import MediaCache

extension CachingReader {
    /// A read of `range` when the store alone can serve it: every byte is stored and the
    /// entry may be used without asking the origin; `nil` otherwise. Never waits. (Tests check
    /// what the store holds with it; the product reads through ``read(_:offset:length:headers:)``.)
    package func cachedRead(_ url: URL, range: ByteRange, headers: RequestHeaders = []) -> ReadStream? {
        guard let lease = storedLease(for: url, headers: headers, as: .own(.export)), let total = lease.metadata.length,
            range.upperBound <= total, !range.isEmpty
        else { return nil }
        return lease.read(range)
    }
}
