// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Variable substitution (`EXT-X-DEFINE`), pure: what is put where, and what is refused.
@Suite(.stallLimit) struct HLSVariablesTests {
    static let url = URL(string: "https://cdn.example/show/master.m3u8?token=t%20k&id=7")!

    static func resolve(_ text: String, imports: [String: String] = [:]) throws -> String? {
        try HLSVariables.resolved(text, url: url, imports: imports)?.text
    }

    @Test func valuesQueryParametersAndImportsArePutInURIsAndQuotedValues() throws {
        let text = """
            #EXTM3U
            #EXT-X-DEFINE:NAME="host",VALUE="https://a.example"
            #EXT-X-DEFINE:QUERYPARAM="token"
            #EXT-X-DEFINE:IMPORT="cdn"
            #EXT-X-MAP:URI="{$host}/init.mp4?t={$token}"
            # a comment keeps {$host}
            #EXTINF:2,{$host} in a title stays
            {$cdn}/seg0.m4s?t={$token}
            """
        let resolved = try #require(try Self.resolve(text, imports: ["cdn": "https://b.example"]))
        #expect(
            resolved == """
                #EXTM3U
                #EXT-X-MAP:URI="https://a.example/init.mp4?t=t k"
                # a comment keeps {$host}
                #EXTINF:2,{$host} in a title stays
                https://b.example/seg0.m4s?t=t k
                """)
        let definitions = try HLSVariables.resolved(text, url: Self.url, imports: ["cdn": "https://b.example"])?
            .definitions
        #expect(definitions == ["host": "https://a.example", "token": "t k", "cdn": "https://b.example"])
    }

    @Test func aPlaylistWithoutVariablesIsLeftAsItIs() throws {
        #expect(try Self.resolve("#EXTM3U\n#EXTINF:2,\na.ts\n") == nil)
    }

    /// A value is put in as it is, never substituted again: no recursion, however defined.
    @Test func aValueIsNotSubstitutedAgain() throws {
        let text =
            "#EXTM3U\n#EXT-X-DEFINE:NAME=\"a\",VALUE=\"{$a}{$a}\"\n#EXT-X-DEFINE:NAME=\"b\",VALUE=\"{$a}\"\n{$b}/x.ts\n"
        #expect(try Self.resolve(text) == "#EXTM3U\n{$a}/x.ts\n")
    }

    @Test(arguments: [
        ("#EXTM3U\n{$nope}/a.ts\n", "nope is used but not defined"),
        ("#EXTM3U\n{$early}/a.ts\n#EXT-X-DEFINE:NAME=\"early\",VALUE=\"x\"\n", "early is used but not defined"),
        ("#EXTM3U\n#EXT-X-DEFINE:NAME=\"a\",VALUE=\"1\"\n#EXT-X-DEFINE:NAME=\"a\",VALUE=\"2\"\n", "a is defined twice"),
        ("#EXTM3U\n#EXT-X-DEFINE:NAME=\"a b\",VALUE=\"1\"\n", "a name of letters"),
        ("#EXTM3U\n#EXT-X-DEFINE:NAME=\"a\"\n", "has no VALUE"),
        ("#EXTM3U\n#EXT-X-DEFINE:IMPORT=\"cdn\"\n", "does not define"),
        ("#EXTM3U\n#EXT-X-DEFINE:QUERYPARAM=\"missing\"\n", "does not have"),
        ("#EXTM3U\n#EXT-X-DEFINE:NAME=\"a\",VALUE=\"1\",IMPORT=\"b\"\n", "one of NAME, IMPORT or QUERYPARAM"),
        ("#EXTM3U\n#EXT-X-DEFINE:NAME=\"a\",VALUE=\"1\"\n{$a/x.ts\n", "closing brace"),
    ])
    func whatIsWrongIsRefusedSayingWhat(_ text: String, _ reason: String) {
        #expect {
            try Self.resolve(text)
        } throws: { error in
            (error as? HLSPlaylistError)?.message.contains(reason) == true
        }
    }

    /// A small playlist that grows past 16 MiB as its variables are put in is refused, not built.
    @Test func aPlaylistThatGrowsPastTheLimitIsRefused() {
        let value = String(repeating: "x", count: 60_000)
        let text =
            "#EXTM3U\n#EXT-X-DEFINE:NAME=\"v\",VALUE=\"\(value)\"\n"
            + String(repeating: "{$v}{$v}{$v}{$v}\n", count: 80)
        #expect(throws: HLSPlaylistError.self) { try Self.resolve(text) }
    }

    /// Random playlists of definitions and references: never a trap; what is resolved has no
    /// `EXT-X-DEFINE` line and no reference left in a URI line, and stays within the limit.
    /// Seeded, so that its counts of both outcomes are the same in every run (unseeded, the
    /// playlists that resolved were now and then too few for the bound below).
    @Test func randomDefinitionsAndReferencesResolveOrAreRefused() throws {
        var random = SplitMix(seed: 0x4853_5641)
        let names = ["a", "b", "token", "cdn", "x-y_z", "a", "cdn", "token", "bad name", ""]
        var (resolved, refused) = (0, 0)
        for _ in 0..<3_000 {
            var lines = ["#EXTM3U"]
            for _ in 0..<Int.random(in: 0...5, using: &random) {
                let name = names.randomElement(using: &random)!
                switch Int.random(in: 0..<7, using: &random) {
                case 0:
                    lines.append("#EXT-X-DEFINE:NAME=\"\(name)\",VALUE=\"v{$\(names.randomElement(using: &random)!)}\"")
                case 1: lines.append("#EXT-X-DEFINE:QUERYPARAM=\"\(name)\"")
                case 2: lines.append("#EXT-X-DEFINE:IMPORT=\"\(name)\"")
                case 3: lines.append("#EXT-X-KEY:METHOD=AES-128,URI=\"{$\(name)}/k\"")
                case 4: lines.append("{$\(name)}/seg.ts")
                case 5: lines.append("#EXT-X-DEFINE:NAME=\"\(name)\"")
                default: lines.append("{$" + name)
                }
            }
            do {
                guard
                    let (text, _) = try HLSVariables.resolved(
                        lines.joined(separator: "\n"), url: Self.url, imports: ["cdn": "c", "a": "{$b}"])
                else { continue }
                resolved += 1
                let out = text.split(separator: "\n")
                #expect(!out.contains { $0.hasPrefix("#EXT-X-DEFINE") })
                #expect(!out.contains { !$0.hasPrefix("#") && $0.hasPrefix("{$") && !$0.hasPrefix("{$b}") }, "\(text)")
            } catch {
                refused += 1
            }
        }
        #expect(resolved > 100 && refused > 100, "resolved \(resolved), refused \(refused)")
    }
}
