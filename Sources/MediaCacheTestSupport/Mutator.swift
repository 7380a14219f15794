// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
public import Testing

/// A small mutation fuzzer for the parsers of outside input: it starts from a committed
/// seed corpus (`Tests/FuzzCorpus/NAME.txt`, one input per line) and derives each input by
/// inserting, deleting, repeating and replacing pieces, with tokens that have broken
/// parsers before (numbers at and past `Int64.max`, signs, non-ASCII digits, brackets,
/// control characters). The generator is seeded, so a failure names the seed and
/// iteration that reproduce it.
///
/// How many inputs each target runs: `MEDIACACHE_FUZZ_ITERATIONS` (default 25,000);
/// `MEDIACACHE_FUZZ_SEED` picks another sequence.
public struct Mutator {
    public static var iterations: Int {
        ProcessInfo.processInfo.environment["MEDIACACHE_FUZZ_ITERATIONS"].flatMap(Int.init) ?? 25_000
    }

    public static var seed: UInt64 {
        ProcessInfo.processInfo.environment["MEDIACACHE_FUZZ_SEED"].flatMap(UInt64.init) ?? 0x6d65_6469_6163_6163
    }

    /// Pieces inserted by mutations, on top of the corpus's own.
    static let tokens: [String] = [
        "0", "1", "9", "-", ",", "=", " ", "\t", "/", "*", "+", ":", "[", "]", ".", "%", "@", "?", "#", "&",
        "bytes", "BYTES", "bytes=", "bytes ", "http://", "https://", "127.0.0.1", "::1", "localhost",
        "9223372036854775807", "9223372036854775808", "18446744073709551616", "1152921504606846976",
        "1152921504606846975", "115292150460684697", "99999999999999999999999999", "65535", "65536",
        "00000000000000000000001",
        "-0", "+0", "\u{0}", "\r", "\n", "\u{7f}", "\u{301}", "é", "٣", "１", "Ｋ", "%00", "%2F", "%ZZ", "\u{FEFF}",
    ]

    private var state: UInt64
    public let corpus: [String]

    public init(corpus name: String, seed: UInt64 = Mutator.seed) throws {
        // Read from the source tree, as the tests are run from it.
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../Tests/FuzzCorpus/\(name).txt")
        corpus = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            .map(String.init)
        state = seed
    }

    /// A mutator over `lines`, a corpus made at run time (inputs that carry what a test minted).
    public init(lines: [String], seed: UInt64 = Mutator.seed) {
        corpus = lines
        state = seed
    }

    /// SplitMix64.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E4B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func below(_ bound: Int) -> Int {
        Int(next() % UInt64(max(1, bound)))
    }

    /// The next input: a seed, mutated zero to four times.
    public mutating func input() -> String {
        var characters = Array(corpus[below(corpus.count)])
        for _ in 0..<below(5) {
            let position = below(characters.count + 1)
            switch below(6) {
            case 0, 1:
                characters.insert(contentsOf: Array(Self.tokens[below(Self.tokens.count)]), at: position)
            case 2:
                if position < characters.count {
                    characters.removeSubrange(position..<min(characters.count, position + 1 + below(4)))
                }
            case 3:
                if position < characters.count {
                    characters[position] = Array(Self.tokens[below(Self.tokens.count)]).first ?? "0"
                }
            case 4:
                let span = characters[position..<min(characters.count, position + below(8))]
                characters.insert(contentsOf: Array(repeating: span, count: below(4)).joined(), at: position)
            default:
                let other = Array(corpus[below(corpus.count)])
                characters.insert(contentsOf: other[..<below(other.count + 1)], at: position)
            }
        }
        return String(characters)
    }

    /// Runs `check` on ``iterations`` inputs. `check` returns `nil` when the input passes,
    /// or what went wrong; the first few failures are recorded with the input that caused
    /// them. Returns how many inputs each outcome label got.
    @discardableResult
    /// - Parameter share: the fraction of ``iterations`` to run, for targets whose inputs are
    ///   large (whole header blocks).
    /// - Parameter lines: the corpus, when it is made at run time (`corpus` then only names it).
    public static func run(
        _ corpus: String, lines: [String]? = nil, share: Int = 1, sourceLocation: SourceLocation = #_sourceLocation,
        check: (String) -> (label: String, failure: String?)
    ) throws -> [String: Int] {
        let iterations = max(1, iterations / share)
        var mutator = try lines.map { Mutator(lines: $0) } ?? Mutator(corpus: corpus)
        var outcomes: [String: Int] = [:]
        var failures = 0
        for iteration in 0..<iterations {
            let input = iteration < mutator.corpus.count ? mutator.corpus[iteration] : mutator.input()
            let (label, failure) = check(input)
            outcomes[label, default: 0] += 1
            if let failure {
                failures += 1
                if failures <= 5 {
                    Issue.record(
                        "\(corpus) input \(input.debugDescription) (iteration \(iteration), seed \(seed)): \(failure)",
                        sourceLocation: sourceLocation)
                }
            }
        }
        print(
            "fuzz \(corpus): \(iterations) inputs, \(failures) failures, outcomes \(outcomes.sorted { $0.key < $1.key })"
        )
        return outcomes
    }

    /// Fails unless each of `labels` was the outcome of at least 1 % of the inputs: a target
    /// whose inputs all end the same way tests nothing.
    public static func expectVaried(
        _ outcomes: [String: Int], _ labels: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let total = outcomes.values.reduce(0, +)
        for label in labels {
            #expect(
                (outcomes[label] ?? 0) * 100 >= total, "only \(outcomes[label] ?? 0) of \(total) inputs were \(label)",
                sourceLocation: sourceLocation)
        }
    }
}
