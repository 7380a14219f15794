// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import AVFoundation
import CheckedAVFoundationAdapter
import Foundation
@_spi(Adapter) import MediaCache
import MediaCacheHTTP
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

/// Background pins, through the stand-in's transfer service (the system's nsurlsessiond): a pin
/// hands its pieces to a background session; the app is terminated; the system runs the
/// transfers while no app object exists; the relaunched app's session gets the files, stores
/// them, calls the app delegate's completion, and the job completes with the origin's bytes,
/// each asked for once. A force-quit cancels the transfers; the next launch asks again for
/// what is missing, and cancels a task no job wants.
@Suite(.stallLimit, .serialized) struct BackgroundPinSessionTests {
    static let size: Int64 = 20_000_000

    /// One launch of the app: a store, a read path, the assets with the background session, and
    /// the downloads, started.
    struct App {
        let store: CacheStore
        let fetcher: HTTPOriginFetcher
        let reader: CachingReader
        let assets: CachingAssets
        let downloads: DownloadQueue

        static func launch(_ folder: URL, session: String) async throws -> App {
            let store = try await CacheStore.open(directory: folder)
            let fetcher = HTTPOriginFetcher()
            let reader = CachingReader(store: store, fetcher: fetcher)
            let assets = try await CachingAssets.start(reader: reader, backgroundSession: session)
            let downloads = try assets.downloads()
            return App(store: store, fetcher: fetcher, reader: reader, assets: assets, downloads: downloads)
        }

        /// The app ends (the system takes its transfers over).
        func terminate() async throws {
            await downloads.shutDown()
            await assets.stop()
            await reader.shutDown()
            try await store.close()
            try await fetcher.shutdown()
        }

        var pins: BackgroundPinSession { assets.backgroundPins! }
    }

