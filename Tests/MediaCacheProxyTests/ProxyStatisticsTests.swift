import Foundation
@testable import MediaCacheProxy
import Testing

/// The proxy's counts: by result, bytes by source, and the last 50 requests oldest first.
@Suite struct ProxyStatisticsTests {
    @Test func countsAndTheLastFiftyRequestsInOrder() {
        let statistics = ProxyStatistics()
        let results: [CacheResult] = [.hit, .miss, .partial, .error]
        for index in 0..<123 {
            let result = results[index % results.count]
            statistics.record(.init(at: Date(), method: "GET", url: "u\(index)", range: nil, status: 200, result: result.rawValue,
                                    bytesFromCache: result == .hit ? 10 : 0, bytesFromOrigin: result == .miss ? 7 : 0), result: result)
        }
        let snapshot = statistics.snapshot
        #expect(snapshot.recent.map(\.url) == (73..<123).map { "u\($0)" })
        #expect(snapshot.requests == ["hit": 31, "miss": 31, "partial": 31, "error": 30, "pass-through": 0, "-": 0])
        #expect(snapshot.bytesFromCache == 310 && snapshot.bytesFromOrigin == 217)
        #expect(CacheResult.allCases.enumerated().allSatisfy { $0.offset == $0.element.index })
    }
}
