// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
import Synchronization

/// A count sampled every second while some work runs (a process's open files, the bytes a
/// cache folder holds): its first, largest and last value.
final class Samples: Sendable {
    typealias Figures = (start: Int, most: Int, end: Int)

    private let measure: @Sendable () -> Int?
    private let values = Mutex<[Int]>([])

    init(_ measure: @escaping @Sendable () -> Int?) {
        self.measure = measure
    }

    /// The entries of `/proc/PID/fd`.
    static func openFiles(of pid: pid_t) -> Samples {
        Samples { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count }
    }

    /// The space the files under `folder` take on disk: their 512-byte blocks, as `du` counts
    /// (Foundation's allocated size on Linux multiplies them by the block size instead).
    static func bytes(in folder: URL) -> Samples {
        Samples {
            guard let files = FileManager.default.enumerator(atPath: folder.path) else { return nil }
            var total = 0
            for case let name as String in files {
                var status = stat()
                guard lstat(folder.path + "/" + name, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
                    continue
                }
                total += Int(status.st_blocks) * 512
            }
            return total
        }
    }

    /// `work`'s result, `samples` taken every second while it runs (and once more as it ends).
    static func during<T>(_ samples: Samples..., work: () async throws -> T) async throws -> T {
        let sampling = Task {
            while !Task.isCancelled {
                samples.forEach { $0.record() }
                try? await Task.sleep(for: .seconds(1))
            }
            samples.forEach { $0.record() }
        }
        defer { sampling.cancel() }
        let result = try await work()
        sampling.cancel()
        await sampling.value
        return result
    }

    private func record() {
        guard let value = measure() else { return }
        values.withLock { $0.append(value) }
    }

    var figures: Figures? {
        values.withLock { values in values.first.map { ($0, values.max()!, values.last!) } }
    }
}
