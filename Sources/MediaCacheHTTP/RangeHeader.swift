public import MediaCache

/// A single byte range from an HTTP `Range` header: `a-b`, `a-` or `-n`.
public enum RangeSpecifier: Sendable, Hashable {
    /// Bytes `first` through `last` (inclusive), or to the end when `last` is `nil`.
    case from(first: Int64, last: Int64?)
    /// The last `length` bytes.
    case suffix(length: Int64)

    /// What a `Range` header value holds.
    public enum Parsed: Sendable, Hashable {
        /// One range.
        case single(RangeSpecifier)
        /// Several ranges; the first is given.
        case multiple(first: RangeSpecifier)
        /// Not a valid `bytes=` range: per RFC 9110 the header is then ignored.
        case invalid
    }

    /// Parses a `Range` header value such as `bytes=0-1023`.
    public static func parse(_ value: String) -> Parsed {
        let trimmed = value.trimmingHTTPWhitespace()
        guard trimmed.lowercased().hasPrefix("bytes=") else { return .invalid }
        let specs = trimmed.dropFirst("bytes=".count).split(separator: ",", omittingEmptySubsequences: false)
        var parsed: [RangeSpecifier] = []
        for spec in specs {
            guard let one = parseOne(Substring(String(spec).trimmingHTTPWhitespace())) else { return .invalid }
            parsed.append(one)
        }
        guard let first = parsed.first else { return .invalid }
        return parsed.count == 1 ? .single(first) : .multiple(first: first)
    }

    private static func parseOne(_ spec: Substring) -> RangeSpecifier? {
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.allSatisfy(\.isASCIIDigit) }) else { return nil }
        if parts[0].isEmpty {
            guard let length = Int64(parts[1]) else { return nil }
            return .suffix(length: length)
        }
        guard let first = Int64(parts[0]) else { return nil }
        if parts[1].isEmpty { return .from(first: first, last: nil) }
        guard let last = Int64(parts[1]), last >= first else { return nil }
        return .from(first: first, last: last)
    }

    /// The bytes this specifier selects in a resource of `length` bytes, or `nil` when it is
    /// unsatisfiable (it starts at or past the end, or asks for an empty suffix).
    public func resolve(length: Int64) -> ByteRange? {
        switch self {
        case .from(let first, let last):
            guard first < length else { return nil }
            return ByteRange(first, min(length, (last ?? (length - 1)) + 1))
        case .suffix(let suffix):
            guard suffix > 0, length > 0 else { return nil }
            return ByteRange(max(0, length - suffix), length)
        }
    }

    /// The header value for `range`: `bytes=a-b`, with `b` inclusive.
    public static func headerValue(for range: ByteRange) -> String {
        "bytes=\(range.lowerBound)-\(range.upperBound - 1)"
    }
}

/// A `Content-Range` header: `bytes a-b/total`, `bytes a-b/*` or `bytes */total`.
public struct ContentRange: Sendable, Hashable {
    /// The bytes the body holds, or `nil` for `bytes */total` (with a 416).
    public var range: ByteRange?
    /// The resource's total length, if given.
    public var totalLength: Int64?

    /// Creates a content range.
    public init(range: ByteRange?, totalLength: Int64?) {
        self.range = range
        self.totalLength = totalLength
    }

    /// Parses a header value; `nil` when malformed.
    public init?(parsing value: String) {
        let trimmed = value.trimmingHTTPWhitespace()
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let rest = trimmed.dropFirst("bytes ".count)
        let halves = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        if halves[1] == "*" {
            totalLength = nil
        } else {
            guard let total = Int64(halves[1]), total >= 0 else { return nil }
            totalLength = total
        }
        if halves[0] == "*" {
            guard totalLength != nil else { return nil }
            range = nil
            return
        }
        let bounds = halves[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]), first >= 0, last >= first else { return nil }
        if let total = totalLength, last >= total { return nil }
        range = ByteRange(first, last + 1)
    }

    /// The header value: `bytes a-b/total`, or `bytes */total` without a range.
    public var headerValue: String {
        let total = totalLength.map(String.init) ?? "*"
        guard let range else { return "bytes */\(total)" }
        return "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)"
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

extension String {
    func trimmingHTTPWhitespace() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return String(slice)
    }
}
