public import Foundation

/// A host with an optional port, as a `Host` header (RFC 9110 §7.2) or a URL's authority
/// (RFC 3986 §3.2.2) holds it: `name[:port]` or `[IPv6]:port`. The name is lower-cased and
/// kept without brackets; the port is within 0...65535 or the whole thing is refused.
package struct HostAndPort: Hashable, Sendable {
    package var name: String
    package var port: Int?

    /// The authority of `url` (its user info dropped); `nil` when it is not a plain
    /// `name[:port]` with a port in range (Foundation accepts a port of 30 digits).
    package init?(authorityOf url: URL) {
        let text = url.absoluteString
        guard let schemeEnd = text.range(of: "://") else { return nil }
        let afterScheme = text[schemeEnd.upperBound...]
        let authority = afterScheme.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostPart = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        self.init(parsing: String(hostPart))
    }

    /// `nil` when the value is not a host with an optional port (or is longer than 300 bytes).
    package init?(parsing value: String) {
        let text = Substring(value).trimmingSpacesAndTabs()
        guard !text.isEmpty, text.utf8.count <= 300 else { return nil }
        let portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let literal = text[text.index(after: text.startIndex)..<close]
            guard !literal.isEmpty, literal.contains(":"), literal.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
            name = literal.lowercased()
            let rest = text[text.index(after: close)...]
            if rest.isEmpty {
                portText = nil
            } else {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2, !parts[0].isEmpty,
                  parts[0].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_") })
            else { return nil }
            name = parts[0].lowercased()
            portText = parts.count == 2 ? parts[1] : nil
        }
        if let portText, !portText.isEmpty {
            guard let number = HTTPNumber.strict(portText), number <= 65535 else { return nil }
            port = Int(number)
        } else {
            port = nil
        }
    }

    /// Whether the name is an IPv4 (`a.b.c.d`) or IPv6 address rather than a DNS name.
    package var isIPLiteral: Bool {
        if name.contains(":") { return true }  // only a bracketed IPv6 literal gets here with a colon
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) && Int($0)! <= 255 }
    }
}

extension Substring {
    package func trimmingSpacesAndTabs() -> Substring {
        var slice = self
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return slice
    }
}
