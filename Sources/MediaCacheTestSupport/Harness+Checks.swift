// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

package import MediaCache
package import Testing

extension Harness {
    /// Reads `offset ..< offset + length` of the origin's `path` through the read path (to the
    /// end when `length` is nil) and checks every byte against what the origin holds.
    @discardableResult
    package func readAndCheck(
        _ path: String, offset: Int64 = 0, length: Int64? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ReadStatistics {
        let resource = try #require(origin.resource(at: path), sourceLocation: sourceLocation)
        let stream = try await reader.read(origin.url(path), offset: offset, length: length)
        let bytes = try await collect(stream)
        let expectedLength = min(resource.length, offset + (length ?? resource.length)) - offset
        #expect(Int64(bytes.readableBytes) == expectedLength, sourceLocation: sourceLocation)
        #expect(resource.firstMismatch(in: bytes, at: offset) == nil, sourceLocation: sourceLocation)
        return stream.statistics
    }
}
