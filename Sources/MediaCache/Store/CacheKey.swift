public import Foundation
import Crypto

/// The identity of a cached resource.
///
/// By default it is the hex SHA-256 of the normalised URL; a caller may supply its own key
/// function, for example one that drops a CDN token from the query. A key is only ever
/// stored in the index, never used as a file name, so it may hold any characters and be
/// of any length.
public struct CacheKey: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The key's text.
    public var rawValue: String {
        didSet { textHash = rawValue.hashValue }
    }

    /// The text's hash, computed once: the store looks a key up many times per request, and
    /// a key is 64 characters or more.
    private var textHash: Int

    /// Creates a key from any text.
    public init(_ rawValue: String) {
        self.rawValue = rawValue
        textHash = rawValue.hashValue
    }

    public static func == (lhs: CacheKey, rhs: CacheKey) -> Bool {
        lhs.textHash == rhs.textHash && lhs.rawValue == rhs.rawValue
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(textHash)
    }

    private enum CodingKeys: String, CodingKey {
        case rawValue
    }

    public init(from decoder: any Decoder) throws {
        self.init(try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .rawValue))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(rawValue, forKey: .rawValue)
    }

    /// The default key for `url`: the hex SHA-256 of ``normalizedURLString(_:)``.
    public init(url: URL) {
        let digest = SHA256.hash(data: Data(CacheKey.normalizedURLString(url).utf8))
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in digest {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0f)])
        }
        self.init(String(decoding: text, as: UTF8.self))
    }

    /// The URL text the default key hashes: scheme and host lower-cased, the default port
    /// and the fragment removed; path and query kept as they are.
    public static func normalizedURLString(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return url.absoluteString
        }
        components.scheme = components.scheme?.lowercased()
        components.host = components.host?.lowercased()
        if let port = components.port,
           (components.scheme == "http" && port == 80) || (components.scheme == "https" && port == 443) {
            components.port = nil
        }
        components.fragment = nil
        if components.path.isEmpty { components.path = "/" }
        return components.string ?? url.absoluteString
    }

    public var description: String { rawValue }
}
