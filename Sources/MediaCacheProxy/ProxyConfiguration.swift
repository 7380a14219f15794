// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import Logging
package import MediaCache
public import NIOCore

/// Options for the proxy.
public struct ProxyConfiguration: Sendable {
    /// The address to listen on; anything but loopback also needs ``allowsRemoteClients``.
    public var host = "127.0.0.1"
    /// The port to listen on (0: any free port).
    public var port = ProxyServer.defaultPort
    /// Must be set to listen on a non-loopback address, so the proxy is never an open
    /// proxy for the network by accident; it needs a ``token``.
    public var allowsRemoteClients = false
    /// Names other than the listening address that clients may put in `Host` (for
    /// `--allow-remote` setups reached by a DNS name). `127.0.0.1`, `localhost`, `[::1]`
    /// and the listening address are always accepted; with a wildcard listening address
    /// (`0.0.0.0`, `::`) any IP literal is too. A request naming another host gets `421`:
    /// a web page that rebinds its own domain to 127.0.0.1 must not reach the proxy.
    ///
    /// The allow-list of *origin* hosts is `HTTPOriginFetcher.Configuration.allowedHosts`,
    /// checked on the URL asked for and on every redirect.
    public var serverNames: Set<String> = []
    /// If set, every request must carry it as the `token` query item or the
    /// `X-MediaCache-Token` header. Required with ``allowsRemoteClients``.
    public var token: String?
    /// Web origins (`https://app.example`) whose pages may use the proxy: their requests get
    /// `Access-Control-Allow-Origin` and their preflights (`OPTIONS`, Chrome's Private Network
    /// Access included) are answered, so script players (hls.js, Shaka, dash.js) and
    /// `<video crossorigin>` work. A browser request from any other site (`Sec-Fetch-Site:
    /// cross-site`) is refused with `403` before the cache is looked at. Empty (the default): no
    /// CORS header is ever sent, and only the user, players and pages of the same site may use it.
    public var corsOrigins: Set<String> = []
    /// Send CMCD (CTA-5004) to the origin for a player that sends none: a session id per
    /// playback, the streaming format, each object's type and a segment's duration, as far as
    /// the proxy knows them (`serve --cmcd`). A player's own CMCD always goes on as it came.
    public var addsCMCD = false
    /// The longest request target (`/?url=…`) in bytes; a longer one gets `414`.
    public var maxURIBytes = 8 << 10
    /// The most bytes a request's header fields may hold; more gets `431`. The parser
    /// stops reading a request head at ``maxURIBytes`` + ``maxHeaderBytes``, so a client
    /// cannot make the proxy buffer more than that.
    public var maxHeaderBytes = 16 << 10
    /// A request must arrive whole within this time of its first byte, or its connection
    /// is closed (a client that sends its head a byte at a time holds nothing for long).
    public var requestTimeout = TimeAmount.seconds(10)
    /// A connection with no traffic for this long is closed.
    public var idleTimeout = TimeAmount.seconds(120)
    /// The most connections open at once; a request on one more gets `503` with
    /// `Retry-After` and its connection is closed, while the others keep being served.
    public var maxConnections = 512
    /// How many event loops accept and serve connections (`serve --threads`), each listening
    /// on its own socket at the port (`SO_REUSEPORT`); at most the loops of NIO's shared group
    /// (one per core). 1: one socket, one loop.
    package var eventLoops = 1
    /// A file the running server describes itself in (``ServerInfo``: address, port, token,
    /// process), written once it listens and removed when it stops: `mediacache ls` and the
    /// other commands find the server that holds a cache folder through it. `nil`: none.
    public var serverInfoFile: URL?
    /// The metrics in Prometheus's text format, served at `GET /metrics` (`mediacache serve`
    /// sets it to its swift-prometheus registry's export); `nil`: `/metrics` is 404.
    public var metricsExporter: (@Sendable () -> String)?
    /// A LAN address to listen on too, at the same port (`serve --lan`), for the devices of the
    /// network that fetch a URL themselves: AirPlay receivers, Chromecasts, a TV's browser.
    /// There the proxy answers only capability URLs, each carrying a credential minted for what
    /// it names (`LANCapabilities`: the path form's `/o/<origin>.<credential>/…` or `token=`;
    /// never the header, never the server's ``token``), refuses the admin paths, the metrics and
    /// the status page (`403`), and does not apply the cross-site guard to a request whose URL
    /// carries a credential: a receiver page's `<video>` sends no CORS request, and the URL is the
    /// credential. ``corsOrigins`` apply there as on loopback. Loopback answers as without it.
    public var lanAddress: String?
    /// Whether this is the configuration of the LAN listener (the server makes it from its own).
    package var isLANListener = false
    /// The key the LAN listener's URLs are minted with (`serve` keeps it in the store folder);
    /// `nil`: the server makes one for its run.
    package var lanCapabilities: LANCapabilities?
    /// The LAN URLs revoked one by one (in memory unless given a file).
    package var lanRevocations = LANRevocations()
    /// The name this proxy gives itself in the `Via` field of what it sends an origin (RFC 9110
    /// §7.6.3: a pseudonym, new for each configuration, that says nothing of the host), and by
    /// which it knows a request that came back through it.
    package var pseudonym = "mediacache-" + String(UInt32.random(in: .min ... .max), radix: 16)
    /// Judges where an origin named by a name resolves, for a LAN URL that reaches only the
    /// internet (the system's resolver; a test gives its own answers).
    package var addressResolver = AddressResolver.system
    /// Where the proxy logs (one line per request at info level).
    public var logger = Logger(label: "mediacache.proxy")

