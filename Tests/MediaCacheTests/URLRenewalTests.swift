// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import MediaCacheTestSupport
import NIOCore
import Synchronization
import Testing

@testable import MediaCache

/// Signed URLs renewed in a play (``URLRenewal``), on a manual clock and an origin in memory
/// that holds only the tokens it issued last good: no I/O, no real time.
@Suite(.stallLimit) struct URLRenewalTests {
    /// An origin that answers `403` unless a URL's `token` is one it holds good.
    final class SigningOrigin: OriginFetcher {
        let good = Mutex<Set<String>>([])
        let asked = Mutex<[String]>([])

        func fetch(_ url: URL, range: ByteRange?, ifRange: String?, headers: RequestHeaders) async throws
            -> OriginResponse
        {
            _ = try await contentInfo(for: url, headers: headers)
            let body = AsyncThrowingStream<ByteBuffer, any Error> { $0.finish() }
            return OriginResponse(metadata: ContentMetadata(length: 0), bodyOffset: 0, body: body)
        }

        func contentInfo(for url: URL, headers: RequestHeaders) async throws -> ContentMetadata {
            asked.withLock { $0.append(url.absoluteString) }
            let token = SignedURL.parameters(of: url).first { $0.name == "token" }?.value
            guard let token, good.withLock({ $0.contains(token) }) else {
                throw CacheError(
                    answer: OriginAnswer(status: 403, reason: "Forbidden", headers: [], body: []),
                    url: url.absoluteString)
            }
            return ContentMetadata(length: 0)
        }
    }

    /// A hook that signs with `token=N` (N counting its calls) and an `exp` a minute on, and
    /// makes the new token the only good one.
    final class Signer: Sendable {
        let origin: SigningOrigin
        let clock: ManualClock
        let calls = Mutex<[String]>([])
        let fails = Atomic<Bool>(false)

        init(origin: SigningOrigin, clock: ManualClock) { (self.origin, self.clock) = (origin, clock) }

        func fresh(_ url: URL) throws -> URL {
            let count = calls.withLock { calls in
                calls.append(url.absoluteString)
                return calls.count
            }
            if fails.load(ordering: .relaxed) { throw CacheError(.originUnavailable, "the signing service is down") }
            origin.good.withLock { $0 = ["n\(count)"] }
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
            components.queryItems = [
                URLQueryItem(name: "token", value: "n\(count)"),
                URLQueryItem(name: "exp", value: "\(Int(clock.now.timeIntervalSince1970) + 60)"),
            ]
            return components.url!
        }
    }

