// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AVFoundation
import CheckedAVFoundationAdapter
import Foundation
import MediaCache
import MediaCacheTestSupport
import NIOCore
import Testing

/// Fill on play through the Apple front door: the policy is the reader's
/// (`CachingReader.Configuration.fillOnPlay`, which the app sets). AVPlayer starts an episode
/// with its content-information request and a first data request; with the audio policy the
/// cache then holds the whole file, the origin's bytes; with `none`, only what was read and
/// its lead.
@Suite(.stallLimit) struct CachingAVURLAssetFillTests {
    static let length: Int64 = 12 << 20

    /// Plays the start of an MP3 as AVPlayer does, under `policy`; returns the bytes the origin
    /// sent once it is quiet (when it is the whole file, a read of it all is checked against
    /// the origin's bytes and costs no request).
    static func bytesSent(under policy: FillPolicy) async throws -> Int64 {
        var configuration = CachingReader.Configuration()
        configuration.fillOnPlay = policy
        return try await Harness.with(reader: configuration) { h in
            h.origin.serve(.generated(length: Self.length, seed: 9, mimeType: "audio/mpeg"), at: "/episode.mp3")
            let asset = CachingAVURLAsset(url: h.origin.url("/episode.mp3"), reader: h.reader)
            let first = AVAssetResourceLoadingRequest(simulatedContentInformation: true, offset: 0, length: 2)
            #expect(asset.resourceLoader.simulatedLoad(first))
            try await waitUntil { first.isFinished }
            #expect(first.contentInformationRequest?.contentLength == Self.length)
            let data = AVAssetResourceLoadingRequest(simulatedContentInformation: false, offset: 0, length: 65_536)
            #expect(asset.resourceLoader.simulatedLoad(data))
            try await waitUntil { data.isFinished }
            #expect(data.dataRequest?.simulatedReceived.count == 65_536)
            if policy != .none {
                try await waitUntil { h.origin.bodyBytesSent("/episode.mp3") >= Self.length }
            }
            try await h.waitUntilQuiet("/episode.mp3")
            let sent = h.origin.bodyBytesSent("/episode.mp3")
            guard sent == Self.length else { return sent }
            // Whole: a read of all of it is local, and the origin's bytes.
            let requests = h.origin.requests("/episode.mp3").count
            let bytes = try await collect(try await h.reader.read(h.origin.url("/episode.mp3")))
            #expect(h.origin.resource(at: "/episode.mp3")?.firstMismatch(in: bytes, at: 0) == nil)
            #expect(bytes.readableBytes == Int(Self.length))
            #expect(h.origin.requests("/episode.mp3").count == requests, "the whole episode was held")
            return sent
        }
    }

    @Test func anAppThatSetsTheAudioPolicyGetsTheWholeEpisode() async throws {
        #expect(try await Self.bytesSent(under: .audio) == Self.length)
    }

    @Test func withoutTheFillOnlyTheReadAndItsLeadAreFetched() async throws {
        let sent = try await Self.bytesSent(under: .none)
        #expect(sent >= 65_536 && sent < Self.length, "\(sent)")
    }
}
