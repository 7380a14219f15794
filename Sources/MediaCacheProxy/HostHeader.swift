import MediaCacheHTTP

/// A request's `Host` header, parsed by RFC 9110 §7.2 / RFC 3986 §3.2.2: `name[:port]` or
/// `[IPv6]:port`. The name is lower-cased and kept without brackets.
struct HostHeader: Hashable {
    var name: String
    var port: Int?

    /// `nil` when the value is not a host with an optional port (or is longer than 300 bytes).
    init?(parsing value: String) {
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
        if let portText {
            guard let number = HTTPNumber.strict(portText), number <= 65535 else { return nil }
            port = Int(number)
        } else {
            port = nil
        }
    }

    /// Whether the name is an IPv4 (`a.b.c.d`) or IPv6 address rather than a DNS name.
    var isIPLiteral: Bool {
        if name.contains(":") { return true }  // only a bracketed IPv6 literal gets here with a colon
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) && Int($0)! <= 255 }
    }
}

extension ProxyConfiguration {
    /// Whether a request naming `host` was meant for this proxy listening on `localPort`
    /// (see ``ProxyConfiguration/serverNames``). A DNS rebinding page can only send its own name, so
    /// accepting IP literals on a wildcard address opens nothing to it.
    func accepts(_ header: HostHeader, localPort: Int) -> Bool {
        guard header.port == localPort || (header.port == nil && localPort == 80) else { return false }
        var listening = host.lowercased()
        if listening.hasPrefix("["), listening.hasSuffix("]") { listening = String(listening.dropFirst().dropLast()) }
        if ["127.0.0.1", "localhost", "::1", listening].contains(header.name) { return true }
        if serverNames.contains(where: { $0.lowercased() == header.name }) { return true }
        return ["0.0.0.0", "::", ""].contains(listening) && header.isIPLiteral
    }
}

extension Substring {
    func trimmingSpacesAndTabs() -> Substring {
        var slice = self
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return slice
    }
}
