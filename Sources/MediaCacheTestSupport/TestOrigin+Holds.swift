// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Synchronization

/// What holds the origin's answers until a test lets them go: a resource still being made,
/// and a gate.
extension TestOrigin {
    /// How much of a growing resource exists (see ``Faults/growth``); the test makes more.
    public final class Growth: Sendable {
        private let state: Mutex<(made: Int64, isFinished: Bool, waiting: [@Sendable () -> Void])>

        /// A resource of which the first `made` bytes exist.
        public init(made: Int64) {
            state = Mutex((made, false, []))
        }

        /// How many bytes exist.
        public var made: Int64 { state.withLock { $0.made } }

        /// Whether the resource is complete.
        public var isFinished: Bool { state.withLock { $0.isFinished } }

        /// The bytes up to `made` exist now: held answers send them.
        public func make(upTo made: Int64) {
            change { $0.made = max($0.made, made) }
        }

        /// The resource is complete (its whole length exists): held answers end.
        public func finish() {
            change { $0.isFinished = true }
        }

        private func change(_ body: (inout (made: Int64, isFinished: Bool, waiting: [@Sendable () -> Void])) -> Void) {
            let waiting = state.withLock { state in
                body(&state)
                defer { state.waiting = [] }
                return state.waiting
            }
            for call in waiting { call() }
        }

        /// Runs `call` once more than `offset` bytes exist or the resource is complete.
        func whenPast(_ offset: Int64, _ call: @escaping @Sendable () -> Void) {
            let now = state.withLock { state in
                let ready = state.made > offset || state.isFinished
                if !ready { state.waiting.append(call) }
                return ready
            }
            if now { call() }
        }
    }

    /// Holds answers until a test opens it (see ``Faults/gate``).
    public final class Gate: Sendable {
        private let state = Mutex<(isOpen: Bool, waiting: [@Sendable () -> Void])>((false, []))

        public init() {}

        /// Whether ``open()`` was called.
        public var isOpen: Bool { state.withLock { $0.isOpen } }

        /// Lets every held answer go, and every later one at once.
        public func open() {
            let waiting = state.withLock { state in
                state.isOpen = true
                defer { state.waiting = [] }
                return state.waiting
            }
            for answer in waiting { answer() }
        }

        /// Runs `answer` once the gate is open.
        func whenOpen(_ answer: @escaping @Sendable () -> Void) {
            let now = state.withLock { state in
                if !state.isOpen { state.waiting.append(answer) }
                return state.isOpen
            }
            if now { answer() }
        }
    }
}
