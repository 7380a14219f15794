// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
@_spi(Adapter) import MediaCache
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

/// The player side of one loading request, checking every byte it is given.
final class CheckingResponder: LoadingRequest.Responder {
    struct State {
        var information: LoadingRequest.ContentInformation?
        var received: Int64 = 0
        var wrongBytesAt: Int64?
        var finished = false
        var error: (any Error)?
    }

    let resource: TestOrigin.Resource
    let start: Int64
    let state = Mutex(State())
    /// Called after each delivery with the total received, as a player deciding to cancel.
    let onReceive: @Sendable (Int64) -> Void

    init(resource: TestOrigin.Resource, start: Int64, onReceive: @escaping @Sendable (Int64) -> Void = { _ in }) {
        self.resource = resource
        self.start = start
        self.onReceive = onReceive
    }

    func fill(_ information: LoadingRequest.ContentInformation) { state.withLock { $0.information = information } }

    func respond(with data: ByteBuffer) {
        let received = state.withLock { state in
            if state.wrongBytesAt == nil, let bad = resource.firstMismatch(in: data, at: start + state.received) {
                state.wrongBytesAt = bad
            }
            state.received += Int64(data.readableBytes)
            return state.received
        }
        onReceive(received)
    }

    func finishLoading() { state.withLock { $0.finished = true } }
    func finishLoading(with error: any Error) {
        state.withLock {
            $0.finished = true
            $0.error = error
        }
    }

    /// Waits until `bytes` have arrived or the request finished.
    func wait(for bytes: Int64 = .max) async throws {
        try await waitUntil { state.withLock { $0.finished || $0.received >= bytes } }
    }
}

/// Drives a ``ResourceLoaderEngine`` the way AVPlayer drives its resource loader.
final class SimulatedPlayer: Sendable {
    let engine: ResourceLoaderEngine<Int>
    let resource: TestOrigin.Resource
    let ids = Mutex(0)

    init(h: Harness, path: String) {
        engine = ResourceLoaderEngine(url: h.origin.url(path), reader: h.reader)
        resource = h.origin.resource(at: path)!
    }

    func nextID() -> Int {
        ids.withLock {
            $0 += 1
            return $0
        }
    }

    /// The first request: content information, on the wire bytes 0-1. Must finish first.
    func contentInformation() async throws -> LoadingRequest.ContentInformation {
        let responder = CheckingResponder(resource: resource, start: 0)
        engine.start(
            nextID(),
            LoadingRequest(
                wantsContentInformation: true, data: LoadingRequest.DataRequest(requestedOffset: 0, requestedLength: 2)),
            responder: responder)
        try await responder.wait()
        let state = responder.state.withLock { $0 }
        #expect(state.finished && state.error == nil && state.received == 2 && state.wrongBytesAt == nil)
        return try #require(state.information)
    }

    /// Starts a data request and returns its id and responder; the player cancels it as
    /// soon as it has `take` bytes.
    func startData(offset: Int64, length: Int64? = nil, take: Int64 = .max) -> (Int, CheckingResponder) {
        let id = nextID()
        let engine = engine
        let responder = CheckingResponder(resource: resource, start: offset) { received in
            if received >= take { engine.cancel(id) }
        }
        let data = LoadingRequest.DataRequest(
            requestedOffset: offset, requestedLength: length ?? (resource.length - offset),
            requestsAllDataToEndOfResource: length == nil)
        engine.start(id, LoadingRequest(wantsContentInformation: false, data: data), responder: responder)
        return (id, responder)
    }

    /// A data request the player reads `take` bytes of and then cancels (or reads whole).
    @discardableResult
    func data(offset: Int64, length: Int64? = nil, take: Int64 = .max) async throws -> Int64 {
        let (id, responder) = startData(offset: offset, length: length, take: take)
        try await responder.wait(for: take)
        engine.cancel(id)
        let state = responder.state.withLock { $0 }
        #expect(state.wrongBytesAt == nil, "wrong byte at \(String(describing: state.wrongBytesAt))")
        #expect(state.error == nil, "\(String(describing: state.error))")
        let expected = min(length ?? .max, resource.length - offset)
        #expect(state.received >= min(take, expected))
        return state.received
    }
}