    static func setUp() -> (URLRenewal, SigningOrigin, Signer, ManualClock, LogRecorder) {
        let (origin, clock, recorder) = (
            SigningOrigin(), ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000)), LogRecorder()
        )
        let signer = Signer(origin: origin, clock: clock)
        let renewal = URLRenewal(
            base: origin, hook: { try signer.fresh($0) }, clock: clock, logger: recorder.logger())
        return (renewal, origin, signer, clock, recorder)
    }

    static func segment(_ number: Int, token: String = "n0", exp: Int = 1_800_000_020) -> URL {
        URL(string: "https://cdn.example/v/seg\(number).ts?token=\(token)&exp=\(exp)")!
    }

    @Test func anExpiryThatPassedIsRenewedOnceForEveryURLSignedAlike() async throws {
        let (renewal, origin, signer, clock, recorder) = Self.setUp()
        origin.good.withLock { $0 = ["n0"] }
        _ = try await renewal.contentInfo(for: Self.segment(1), headers: [])
        #expect(signer.calls.withLock { $0 }.isEmpty, "a URL good now is asked as it is")
        clock.advance(by: 21)
        // Past its `exp`: renewed before the origin is asked, so it never refuses.
        _ = try await renewal.contentInfo(for: Self.segment(2), headers: [])
        _ = try await renewal.contentInfo(for: Self.segment(3), headers: [])
        _ = try await renewal.fetch(Self.segment(1), range: nil, ifRange: nil, headers: [])
        #expect(signer.calls.withLock { $0 } == [Self.segment(2).absoluteString], "one call for the expiry")
        let asked = origin.asked.withLock { $0 }
        #expect(asked.dropFirst().allSatisfy { $0.contains("token=n1&exp=1800000081") }, "\(asked)")
        #expect(
            asked.map { $0.prefix { $0 != "?" } }.suffix(3).map(String.init)
                == [2, 3, 1].map {
                    "https://cdn.example/v/seg\($0).ts"
                })
        #expect(recorder.all.contains { $0.level == .warning && $0.message.contains("renewed") })
        // The renewed token's own expiry passes: one more call, and the chain collapses (a URL
        // with the first token goes to the third).
        clock.advance(by: 61)
        _ = try await renewal.contentInfo(for: Self.segment(4), headers: [])
        _ = try await renewal.contentInfo(for: Self.segment(5), headers: [])
        #expect(signer.calls.withLock { $0.count } == 2)
        #expect(origin.asked.withLock { $0.suffix(2) }.allSatisfy { $0.contains("token=n2") })
    }

    @Test func aRefusalWithoutAStatedExpiryIsRenewedAndAskedAgainOnce() async throws {
        let (renewal, origin, signer, _, _) = Self.setUp()
        let url = URL(string: "https://cdn.example/ep.mp3?token=old")!
        _ = try await renewal.fetch(url, range: ByteRange(0, 10), ifRange: nil, headers: [])
        #expect(origin.asked.withLock { $0 }.map { $0.contains("token=old") } == [true, false])
        #expect(signer.calls.withLock { $0 } == [url.absoluteString])
        // The origin revokes the fresh token too: one more renewal, then the third works.
        origin.good.withLock { $0 = [] }
        _ = try await renewal.contentInfo(for: url, headers: [])
        #expect(signer.calls.withLock { $0.count } == 2)
    }

    @Test func aFailingHookGivesTheOriginsRefusalAndRestsBeforeAskingAgain() async throws {
        let (renewal, origin, signer, clock, recorder) = Self.setUp()
        signer.fails.store(true, ordering: .relaxed)
        let url = URL(string: "https://cdn.example/ep.mp3?token=old")!
        for _ in 0..<3 {
            let error = await #expect(throws: CacheError.self) {
                _ = try await renewal.contentInfo(for: url, headers: [])
            }
            #expect(error?.originAnswer?.status == 403, "the origin's own answer")
        }
        #expect(signer.calls.withLock { $0.count } == 1, "rests after a failure")
        #expect(
            recorder.all.contains {
                $0.level == .warning && $0.message.contains("could not be renewed")
                    && "\($0.metadata["error"] ?? "")".contains("the signing service is down")
            })
        clock.advance(by: 31)
        signer.fails.store(false, ordering: .relaxed)
        _ = try await renewal.contentInfo(for: url, headers: [])
        #expect(signer.calls.withLock { $0.count } == 2)
        #expect(origin.asked.withLock { $0.last }?.contains("token=n2") == true)
    }

    @Test func aFreshURLRefusedTooRestsItsSignature() async throws {
        let origin = SigningOrigin()
        let clock = ManualClock()
        let calls = Atomic(0)
        let renewal = URLRenewal(
            base: origin,
            hook: { url in
                calls.add(1, ordering: .relaxed)
                return URL(string: url.absoluteString.replacingOccurrences(of: "old", with: "bad"))!
            }, clock: clock, logger: Logger(label: "test"))
        let url = URL(string: "https://cdn.example/ep.mp3?token=old")!
        for _ in 0..<3 {
            await #expect(throws: CacheError.self) { _ = try await renewal.contentInfo(for: url, headers: []) }
        }
        #expect(calls.load(ordering: .relaxed) == 1)
    }

    @Test func requestsThatExpireTogetherShareOneRenewal() async throws {
        let (renewal, origin, signer, clock, _) = Self.setUp()
        origin.good.withLock { $0 = ["n0"] }
        clock.advance(by: 30)
        try await withThrowingTaskGroup { group in
            for number in 1...8 {
                group.addTask { _ = try await renewal.contentInfo(for: Self.segment(number), headers: []) }
            }
            try await group.waitForAll()
        }
        #expect(signer.calls.withLock { $0.count } == 1)
        #expect(origin.asked.withLock { $0 }.allSatisfy { $0.contains("token=n1") })
    }

    @Test func statedExpiriesAreRead() {
        func expiry(_ query: String) -> Int64? {
            SignedURL.expiry(of: URL(string: "https://a.example/x?" + query)!).map { Int64($0.timeIntervalSince1970) }
        }
        #expect(expiry("exp=1800000000") == 1_800_000_000)
        #expect(expiry("Expires=1800000000&Signature=x&Key-Pair-Id=k") == 1_800_000_000)
        #expect(expiry("X-Amz-Date=20261127T033351Z&X-Amz-Expires=3600&X-Amz-Signature=f") == 1_795_754_031)
        #expect(expiry("X-Goog-Date=20240229T000000Z&X-Goog-Expires=60") == 1_709_164_860)
        #expect(expiry("hdnts=st%3D1~exp%3D1800000001~acl%3D%2F*~hmac%3Dab") == 1_800_000_001)
        #expect(expiry("exp=1800000009&expires=1800000002") == 1_800_000_002, "the earliest")
        for refused in [
            "exp=-1", "exp=1e9", "exp=999999999999999", "exp=", "X-Amz-Date=20261331T000000Z&X-Amz-Expires=1",
            "X-Amz-Date=20230229T000000Z&X-Amz-Expires=1", "X-Amz-Date=20261127T033351Z&X-Amz-Expires=99999999",
            "X-Amz-Date=2026-11-27T03:33:51Z&X-Amz-Expires=1", "token=abc",
        ] {
            #expect(expiry(refused) == nil, "\(refused)")
        }
    }
}