    static func withOrigin(_ body: (TestOrigin, URL) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let origin = try await TestOrigin.start()
            origin.serve(.generated(length: size, seed: 67), at: "/film.mp4")
            origin.serveRenditionAsset()
            SimulatedTransferService.shared.simulatedHoldsTransfers = true
            try await runThenTearDown(origin, { try await body($0, directory.appendingPathComponent("store")) }) {
                SimulatedTransferService.shared.simulatedHoldsTransfers = false
                try await $0.shutdown()
            }
        }
    }

    /// A launch that pins `path`, its `tasks` pieces handed to the session, then ends.
    static func pinThenEnd(
        _ folder: URL, session: String, origin: TestOrigin, path: String = "/film.mp4", tasks: Int = 3
    )
        async throws -> DownloadJob
    {
        let app = try await App.launch(folder, session: session)
        app.downloads.start()
        let job = try await app.downloads.pin(origin.url(path))
        try await waitUntil { await app.pins.tasks().count == tasks }
        try await app.terminate()
        return job
    }

    /// The ranges of the GETs `path` received.
    static func gets(_ origin: TestOrigin, _ path: String = "/film.mp4") -> [String?] {
        origin.requests(path).filter { $0.method == "GET" }.map(\.range)
    }

    /// A relaunch in the background: the session delivers the files; the app delegate's
    /// completion is called once they are stored; the downloads start.
    static func relaunch(_ folder: URL, session: String) async throws -> App {
        let app = try await App.launch(folder, session: session)
        let called = Mutex(false)
        #expect(app.assets.handleBackgroundEvents(identifier: session) { called.withLock { $0 = true } })
        #expect(!app.assets.handleBackgroundEvents(identifier: "another app's session") {})
        try await waitUntil { called.withLock { $0 } }
        app.downloads.start()
        return app
    }

    /// Every byte of each of `paths` read through the read path, with the origin stopped.
    static func expectHeldOffline(_ app: App, _ origin: TestOrigin, _ paths: [String] = ["/film.mp4"]) async throws {
        try await origin.shutdown()
        for path in paths {
            let bytes = try await collect(try await app.reader.read(origin.url(path)))
            let resource = try #require(origin.resource(at: path))
            #expect(
                bytes.readableBytes == Int(resource.length) && resource.firstMismatch(in: bytes, at: 0) == nil,
                "\(path)")
        }
    }

    @Test func aPinCompletesThroughTheSystemAfterARelaunch() async throws {
        try await Self.withOrigin { origin, folder in
            let session = "pins-\(UUID().uuidString)"
            let job = try await Self.pinThenEnd(folder, session: session, origin: origin)
            SimulatedTransferService.shared.simulatedTerminateApp()
            #expect(Self.gets(origin).isEmpty, "the app fetched no byte itself")

            // The system runs the transfers while no app object exists.
            await SimulatedTransferService.shared.simulatedRunHeldTransfers()
            #expect(Set(Self.gets(origin)) == ["bytes=0-8388607", "bytes=8388608-16777215", "bytes=16777216-19999999"])

            let second = try await Self.relaunch(folder, session: session)
            try await waitUntil { second.downloads.job(matching: job.id)?.state == .completed }
            #expect(Self.gets(origin).count == 3, "each piece asked for once")
            try await Self.expectHeldOffline(second, origin)
            try await second.terminate()
        }
    }

    /// An HLS pin: its playlists are fetched in the app, each segment of the variant and its
    /// default audio is a task the system runs while the app is gone.
    @Test func anHLSPinCompletesThroughTheSystemAfterARelaunch() async throws {
        try await Self.withOrigin { origin, folder in
            let session = "pins-\(UUID().uuidString)"
            let segments = ["v0-0", "v0-1", "a_en-0", "a_en-1"].map { "/hls/\($0).ts" }
            let job = try await Self.pinThenEnd(
                folder, session: session, origin: origin, path: "/hls/master.m3u8", tasks: 4)
            SimulatedTransferService.shared.simulatedTerminateApp()
            #expect(segments.allSatisfy { Self.gets(origin, $0).isEmpty }, "the app fetched no segment itself")
            await SimulatedTransferService.shared.simulatedRunHeldTransfers()
            let second = try await Self.relaunch(folder, session: session)
            try await waitUntil { second.downloads.job(matching: job.id)?.state == .completed }
            #expect(segments.allSatisfy { Self.gets(origin, $0).count == 1 }, "each segment asked for once")
            try await Self.expectHeldOffline(
                second, origin, ["/hls/master.m3u8", "/hls/v0.m3u8", "/hls/a_en.m3u8"] + segments)
            try await second.terminate()
        }
    }

    @Test func aForceQuitCancelsTheTransfersAndTheNextLaunchAsksAgain() async throws {
        try await Self.withOrigin { origin, folder in
            let session = "pins-\(UUID().uuidString)"
            let job = try await Self.pinThenEnd(folder, session: session, origin: origin)
            SimulatedTransferService.shared.simulatedForceQuit()

            let second = try await App.launch(folder, session: session)
            // A task no job wants (a job removed while the app was not running).
            second.pins.start(
                BackgroundTransferRequest(
                    transfer: BackgroundTransfer(job: "deadbeef", key: CacheKey("gone"), range: ByteRange(0, 10)),
                    url: origin.url("/film.mp4"), fields: [], allowsExpensiveNetworkAccess: false,
                    allowsConstrainedNetworkAccess: false, earliestBeginDate: nil))
            second.downloads.start()
            try await waitUntil {
                let tasks = await second.pins.tasks().compactMap(\.taskDescription)
                return tasks.count == 3 && tasks.allSatisfy { $0.contains(job.id) }
            }
            await SimulatedTransferService.shared.simulatedRunHeldTransfers()
            try await waitUntil { second.downloads.job(matching: job.id)?.state == .completed }
            #expect(Self.gets(origin).count == 3, "the cancelled transfers sent nothing; the new ones once each")
            try await Self.expectHeldOffline(second, origin)
            try await second.terminate()
        }
    }
}
