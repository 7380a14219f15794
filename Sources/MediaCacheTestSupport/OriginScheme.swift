/// How a test reaches its test origin. The suites that check origin behaviour (the read
/// path, freshness, the proxy contract) run once for each, so every behaviour they check
/// holds over plain HTTP, over TLS with HTTP/1.1, and over TLS with HTTP/2.
public enum OriginScheme: String, CaseIterable, Sendable, CustomStringConvertible {
    /// Plain HTTP/1.1.
    case http
    /// HTTPS with HTTP/1.1 (the origin offers only `http/1.1` in ALPN).
    case https
    /// HTTPS with HTTP/2 (the origin offers `h2` first).
    case http2

    /// How the origin presents itself over TLS, or `nil` for plain HTTP; its certificate is
    /// from ``TestCertificateAuthority/shared``, which the harness's fetcher trusts.
    public func tlsOptions() throws -> TestOrigin.TLSOptions? {
        switch self {
        case .http: nil
        case .https: try .trusted(applicationProtocols: ["http/1.1"])
        case .http2: try .trusted(applicationProtocols: ["h2", "http/1.1"])
        }
    }

    /// The HTTP version the origin sees requests in.
    public var requestVersion: String {
        self == .http2 ? "HTTP/2.0" : "HTTP/1.1"
    }

    public var description: String { rawValue }
}
