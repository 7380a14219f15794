// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Crypto
import Foundation
import MediaCache

/// What sealing and opening the blocks of an encrypted store costs on this machine, for each
/// AEAD swift-crypto offers, against copying the same bytes: the figure behind the choice of
/// cipher and block size for encryption at rest.
struct CryptoBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crypto",
        abstract:
            "Seal and open 64 KiB blocks with the store's EntryCipher (AES-GCM) and with swift-crypto's ChaCha20-Poly1305 and AES-GCM alone; prints MiB/s and the ratio to a plain copy, in one run."
    )

    @Option(help: "MiB sealed and opened per cipher.")
    var mebibytes: Int = 256

    @Option(help: "Plaintext bytes per block.")
    var blockSize: Int = 64 << 10

    func validate() throws {
        guard (1...16384).contains(mebibytes), (1024...(16 << 20)).contains(blockSize) else {
            throw ValidationError("--mebibytes must be 1...16384 and --block-size 1024...16777216.")
        }
    }

    func run() throws {
        let total = mebibytes << 20
        let blocks = max(1, total / blockSize)
        let plaintext = (0..<blockSize).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 17) }
        let key = SymmetricKey(size: .bits256)
        let seconds = { (start: ContinuousClock.Instant) in (ContinuousClock.now - start).seconds }
        let mib = Double(blocks * blockSize) / 1_048_576

        var sink = 0
        var copy = [UInt8](repeating: 0, count: blockSize)
        var start = ContinuousClock.now
        for _ in 0..<blocks {
            copy.withUnsafeMutableBytes { target in plaintext.withUnsafeBytes { target.copyMemory(from: $0) } }
            sink &+= Int(copy[blockSize / 2])
        }
        let copyRate = mib / seconds(start)
        print(String(format: "copy:              %8.0f MiB/s", copyRate))

        let cipher = EntryCipher(
            masterKey: key, cacheKey: CacheKey("bench"), layout: BlockLayout(blockSize: Int64(blockSize)))
        let coverage = [ByteRange(0, Int64(blockSize))]
        var sealed: [UInt8] = []
        start = ContinuousClock.now
        for index in 0..<blocks {
            sealed = try cipher.seal(plaintext, index: Int64(index), version: 1, coverage: coverage)
        }
        let entrySeal = mib / seconds(start)
        start = ContinuousClock.now
        for _ in 0..<blocks {
            sink &+= Int(try cipher.open(sealed[...], index: Int64(blocks - 1), version: 1).plaintext[0])
        }
        let entryOpen = mib / seconds(start)
        print(
            String(
                format:
                    "AES-256-GCM:       seal %6.0f MiB/s (%.2f× copy), open %6.0f MiB/s (%.2f× copy)  [EntryCipher]",
                entrySeal, entrySeal / copyRate, entryOpen, entryOpen / copyRate))

        var chacha = try ChaChaPoly.seal(plaintext, using: key)
        start = ContinuousClock.now
        for _ in 0..<blocks { chacha = try ChaChaPoly.seal(plaintext, using: key) }
        let rawChachaSeal = mib / seconds(start)
        start = ContinuousClock.now
        for _ in 0..<blocks { sink &+= Int(try ChaChaPoly.open(chacha, using: key)[0]) }
        let rawChachaOpen = mib / seconds(start)
        print(
            String(
                format:
                    "ChaCha20-Poly1305: seal %6.0f MiB/s (%.2f× copy), open %6.0f MiB/s (%.2f× copy)  [swift-crypto alone]",
                rawChachaSeal, rawChachaSeal / copyRate, rawChachaOpen, rawChachaOpen / copyRate))

        var box = try AES.GCM.seal(plaintext, using: key)
        start = ContinuousClock.now
        for _ in 0..<blocks { box = try AES.GCM.seal(plaintext, using: key) }
        let gcmSeal = mib / seconds(start)
        start = ContinuousClock.now
        for _ in 0..<blocks { sink &+= Int(try AES.GCM.open(box, using: key)[0]) }
        let gcmOpen = mib / seconds(start)
        print(
            String(
                format:
                    "AES-256-GCM:       seal %6.0f MiB/s (%.2f× copy), open %6.0f MiB/s (%.2f× copy)  [swift-crypto alone]",
                gcmSeal, gcmSeal / copyRate, gcmOpen, gcmOpen / copyRate))
        print("(\(blocks) blocks of \(blockSize) bytes each; checksum \(sink & 0xff))")
    }
}
