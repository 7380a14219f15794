// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import MediaCacheHTTPFields

/// One ranged download a system transfer session (iOS's background `URLSession`) runs for a
/// pinned download: which job asked, the entry its bytes go to, and the bytes. The session
/// keeps it as the task's description (``taskDescription``), so a relaunched app knows every
/// transfer the system ran while it was gone.
@_spi(Adapter) public struct BackgroundTransfer: Sendable, Hashable, CustomStringConvertible {
    /// The ``DownloadJob`` that wants the bytes.
    public var job: String
    /// The entry the bytes are stored in.
    public var key: CacheKey
    /// The bytes asked for; `nil` for a whole resource whose length is not known yet.
    public var range: ByteRange?

    /// Creates a transfer.
    public init(job: String, key: CacheKey, range: ByteRange?) {
        self.job = job
        self.key = key
        self.range = range
    }

    /// The `Range` field to send, `nil` for a whole resource.
    package var rangeField: String? { range.map(RangeSpecifier.headerValue(for:)) }

    /// What the task carries: `mediacache/1 JOB FIRST-LAST KEY` (`*` for no range).
    public var taskDescription: String {
        let bytes = range.map { "\($0.lowerBound)-\($0.upperBound)" } ?? "*"
        return "\(Self.prefix) \(job) \(bytes) \(key.rawValue)"
    }

    public var description: String { taskDescription }

    private static let prefix = "mediacache/1"
    /// A description longer than this is not one of ours.
    static let maximumDescriptionBytes = 4096

    /// The transfer a task's description names; `nil` for any other text (a task another part
    /// of the app started, a description cut or altered).
    package init?(taskDescription text: String) {
        guard text.utf8.count <= Self.maximumDescriptionBytes else { return nil }
        let parts = text.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == Self.prefix, Self.isJobID(parts[1]), !parts[3].isEmpty else { return nil }
        if parts[2] == "*" {
            range = nil
        } else {
            let bounds = parts[2].split(separator: "-", omittingEmptySubsequences: false)
            // Digits as written, no leading zero: the text reads back as it was written.
            guard bounds.count == 2, !bounds.contains(where: { $0.count > 1 && $0.hasPrefix("0") }),
                let lower = HTTPNumber.strict(bounds[0]), let upper = HTTPNumber.strict(bounds[1]),
                lower < upper, upper <= ByteRange.maximumOffset
            else { return nil }
            range = ByteRange(lower, upper)
        }
        job = String(parts[1])
        key = CacheKey(String(parts[3]))
    }

    /// A job's ID: 1 to 64 letters, digits, `-` or `_`.
    private static func isJobID(_ text: Substring) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
    }
}

/// A task of a system transfer session, as it lists them.
@_spi(Adapter) public struct BackgroundTransferTask: Sendable, Hashable {
    /// The session's identifier of the task.
    public var identifier: Int
    /// What the task carries (``BackgroundTransfer/taskDescription``); `nil` when nothing.
    public var taskDescription: String?

    /// Creates a task's description.
    public init(identifier: Int, taskDescription: String?) {
        self.identifier = identifier
        self.taskDescription = taskDescription
    }
}

/// A download for a system transfer session to start: the URL, the fields to send, the task's
/// description, and what the job's rules let it use.
@_spi(Adapter) public struct BackgroundTransferRequest: Sendable, Hashable {
    /// The transfer; its ``BackgroundTransfer/taskDescription`` goes with the task.
    public var transfer: BackgroundTransfer
    public var url: URL
    /// The fields to send (`Range`, `Cookie` from the fetcher's jar).
    public var fields: [ContentMetadata.HeaderField]
    /// Whether it may use a metered network (a phone's cellular data, a personal hotspot):
    /// not when the job's rules ask for unmetered networks only.
    public var allowsExpensiveNetworkAccess: Bool
    /// Whether it may use a network in Low Data Mode.
    public var allowsConstrainedNetworkAccess: Bool
    /// Not before this (the next opening of the job's daily window); `nil` for now.
    public var earliestBeginDate: Date?

    /// Creates a request.
    public init(
        transfer: BackgroundTransfer, url: URL, fields: [ContentMetadata.HeaderField],
        allowsExpensiveNetworkAccess: Bool,
        allowsConstrainedNetworkAccess: Bool, earliestBeginDate: Date?
    ) {
        self.transfer = transfer
        self.url = url
        self.fields = fields
        self.allowsExpensiveNetworkAccess = allowsExpensiveNetworkAccess
        self.allowsConstrainedNetworkAccess = allowsConstrainedNetworkAccess
        self.earliestBeginDate = earliestBeginDate
    }
}

/// What runs pinned downloads' transfers while the app is not running: on Apple, a background
/// `URLSession` (`MediaCacheAVFoundation`'s `BackgroundPinSession`). A ``DownloadQueue`` whose
/// ``DownloadQueue/Configuration/backgroundTransfers`` has one hands it every hole of a pinned
/// resource instead of fetching it itself.
@_spi(Adapter) public protocol BackgroundTransferSession: Sendable {
    /// The tasks the session runs or holds now.
    func tasks() async -> [BackgroundTransferTask]
    /// Starts a download.
    func start(_ request: BackgroundTransferRequest)
    /// Cancels the task `identifier`.
    func cancel(_ identifier: Int)
}