@Suite(.stallLimit, .endToEnd) struct SimulatedAVPlayerTests {
    /// `avplayer-audio-session.txt`, offsets scaled from bytes to KiB so the cancels fall
    /// after real amounts of data (0-to-end cancelled after 700 KiB, …). Over an unencrypted
    /// and an encrypted store.
    @Test(arguments: [false, true])
    func audioSessionTraceThenReplayFromCache(encrypted: Bool) async throws {
        try await Harness.with(store: TestSetup(scheme: .http, encrypted: encrypted).store()) { h in
            let k: Int64 = 1024
            h.origin.serve(.generated(length: 6_000 * k, seed: 61, mimeType: "audio/mpeg"), at: "/song.mp3")
            let player = SimulatedPlayer(h: h, path: "/song.mp3")
            func session() async throws {
                let info = try await player.contentInformation()
                #expect(
                    info
                        == LoadingRequest.ContentInformation(
                            contentLength: 6_000 * k, contentType: "public.mp3", isByteRangeAccessSupported: true))
                try await player.data(offset: 0, take: 700 * k)
                try await player.data(offset: 700 * k, take: 800 * k)
                // 1500 to the end; the user seeks to 5000 when it is at 2000: the new request
                // starts before the old one is cancelled (both as the 2000th KiB arrives).
                let seekResponder = Mutex<CheckingResponder?>(nil)
                let oldID = player.nextID()
                let engine = player.engine
                let oldResponder = CheckingResponder(resource: player.resource, start: 1_500 * k) { received in
                    guard received >= 500 * k, seekResponder.withLock({ $0 == nil }) else { return }
                    let (_, seek) = player.startData(offset: 5_000 * k)
                    seekResponder.withLock { $0 = seek }
                    engine.cancel(oldID)
                }
                engine.start(
                    oldID,
                    LoadingRequest(
                        wantsContentInformation: false,
                        data: LoadingRequest.DataRequest(
                            requestedOffset: 1_500 * k, requestedLength: 4_500 * k, requestsAllDataToEndOfResource: true
                        )), responder: oldResponder)
                try await oldResponder.wait(for: 500 * k)
                try await waitUntil { seekResponder.withLock { $0 } != nil }
                let seeking = try #require(seekResponder.withLock { $0 })
                try await seeking.wait()
                let seekState = seeking.state.withLock { $0 }
                #expect(seekState.finished && seekState.received == 1_000 * k && seekState.wrongBytesAt == nil)
                #expect(oldResponder.state.withLock { $0.wrongBytesAt } == nil)
            }
            try await session()
            #expect(h.origin.bodyBytesSent("/song.mp3") > 0)
            try await h.waitUntilQuiet("/song.mp3")
            h.origin.resetCounters()
            try await session()
            #expect(h.origin.requests("/song.mp3").isEmpty, "replay: \(h.origin.requests("/song.mp3"))")
            #expect(player.engine.activeRequestCount == 0)
        }
    }

    @Test(arguments: [false, true])
    func mp4VideoTraceWithMoovAtTheEndThenReplayFromCache(encrypted: Bool) async throws {
        try await Harness.with(store: TestSetup(scheme: .http, encrypted: encrypted).store()) { h in
            let length = AVPlayerTrace.mp4Length
            h.origin.serve(.generated(length: length, seed: 62, mimeType: "video/mp4"), at: "/movie.mp4")
            let player = SimulatedPlayer(h: h, path: "/movie.mp4")
            let take: Int64 = 1 << 20
            func session() async throws {
                let info = try await player.contentInformation()
                #expect(
                    info.contentLength == length && info.contentType == "public.mpeg-4"
                        && info.isByteRangeAccessSupported)
                // moov at the end: the tail is read before playing.
                try await player.data(offset: length - 262_144, length: 262_144)
                for (offset, requested) in AVPlayerTrace.mp4 {
                    // Long requests are taken in part and cancelled, as the player does.
                    try await player.data(offset: offset, length: requested, take: min(requested, take))
                }
            }
            try await session()
            try await h.waitUntilQuiet("/movie.mp4")
            // The session needs a few MiB, not the file: what is stored is what it took, plus
            // at most the read-ahead past each request it cut short (the engine's bound). What
            // the origin wrote is no measure: it also counts bytes the kernel held in socket
            // buffers when a request was cancelled, 5-13 MB a session here, 17 MB once under load.
            let readAhead = CachingReader.Configuration().downloadLead
            let taken = AVPlayerTrace.mp4.reduce(Int64(262_144)) { $0 + min($1.length, take) }
            let cutShort = Int64(AVPlayerTrace.mp4.filter { $0.length > take }.count)
            let stored = h.store.spans(for: h.store.key(for: h.origin.url("/movie.mp4"))).byteCount
            #expect(stored <= taken + cutShort * readAhead, "stored \(stored) of \(length); the session took \(taken)")
            h.origin.resetCounters()
            try await session()
            #expect(h.origin.requests("/movie.mp4").isEmpty, "replay: \(h.origin.requests("/movie.mp4"))")
        }
    }

    @Test func queuePlayerSwitchCancelsThePreviousItemsLoading() async throws {
        // The adapter's cancelling, without a fill on play (which goes on with a played audio
        // file as the cache's own work, on purpose: `FillOnPlayTests`).
        var configuration = CachingReader.Configuration()
        configuration.fillOnPlay = .none
        try await Harness.with(reader: configuration) { h in
            var slow = TestOrigin.Faults()
            slow.bytesPerSecond = 2_000_000
            h.origin.serve(
                .generated(length: 20_000_000, seed: 63, mimeType: "audio/mpeg", faults: slow), at: "/first.mp3")
            h.origin.serve(.generated(length: 1_000_000, seed: 64, mimeType: "audio/mp4"), at: "/second.m4a")
            let first = SimulatedPlayer(h: h, path: "/first.mp3")
            _ = try await first.contentInformation()
            let (_, playing) = first.startData(offset: 0)
            try await playing.wait(for: 200_000)
            // The queue moves on; AVQueuePlayer does not cancel, the adapter does.
            first.engine.cancelAll()
            let second = SimulatedPlayer(h: h, path: "/second.m4a")
            let info = try await second.contentInformation()
            #expect(info.contentType == "com.apple.m4a-audio")
            try await second.data(offset: 0)
            // The first item's download stops (that nothing more is then sent is shown without a
            // network by `ScriptedReadPathTests.aReaderThatGoesAwayCancelsTheOriginRequest`).
            try await waitUntil { h.reader.activeDownloads == 0 }
            #expect(h.origin.bodyBytesSent("/first.mp3") < 3_000_000)
            #expect(first.engine.activeRequestCount == 0)
        }
    }

    /// A player that cancels a request from inside its first `respond` (AVPlayer does) stops
    /// it, and requests that end at once leave the engine's table. A request's task once
    /// entered the table only after it was made: under load its first cached bytes came
    /// first, the cancel found nothing to cancel, and the request ran on to the end (the trace
    /// test above then found it still counted after the session).
    @Test func aCancelFromTheFirstRespondStopsTheRequest() async throws {
        try await Harness.with { h in
            h.origin.serve(.generated(length: 4 << 20, seed: 64, mimeType: "audio/mpeg"), at: "/cached.mp3")
            let player = SimulatedPlayer(h: h, path: "/cached.mp3")
            _ = try await player.contentInformation()
            try await player.data(offset: 0)
            var responders: [CheckingResponder] = []
            for round in 0..<300 {
                if round % 3 == 0 {
                    let responder = CheckingResponder(resource: player.resource, start: 0)
                    player.engine.start(
                        player.nextID(),
                        LoadingRequest(
                            wantsContentInformation: true,
                            data: LoadingRequest.DataRequest(requestedOffset: 0, requestedLength: 2)),
                        responder: responder)
                    try await responder.wait()
                    #expect(responder.state.withLock { $0.finished && $0.error == nil && $0.received == 2 })
                } else {
                    responders.append(player.startData(offset: Int64(round) * 1000, take: 1).1)
                }
            }
            try await waitUntil { player.engine.activeRequestCount == 0 }
            #expect(player.engine.activeRequestCount == 0)
            // Cancelled after its first chunk: never the whole rest, never a finishLoading.
            let runOn = responders.filter { responder in
                responder.state.withLock { $0.finished || $0.received >= 2 << 20 }
            }
            #expect(
                runOn.isEmpty, "\(runOn.count) of \(responders.count) requests ran on after the player cancelled them")
            #expect(
                responders.allSatisfy { responder in
                    responder.state.withLock { $0.received > 0 && $0.wrongBytesAt == nil }
                })
        }
    }

    @Test func eventsReportNetworkCacheAndCompletion() async throws {
        try await Harness.with { h in
            h.origin.serve(.generated(length: 500_000, seed: 65, mimeType: "audio/mpeg"), at: "/e.mp3")
            let player = SimulatedPlayer(h: h, path: "/e.mp3")
            try await player.data(offset: 0)
            try await player.data(offset: 0)
            player.engine.cancelAll()
            var network: Int64 = 0
            var cache: Int64 = 0
            var completed = 0
            for await event in player.engine.events {
                switch event {
                case .bytesFromNetwork(let n): network += n
                case .bytesFromCache(let n): cache += n
                case .resourceCompleted: completed += 1
                case .stalled: break
                }
                if network + cache >= 1_000_000 && completed > 0 { break }
            }
            #expect(network == 500_000)
            #expect(cache == 500_000)
            #expect(completed == 1)
        }
    }
}