    /// Creates the default configuration.
    public init() {}

    /// The credential this listener's URL of `target` carries: the ``token`` on loopback, one
    /// minted for `target` on the LAN (with `folderDepth`, for the folder of its path's first
    /// segments: a DASH base).
    func credential(for target: ProxyTarget, folderDepth: Int? = nil) -> String? {
        guard isLANListener else { return token }
        var grant = LANCapabilities.Grant.publicAddressesOnly
        if let minting, minting.authority == LANCapabilities.authority(of: target.origin) { grant = minting.grant }
        return lanCapabilities?.credential(for: target, folderDepth: folderDepth, grant: grant, until: minting?.until)
    }

    /// On the LAN listener, while a request's playlist or manifest is rewritten: its origin and
    /// what its URL grants. A URL of that origin is minted with the same grant; one of another
    /// origin reaches only the internet (so is one minted without this).
    var minting: Minting?

    /// A request's origin and what its URL grants (a type of its own: an optional tuple in a
    /// configuration copied per request was destroyed through generic value witnesses).
    struct Minting {
        var authority: String
        var grant: LANCapabilities.Grant
        /// When the request's own credential expires: what its answer names expires with it.
        var until: Int64?
    }

    /// `target`'s path and query on this listener, with its credential (``credential(for:folderDepth:)``).
    func uri(of target: ProxyTarget, folderDepth: Int? = nil) -> String {
        var target = target
        target.token = credential(for: target, folderDepth: folderDepth)
        return target.uri
    }

    /// The path form of `url` on this listener (a DASH reference, a steering server); a folder's
    /// (a URL ending in `/`, a DASH base) is minted for what lies under it.
    func pathForm(for url: URL) -> String {
        let target = ProxyTarget(url, form: .path)
        // (Not `URL.path`: it drops a trailing slash.)
        let path = LANCapabilities.path(of: url)
        let depth = path.split(separator: "/", omittingEmptySubsequences: false).count - 2
        return uri(of: target, folderDepth: path.hasSuffix("/") ? max(0, depth) : nil)
    }

    /// The configuration of the LAN listener: this one's, listening on ``lanAddress``.
    var lanListener: ProxyConfiguration? {
        guard let lanAddress else { return nil }
        var lan = self
        lan.host = lanAddress
        lan.lanAddress = nil
        lan.isLANListener = true
        lan.serverInfoFile = nil
        return lan
    }

    /// Checks that the address is loopback unless remote clients are allowed, and that remote
    /// clients and a LAN address need a token.
    /// - Throws: ``ProxyError`` when the combination is unsafe.
    public func validate() throws {
        let loopback = ["127.0.0.1", "localhost", "::1"].contains(host.lowercased()) || host.hasPrefix("127.")
        if !loopback && !allowsRemoteClients {
            throw ProxyError(
                "Listening on \(host) would let other machines use this proxy to fetch any URL; remote clients must be allowed on purpose, with a token.",
                setting: .allowsRemoteClients)
        }
        if allowsRemoteClients && (token ?? "").isEmpty {
            throw ProxyError(
                "Remote clients need an access token: without one, anyone on the network could make this proxy fetch any address this machine reaches (its LAN and loopback included) and read or clear the cache.",
                setting: .token)
        }
        guard (0...65535).contains(port) else { throw ProxyError("The port must be between 0 and 65535, not \(port).") }
        guard maxConnections > 0, maxURIBytes > 0, maxHeaderBytes > 0 else {
            throw ProxyError("The connection, URI and header limits must be positive.")
        }
    }
}

/// An error in the proxy's setup.
public struct ProxyError: Error, CustomStringConvertible {
    /// Which setting of ``ProxyConfiguration`` to change, as data: the command line names its
    /// flag, an app its own control.
    public struct Setting: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// ``ProxyConfiguration/host``.
        public static let host = Setting(rawValue: "host")
        /// ``ProxyConfiguration/port``.
        public static let port = Setting(rawValue: "port")
        /// ``ProxyConfiguration/allowsRemoteClients``.
        public static let allowsRemoteClients = Setting(rawValue: "allowsRemoteClients")
        /// ``ProxyConfiguration/token``.
        public static let token = Setting(rawValue: "token")
        public var description: String { rawValue }
    }

    /// What went wrong.
    public var message: String
    /// The setting that would end it, when one would.
    public var setting: Setting?
    /// Creates an error.
    public init(_ message: String) { self.message = message }
    /// Creates an error that `setting` would end.
    public init(_ message: String, setting: Setting) {
        self.message = message
        self.setting = setting
    }
    public var description: String { message }
}
