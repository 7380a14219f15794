// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import ArgumentParser
import Foundation
public import Logging
import MediaCache
import MediaCacheHTTP
import MediaCacheHTTPFields
import MediaCacheProxy
import Metrics
import Prometheus
import ServiceLifecycle

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the local caching proxy.",
        discussion: "Give a player http://HOST:PORT/?url=<percent-encoded origin URL> instead of the origin URL."
    )

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port).")
    var port = ProxyServer.defaultPort

    @Flag(
        name: .customLong("allow-remote"),
        help: "Allow listening on an address other than loopback (implies --shared-cache).")
    var allowRemote = false

    @Flag(
        name: .customLong("shared-cache"),
        help:
            "Cache as a shared cache does (RFC 9111): several people's devices use one store, so private answers are never kept."
    )
    var sharedCache = false

    @Option(
        help:
            "The store's one folder (default: the user's data folder, mediacache/ inside it, with the streaming entries in the user's cache folder)."
    )
    var cacheDir: String?

    @Option(help: "The most the cache may hold, e.g. 500M, 2G, 1048576.", transform: ByteSize.parse)
    var maxSize: Int64 = 1 << 30

    @Option(help: "Remove entries unread for this long, e.g. 30d, 12h, 90m, 3600s.", transform: Age.parse)
    var maxAge: Duration?

    @Option(
        name: .customLong("allow-host"),
        help: "Only fetch from this origin host, also after a redirect (repeat for several).")
    var allowHosts: [String] = []

    @Option(
        name: .customLong("server-name"),
        help: "Also answer requests whose Host is this name (repeat for several; for --allow-remote).")
    var serverNames: [String] = []

    @Option(
        name: .customLong("cors-origin"),
        help: "Let pages from this web origin (https://app.example) read answers from script (repeat for several).")
    var corsOrigins: [String] = []

    @Option(
        help: "The most pinned downloads may hold, within --max-size (default: half of it), e.g. 4G.",
        transform: ByteSize.parse)
    var maxPinnedSize: Int64?

    @Option(help: "How many pinned downloads run at once; the others wait, queued.")
    var maxDownloads = DownloadQueue.Configuration().maxConcurrent

    @OptionGroup(title: "Pinned downloads: when, where, how fast")
    var downloadRules: ServeDownloadOptions

    @OptionGroup(title: "Origins that fail, URLs that expire")
    var origins: ServeOriginOptions

    @OptionGroup(title: "Devices of the network")
    var lan: ServeLANOptions

    @Flag(
        help:
            "Never contact an origin: serve what is cached whatever its freshness, answer 504 for the rest (a flight).")
    var offline = false

    @Flag(
        help:
            "Send CMCD (CTA-5004) to origins for players that send none (session, format, object type, duration), and mark the cache's own fetches with io.mediacache-own."
    )
    var cmcd = false

    @Option(
        name: .customLong("ignore-query-param"),
        help:
            "Leave this query parameter out of cache keys; the origin still gets it (a CDN's signature: repeat for several)."
    )
    var ignoredQueryParameters: [String] = []

    @Option(
        name: .customLong("ignore-query-preset"),
        help:
            "Leave a CDN's signature parameters out of cache keys: cloudfront, s3, gcs, akamai, azure or token (repeat for several)."
    )
    var ignoredQueryPresets: [String] = []

    @Option(
        name: .customLong("same-content-hosts"),
        help:
            "Hosts, comma-separated, that serve the same bytes at the same paths (a stream's CDNs under content steering): one cache key for all (repeat for several groups)."
    )
    var sameContentHosts: [String] = []

    @Flag(
        name: .customLong("prefer-cache"),
        help:
            "Serve cached files without asking the origin whatever it says of their freshness (zero traffic on replay; a changed file is noticed only at bytes not yet cached)."
    )
    var preferCache = false

    @Flag(
        name: .customLong("no-stale-on-error"),
        help: "Do not serve a stale cached copy when the origin cannot be reached or answers 5xx.")
    var noStaleOnError = false

    @Option(
        name: .customLong("read-ahead-segments"),
        help:
            "How many segments to store ahead of a player playing through an HLS media playlist or a DASH representation (0: none); saves it a round trip per segment."
    )
    var readAheadSegments = 1

    @Option(
        help: "The most bytes one preload queue fetches from origins (mediacache preload), e.g. 256M.",
        transform: ByteSize.parse)
    var preloadBudget = CachingReader.Configuration().preloadBudget

    @Option(
        help:
            "Which played files are fetched on to their end once a player starts them (a seek, a resume, the next play are then local): none, audio (audio files up to 512M, the default), all, or a size (every file up to it, e.g. 2G).",
        transform: { text in
            guard let policy = FillPolicy(text) ?? (try? ByteSize.parse(text)).map(FillPolicy.upTo) else {
                throw ValidationError("--fill-on-play takes none, audio, all or a size (2G), not \(text.prefix(40)).")
            }
            return policy
        })
    var fillOnPlay = FillPolicy.audio

    @Option(help: "How many preload items are fetched at once.")
    var preloadConcurrency = CachingReader.Configuration().preloadConcurrency

    @Option(help: "The most connections open at once; one more gets 503.")
    var maxConnections = ProxyConfiguration().maxConnections

    @Option(help: "Event loops that accept and serve connections, each on its own socket (at most one per core).")
    var threads = ProxyConfiguration().eventLoops

    @Option(help: "The longest request target in bytes; a longer one gets 414.")
    var maxUriBytes = ProxyConfiguration().maxURIBytes

    @Option(help: "The most bytes of request header fields; more gets 431.")
    var maxHeaderBytes = ProxyConfiguration().maxHeaderBytes

    @Option(help: "Seconds a request may take to arrive whole after its first byte.")
    var requestTimeout = 10

    @Option(help: "Seconds a connection may stay without traffic.")
    var idleTimeout = 120

    @Option(help: "The most redirects followed for one origin request.")
    var maxRedirects = HTTPOriginFetcher.Configuration().maxRedirects

    @Option(
        name: .customLong("origin-connections"),
        help:
            "The most connections to one origin host at once; players wait for none of the quarter the cache's own downloads may hold."
    )
    var originConnections = HTTPOriginFetcher.Configuration().connectionsPerHost

    @Option(
        name: .customLong("ca-file"),
        help:
            "Also trust the CA certificates in this PEM file for https origins (repeat for several); the system's roots stay trusted."
    )
    var caFiles: [String] = []

    @Flag(
        name: .customLong("insecure-skip-verify"),
        help:
            "Accept any certificate from https origins (expired, self-signed, another host's). Anyone on the path can then change what is cached; every log line warns."
    )
    var insecureSkipVerify = false

    @Flag(name: .customLong("http1-only"), help: "Speak HTTP/1.1 to https origins even when they offer HTTP/2.")
    var http1Only = false

    @Option(
        name: .customLong("parent-proxy"),
        help: """
            Send origin requests through this proxy (http://[user:password@]host:port, or socks5://host:port), but for the hosts \
            no_proxy names. Without it, http_proxy, https_proxy, all_proxy and no_proxy apply as curl reads them.
            """)
    var parentProxy: String?

    @Flag(
        name: .customLong("no-cookies"),
        help:
            "Keep no cookies for origins: a player's Cookie field is sent on as it is, and streams behind signed cookies it does not send fail."
    )
    var noCookies = false

    @Option(
        name: .customLong("encryption-key-file"),
        help:
            "Encrypt the cache at rest with the 256-bit key in this file (32 raw bytes or 64 hex characters: head -c 32 /dev/urandom > key; chmod 600 key)."
    )
    var encryptionKeyFile: String?

    @Option(
        help:
            "Require this token as ?token= or the X-MediaCache-Token header (or set MEDIACACHE_TOKEN: other users can read a command line, not the environment). Needed with --allow-remote."
    )
    var token: String?

    /// `--token`, else `MEDIACACHE_TOKEN`.
    var accessToken: String? { token ?? ProcessInfo.processInfo.environment["MEDIACACHE_TOKEN"] }

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    func validate() throws {
        _ = try proxyConfiguration(logger: Logger(label: "validate"))
        _ = try trustRoots()
        if let token = accessToken, token.isEmpty {
            throw ValidationError("--token (or MEDIACACHE_TOKEN) must not be empty.")
        }
        guard (0...50).contains(maxRedirects) else { throw ValidationError("--max-redirects must be 0...50.") }
        guard (2...256).contains(originConnections) else {
            throw ValidationError("--origin-connections must be 2...256.")
        }
        _ = try KeyFile.load(encryptionKeyFile)
        _ = try CacheOptions.keyRule(parameters: ignoredQueryParameters, presets: ignoredQueryPresets)
        _ = try CacheOptions.hostGroups(sameContentHosts)
        if let maxPinnedSize, maxPinnedSize > maxSize {
            throw ValidationError(
                "--max-pinned-size (\(ByteSize.format(maxPinnedSize))) must fit within --max-size (\(ByteSize.format(maxSize)))."
            )
        }
        guard (1...64).contains(maxDownloads) else { throw ValidationError("--max-downloads must be 1...64.") }
        guard (0...8).contains(readAheadSegments) else { throw ValidationError("--read-ahead-segments must be 0...8.") }
        guard preloadBudget > 0 else { throw ValidationError("--preload-budget must be above 0.") }
        guard (1...8).contains(preloadConcurrency) else {
            throw ValidationError("--preload-concurrency must be 1...8.")
        }
    }

    func run() async throws {
        LoggingSystem.bootstrap { RedactingLogHandler(StreamLogHandler.standardError(label: $0)) }
        // Metrics go to a Prometheus registry, exported at /metrics.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        var logger = Logger(label: "mediacache")
        logger.logLevel = logLevel
        if insecureSkipVerify {
            logger.warning(
                "Origin certificates are NOT verified (--insecure-skip-verify): anyone between this machine and an https origin can read and change what is cached."
            )
        }
        let directory = cacheDir.map { URL(fileURLWithPath: $0) } ?? StoreFolders.store()
        // Before the store opens: how many data files it keeps open follows the limit.
        DescriptorLimit.raise()

        let (encryptionKey, keyWarning) = try KeyFile.load(encryptionKeyFile)
        if let keyWarning { logger.warning("\(keyWarning)") }
        var storeConfiguration = CacheStore.Configuration()
        storeConfiguration.encryptionKey = encryptionKey
        storeConfiguration.maxBytes = maxSize
        storeConfiguration.maxAge = maxAge
        storeConfiguration.maxPinnedBytes = maxPinnedSize
        storeConfiguration.keyRule = try CacheOptions.keyRule(
            parameters: ignoredQueryParameters, presets: ignoredQueryPresets)
        storeConfiguration.keyRule.sameContentHosts = try CacheOptions.hostGroups(sameContentHosts)
        storeConfiguration.minFreeDiskBytes = downloadRules.minFreeDisk
        storeConfiguration.cacheDirectory = cacheDir == nil ? StoreFolders.streaming() : nil
        storeConfiguration.logger = logger
        let store: CacheStore
        do {
            store = try await CacheStore.open(directory: directory, configuration: storeConfiguration)
        } catch let error as CacheError {
            throw ValidationError(Advice.message(error))
        }
        do {
            try FolderSettings(storeConfiguration).save(in: directory)
        } catch {
            logger.warning(
                "Cannot record the settings in the cache folder; commands run without the server use the defaults",
                metadata: ["error": "\(error)"])
        }
        var fetcherConfiguration = HTTPOriginFetcher.Configuration()
        fetcherConfiguration.allowedHosts = Set(allowHosts)
        fetcherConfiguration.maxRedirects = maxRedirects
        fetcherConfiguration.connectionsPerHost = originConnections
        fetcherConfiguration.logger = logger
        fetcherConfiguration.trustRoots = try trustRoots()
        fetcherConfiguration.skipsCertificateVerification = insecureSkipVerify
        fetcherConfiguration.usesHTTP2 = !http1Only
        fetcherConfiguration.proxies = try OriginProxies.forCommand(parent: parentProxy)
        for server in fetcherConfiguration.proxies.servers {
            logger.notice("Origin requests go through a proxy", metadata: ["proxy": "\(server)"])
        }
        fetcherConfiguration.isSharedCache = sharedCache || allowRemote
        if fetcherConfiguration.isSharedCache {
            logger.notice(
                "Caching as a shared cache: private answers and answers to requests with Authorization are not kept (unless the origin allows it), and no cookies are kept."
            )
        }
        // One person's cookies must not open a stream for another: a shared cache keeps none.
        if noCookies || fetcherConfiguration.isSharedCache { fetcherConfiguration.cookieJar = nil }
        let fetcher = HTTPOriginFetcher(configuration: fetcherConfiguration)
        var readerConfiguration = CachingReader.Configuration()
        readerConfiguration.logger = logger
        readerConfiguration.prefersCache = preferCache
        readerConfiguration.servesStaleOnOriginFailure = !noStaleOnError
        readerConfiguration.isOffline = offline
        readerConfiguration.originConnectionsPerHost = originConnections
        if cmcd { readerConfiguration.ownRequestFields = CMCD(isCachesOwn: true).fields }
        readerConfiguration.segmentReadAhead = readAheadSegments
        readerConfiguration.fillOnPlay = fillOnPlay
        origins.apply(to: &readerConfiguration)
        readerConfiguration.preloadBudget = preloadBudget
        readerConfiguration.preloadConcurrency = preloadConcurrency
        let reader = CachingReader(store: store, fetcher: fetcher, configuration: readerConfiguration)
        var downloadsConfiguration = DownloadQueue.Configuration()
        downloadsConfiguration.maxConcurrent = maxDownloads
        downloadsConfiguration.rules = try downloadRules.rules()
        downloadsConfiguration.lowBatteryLevel = Double(downloadRules.lowBattery) / 100
        downloadsConfiguration.scrub = downloadRules.scrub
        downloadsConfiguration.logger = logger
        let downloads: DownloadQueue
        do {
            downloads = try DownloadQueue(reader: reader, configuration: downloadsConfiguration)
        } catch let error as CacheError {
            throw ValidationError(Advice.message(error))
        }
        // Offline, the queue waits: its jobs would only fail.
        var following: [Task<Void, Never>] = []
        if !offline {
            // The power first: a job that must wait for it does not start before it is known.
            await SystemPower.tell(downloads, folder: downloadRules.powerSupply, logger: logger)
            downloads.start()
            following = [
                SystemNetwork.follow(into: downloads, logger: logger),
                SystemPower.follow(into: downloads, folder: downloadRules.powerSupply, logger: logger),
            ]
        }
        var configuration = try proxyConfiguration(logger: logger)
        if configuration.lanAddress != nil {
            configuration.lanCapabilities = try CacheFolder.lanCapabilities(in: directory)
            configuration.lanRevocations = await LANRevocations.loading(directory.appendingPathComponent("lan.revoked"))
        }
        configuration.serverInfoFile = CacheFolder.serverFile(in: directory)
        configuration.metricsExporter = { MetricsHelp.annotate(registry.emitToString()) }
        let proxy = configuration
        let hasToken = proxy.token != nil
        let limit = maxSize
        let encrypted = encryptionKey != nil
        let isOffline = offline
        let app = ProxyServer.application(reader: reader, downloads: downloads, configuration: proxy) { port in
            let base = "http://\(proxy.host.contains(":") ? "[\(proxy.host)]" : proxy.host):\(port)"
            let example =
                "https://example.com/song.mp3".addingPercentEncoding(withAllowedCharacters: .urlUnreserved) ?? ""
            print(
                "mediacache: serving on \(base), caching in \(directory.path) (limit \(ByteSize.format(limit))\(encrypted ? ", encrypted" : "")\(isOffline ? ", offline: no origin is contacted" : ""))"
            )
            // The token itself is not printed: the output may end up in a journal.
            print("Give a player: \(base)/?url=\(example)\(hasToken ? "&token=<the token>" : "")")
            if let address = proxy.lanAddress {
                print(
                    "Devices of the network: `mediacache url --lan --running URL` prints a URL on \(address):\(port).")
            }
            fflush(nil)
        }
        let group = ServiceGroup(
            configuration: .init(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch {
            for task in following { task.cancel() }
            await downloads.shutDown()
            await reader.shutDown()
            try? await store.close()
            try? await fetcher.shutdown()
            if let error = error as? ProxyError {
                FileHandle.standardError.write(Data("mediacache: \(Advice.message(error))\n".utf8))
                throw ExitCode(1)
            }
            throw error
        }
        // In-flight requests have ended; stop the downloads that outlive them (a prefetch's),
        // then commit what they all wrote. Pinned downloads stop as they are: the next start resumes them.
        for task in following { task.cancel() }
        for task in following { await task.value }
        await downloads.shutDown()
        await reader.shutDown()
        try await store.close()
        try await fetcher.shutdown()
        logger.info("Stopped; the cache index is committed.")
    }
}
