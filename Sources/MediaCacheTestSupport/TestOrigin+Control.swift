// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import NIOHTTP1

extension TestOrigin {
    /// Paths under this prefix control an origin started with `acceptsControl`.
    public static let controlPrefix = "/_origin/"

    /// Carries out one control request (the path after ``controlPrefix``) and returns the
    /// status and a one-line text answer:
    /// - `serve?path=/a.mp4&length=N[&seed=S][&bps=R][&mime=T]`: serve deterministic bytes
    ///   at a path, sent at about R bytes per second if given;
    /// - `stats?path=/a.mp4`: `REQUESTS BODY_BYTES_SENT` for a path;
    /// - `requests?path=/a.mp4`: one line per request received for a path;
    /// - `sign?url=U`: `U` with a fresh token of the signer in ``useSigner(_:)`` (a signing
    ///   service for a refresh command);
    /// - `reset`: forget every path's counters.
    /// Signs URLs for the `sign` control command.
    public func useSigner(_ signer: TokenSigner) {
        self.signer.withLock { $0 = signer }
    }

    func control(_ command: String, query: [String: String]) -> (HTTPResponseStatus, String) {
        switch command {
        case "serve":
            guard let path = query["path"], path.hasPrefix("/"), !path.hasPrefix(Self.controlPrefix),
                let length = query["length"].flatMap(Int64.init), length >= 0
            else {
                return (.badRequest, "serve needs path=/… and length=N\n")
            }
            var faults = Faults()
            if let rate = query["bps"] {
                guard let rate = Int64(rate), rate > 0 else { return (.badRequest, "bps must be a positive number\n") }
                faults.bytesPerSecond = rate
            }
            let seed = query["seed"].flatMap(UInt64.init) ?? 1
            serve(
                .generated(length: length, seed: seed, mimeType: query["mime"] ?? "video/mp4", faults: faults), at: path
            )
            return (.ok, "serving \(path)\n")
        case "stats":
            guard let path = query["path"] else { return (.badRequest, "stats needs path=/…\n") }
            return (.ok, "\(requests(path).count) \(bodyBytesSent(path))\n")
        case "requests":
            guard let path = query["path"] else { return (.badRequest, "requests needs path=/…\n") }
            return (.ok, requests(path).map { "\($0)\n" }.joined())
        case "sign":
            guard let url = query["url"], let signer = signer.withLock({ $0 }) else {
                return (.badRequest, "sign needs url=… and a signer\n")
            }
            return (.ok, signer.renew(url) + "\n")
        case "reset":
            resetCounters()
            return (.ok, "reset\n")
        default:
            return (.notFound, "unknown control command \(command); use serve, stats, requests or reset\n")
        }
    }
}
