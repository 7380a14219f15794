// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

// A stand-in for the part of Apple's Network framework that MediaCache's Apple adapter uses
// (`NWPathMonitor`, `NWPath`), so that the adapter's sources compile and run on Linux
// unchanged. It is never shipped. Declarations follow Apple's documented Swift declarations;
// members whose names start with `simulated` are not Apple's: they let a test play the system.

import Dispatch
import Synchronization

/// `struct NWPath`
public struct NWPath: Sendable, Equatable {
    /// `var isExpensive: Bool { get }`
    public let isExpensive: Bool
    /// `var isConstrained: Bool { get }`
    public let isConstrained: Bool

    /// A path as the test says the system sees it.
    public init(simulatedExpensive isExpensive: Bool, constrained isConstrained: Bool) {
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
    }
}

/// `final class NWPathMonitor`
public final class NWPathMonitor: Sendable {
    private struct State {
        var handler: (@Sendable (NWPath) -> Void)?
        var queue: DispatchQueue?
        var isCancelled = false
    }

    private let state = Mutex(State())
    /// Every monitor started and not cancelled, for a test to send paths to.
    private static let started = Mutex<[ObjectIdentifier: NWPathMonitor]>([:])

    /// `init()`
    public init() {}

    /// `final var pathUpdateHandler: (@Sendable (NWPath) -> Void)? { get set }`
    public var pathUpdateHandler: (@Sendable (NWPath) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// `final func start(queue: DispatchQueue)`: delivers the current path (not expensive, not constrained) first.
    public func start(queue: DispatchQueue) {
        state.withLock { $0.queue = queue }
        _ = Self.started.withLock { $0[ObjectIdentifier(self)] = self }
        simulatedUpdate(NWPath(simulatedExpensive: false, constrained: false))
    }

    /// `final func cancel()`
    public func cancel() {
        state.withLock { $0.isCancelled = true }
        _ = Self.started.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
    }

    /// Delivers `path` to the handler on the monitor's queue, as the system does when the path changes.
    public func simulatedUpdate(_ path: NWPath) {
        let (handler, queue) = state.withLock { ($0.isCancelled ? nil : $0.handler, $0.queue) }
        guard let handler, let queue else { return }
        queue.async { handler(path) }
    }

    /// Delivers `path` to every monitor started and not cancelled.
    public static func simulatedUpdateAll(_ path: NWPath) {
        for monitor in started.withLock({ Array($0.values) }) { monitor.simulatedUpdate(path) }
    }
}
