// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCache

/// `mediacache verify [URL…]`: every stored block checked against its checksum now.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check stored bytes against their checksums, and fetch damaged ones again.",
        discussion: """
            Reads every stored block of the entries of the URLs given (of every entry without one) \
            and checks it against its checksum (an encrypted cache's seal), whatever was checked \
            before. A block that fails is dropped and, unless --no-repair, fetched from the origin \
            again. A whole entry whose origin sent a digest (Repr-Digest, a whole answer's \
            Content-Digest, x-amz-checksum-sha256 or -crc32c, x-goog-hash) is checked against it too; \
            one that does not match is dropped. Prints each damaged entry with its URL and byte \
            ranges; exits with status 1 when an entry stays damaged or did not match its digest. \
            Through the running server when one holds the folder.
            """)

    @Argument(help: "Origin URLs whose entries to check (default: every entry).")
    var urls: [String] = []

    @Flag(help: "Only report damaged bytes; do not fetch them again.")
    var noRepair = false

    @OptionGroup var options: CacheOptions

    func run() async throws {
        let urls = try urls.map(originURL)
        try await failing {
            let reports = try await options.withCache { try await $0.verify(urls, repair: !noRepair) }
            if options.json {
                try printJSON(reports)
            } else {
                for report in reports where report.originDigest == .mismatched {
                    print("digest mismatch (dropped)  \(report.url)")
                }
                for report in reports where !report.found.isEmpty || !report.damaged.isEmpty {
                    let state =
                        report.isSound ? "repaired" : (report.repairTried ? "damaged (repair failed)" : "damaged")
                    let ranges = (report.isSound ? report.found : report.damaged).map { "\($0[0])-\($0[1] - 1)" }
                    print("\(state)  \(report.url)  bytes \(ranges.joined(separator: ","))")
                }
                let damaged = reports.filter { !$0.isSound }.count
                let checked = reports.reduce(Int64(0)) { $0 + $1.checkedBytes }
                let matched = reports.filter { if case .matched = $0.originDigest { true } else { false } }.count
                print(
                    "\(reports.count) entr\(reports.count == 1 ? "y" : "ies") checked (\(Format.bytes(checked))), \(damaged) damaged, \(matched) matching their origin's digest"
                )
            }
            if reports.contains(where: { !$0.isSound }) {
                throw CommandFailure(
                    "Some stored bytes are damaged and could not be fetched again, or did not match their origin's digest."
                )
            }
        }
    }
}
