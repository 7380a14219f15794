// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

// A stand-in for the parts of AVFoundation (and of Apple's Foundation) that MediaCache's
// Apple adapter uses, so that the adapter's sources compile and run on Linux unchanged. It
// is never shipped: only this check package, built by CI, has it.
//
// Declarations follow Apple's documented Swift declarations (names, optionality, integer
// types); what differs, and why:
// - Objective-C `optional` protocol requirements cannot be declared without the Objective-C
//   runtime: they are requirements with default implementations here.
// - Key-value observing is not in swift-corelibs-foundation: `NSKeyValueObservation`,
//   `NSKeyValueObservingOptions` and `observe(_:options:changeHandler:)` are declared here,
//   for `AVPlayer.currentItem` only.
// - Members whose names start with `simulated` are not Apple's: they let a test play the
//   part of AVFoundation (hand the delegate loading requests, move a queue player on) and
//   read back what the adapter did.

@_exported import Dispatch
@_exported import Foundation
import Synchronization

// swift-format-ignore: TypeNamesShouldBeCapitalized
// (Apple's own name, which the adapter's sources use.)
public typealias dispatch_queue_t = DispatchQueue

/// A value behind a lock (what the stand-in holds is not all `Sendable`: delegates, closures).
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

// MARK: Assets

/// `class AVAsset`
open class AVAsset: NSObject, @unchecked Sendable {}

/// `class AVURLAsset`
open class AVURLAsset: AVAsset, @unchecked Sendable {
    /// `var url: URL { get }`
    public let url: URL
    /// `var resourceLoader: AVAssetResourceLoader { get }`
    public let resourceLoader = AVAssetResourceLoader()

    /// `init(url URL: URL, options: [String : Any]? = nil)`
    public init(url URL: URL, options: [String: Any]? = nil) {
        self.url = URL
        super.init()
    }
}

// MARK: Resource loading

/// `protocol AVAssetResourceLoaderDelegate : NSObjectProtocol`; both methods are `optional` there.
public protocol AVAssetResourceLoaderDelegate: NSObjectProtocol {
    func resourceLoader(
        _ resourceLoader: AVAssetResourceLoader,
        shouldWaitForLoadingOfRequestedResource loadingRequest: AVAssetResourceLoadingRequest
    ) -> Bool
    func resourceLoader(
        _ resourceLoader: AVAssetResourceLoader, didCancel loadingRequest: AVAssetResourceLoadingRequest)
}

extension AVAssetResourceLoaderDelegate {
    public func resourceLoader(
        _ resourceLoader: AVAssetResourceLoader,
        shouldWaitForLoadingOfRequestedResource loadingRequest: AVAssetResourceLoadingRequest
    ) -> Bool {
        false
    }

    public func resourceLoader(
        _ resourceLoader: AVAssetResourceLoader, didCancel loadingRequest: AVAssetResourceLoadingRequest
    ) {}
}

/// `class AVAssetResourceLoader`
open class AVAssetResourceLoader: NSObject, @unchecked Sendable {
    private let state = Locked<(delegate: (any AVAssetResourceLoaderDelegate)?, queue: dispatch_queue_t?)>((nil, nil))

    /// `weak var delegate: (any AVAssetResourceLoaderDelegate)? { get }` (held strongly here:
    /// the adapter keeps its delegate alive itself, which is what this check is about).
    public var delegate: (any AVAssetResourceLoaderDelegate)? { state.withLock { $0.delegate } }
    /// `var delegateQueue: dispatch_queue_t? { get }`
    public var delegateQueue: dispatch_queue_t? { state.withLock { $0.queue } }

    /// `func setDelegate(_ delegate: (any AVAssetResourceLoaderDelegate)?, queue delegateQueue: dispatch_queue_t?)`
    public func setDelegate(_ delegate: (any AVAssetResourceLoaderDelegate)?, queue delegateQueue: dispatch_queue_t?) {
        precondition(delegate == nil || delegateQueue != nil, "AVAssetResourceLoader: a delegate needs a queue")
        state.withLock { $0 = (delegate, delegateQueue) }
    }

    /// Hands `request` to the delegate on its queue, as AVFoundation does; returns the
    /// delegate's answer (whether it will load the request).
    public func simulatedLoad(_ request: AVAssetResourceLoadingRequest) -> Bool {
        guard let delegate, let queue = delegateQueue else { return false }
        return queue.sync { delegate.resourceLoader(self, shouldWaitForLoadingOfRequestedResource: request) }
    }

    /// Cancels `request` on the delegate's queue, as AVFoundation does when it no longer
    /// needs the bytes.
    public func simulatedCancel(_ request: AVAssetResourceLoadingRequest) {
        guard let delegate, let queue = delegateQueue else { return }
        request.simulatedMarkCancelled()
        queue.sync { delegate.resourceLoader(self, didCancel: request) }
    }
}

/// `class AVAssetResourceLoadingRequest`
open class AVAssetResourceLoadingRequest: NSObject, @unchecked Sendable {
    /// What the adapter did with a request.
    public struct SimulatedRecord: Sendable, Equatable {
        public var finished = false
        public var failure: String?
        public var calls: [String] = []
    }

    private let record = Mutex(SimulatedRecord())

    /// `var contentInformationRequest: AVAssetResourceLoadingContentInformationRequest? { get }`
    public let contentInformationRequest: AVAssetResourceLoadingContentInformationRequest?
    /// `var dataRequest: AVAssetResourceLoadingDataRequest? { get }`
    public let dataRequest: AVAssetResourceLoadingDataRequest?
    private let cancelled = Atomic(false)

    /// A request as AVFoundation makes one: content information, data from `offset`
    /// (`length` bytes, or to the end), or both.
    public init(simulatedContentInformation: Bool, offset: Int64?, length: Int = 0, toEnd: Bool = false) {
        contentInformationRequest =
            simulatedContentInformation ? AVAssetResourceLoadingContentInformationRequest() : nil
        dataRequest = offset.map {
            AVAssetResourceLoadingDataRequest(
                requestedOffset: $0, requestedLength: length, requestsAllDataToEndOfResource: toEnd)
        }
        super.init()
    }

    /// `var isFinished: Bool { get }`
    public var isFinished: Bool { record.withLock { $0.finished } }
    /// `var isCancelled: Bool { get }`
    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) }

    /// `func finishLoading()`
    public func finishLoading() {
        record.withLock {
            precondition(!$0.finished, "AVAssetResourceLoadingRequest: finished twice")
            $0.finished = true
            $0.calls.append("finishLoading")
        }
    }

    /// `func finishLoading(with error: (any Error)?)`
    public func finishLoading(with error: (any Error)?) {
        record.withLock {
            precondition(!$0.finished, "AVAssetResourceLoadingRequest: finished twice")
            $0.finished = true
            $0.failure = error.map { "\($0)" } ?? "nil"
            $0.calls.append("finishLoadingWithError")
        }
    }

    /// What the adapter did, so far.
    public var simulatedRecord: SimulatedRecord { record.withLock { $0 } }

    func simulatedMarkCancelled() {
        cancelled.store(true, ordering: .relaxed)
    }
}

/// `class AVAssetResourceLoadingContentInformationRequest`
open class AVAssetResourceLoadingContentInformationRequest: NSObject, @unchecked Sendable {
    private let values = Mutex<(type: String?, length: Int64, ranges: Bool)>((nil, 0, false))

    /// `var contentType: String? { get set }`
    public var contentType: String? {
        get { values.withLock { $0.type } }
        set { values.withLock { $0.type = newValue } }
    }

    /// `var contentLength: Int64 { get set }`
    public var contentLength: Int64 {
        get { values.withLock { $0.length } }
        set { values.withLock { $0.length = newValue } }
    }

    /// `var isByteRangeAccessSupported: Bool { get set }`
    public var isByteRangeAccessSupported: Bool {
        get { values.withLock { $0.ranges } }
        set { values.withLock { $0.ranges = newValue } }
    }
}

/// `class AVAssetResourceLoadingDataRequest`
open class AVAssetResourceLoadingDataRequest: NSObject, @unchecked Sendable {
    /// `var requestedOffset: Int64 { get }`
    public let requestedOffset: Int64
    /// `var requestedLength: Int { get }`
    public let requestedLength: Int
    /// `var requestsAllDataToEndOfResource: Bool { get }`
    public let requestsAllDataToEndOfResource: Bool
    private let received = Mutex(Data())

    init(requestedOffset: Int64, requestedLength: Int, requestsAllDataToEndOfResource: Bool) {
        self.requestedOffset = requestedOffset
        self.requestedLength = requestedLength
        self.requestsAllDataToEndOfResource = requestsAllDataToEndOfResource
        super.init()
    }

    /// `var currentOffset: Int64 { get }`
    public var currentOffset: Int64 { requestedOffset + Int64(received.withLock { $0.count }) }

    /// `func respond(with data: Data)`
    public func respond(with data: Data) {
        received.withLock { $0.append(data) }
    }

    /// Every byte the adapter gave, in order.
    public var simulatedReceived: Data { received.withLock { $0 } }
}

// MARK: Players

/// `class AVPlayerItem`
open class AVPlayerItem: NSObject, @unchecked Sendable {
    /// `var asset: AVAsset { get }`
    public let asset: AVAsset

    /// `convenience init(asset: AVAsset)`
    public init(asset: AVAsset) {
        self.asset = asset
        super.init()
    }

    /// `convenience init(url URL: URL)`
    public convenience init(url URL: URL) {
        self.init(asset: AVURLAsset(url: URL))
    }

    /// `var startsOnFirstEligibleVariant: Bool { get set }` (iOS 14.0+)
    public var startsOnFirstEligibleVariant = false
}

/// `class AVPlayer`
open class AVPlayer: NSObject, @unchecked Sendable {
    let current = Locked<AVPlayerItem?>(nil)
    let observers = Locked<[UInt64: (AVPlayerItem?, AVPlayerItem?) -> Void]>([:])
    let nextObserver = Atomic<UInt64>(0)

    let external = Locked(false)
    let externalObservers = Locked<[UInt64: (Bool, Bool) -> Void]>([:])
    let time = Locked(CMTime.zero)
    let seeks = Locked<[CMTime]>([])
    /// The times ``seek(to:)`` was asked for, in order (the stand-in's record).
    public var simulatedSeeks: [CMTime] { seeks.withLock { $0 } }

    /// `var currentItem: AVPlayerItem? { get }` (key-value observable)
    public var currentItem: AVPlayerItem? { current.withLock { $0 } }

    /// `var isExternalPlaybackActive: Bool { get }` (key-value observable)
    public var isExternalPlaybackActive: Bool { external.withLock { $0 } }

    /// The stand-in's control: external playback (AirPlay) starts or ends, as when the user
    /// picks a receiver.
    public func simulateExternalPlayback(_ active: Bool) {
        let old = external.withLock { external in
            defer { external = active }
            return external
        }
        for observer in externalObservers.withLock({ Array($0.values) }) { observer(old, active) }
    }

    /// The stand-in's control: where playback is.
    public func simulatePlayback(at time: CMTime) {
        self.time.withLock { $0 = time }
    }

    /// `func currentTime() -> CMTime`
    public func currentTime() -> CMTime { time.withLock { $0 } }

    /// `func seek(to time: CMTime) async -> Bool`
    public func seek(to time: CMTime) async -> Bool {
        seeks.withLock { $0.append(time) }
        self.time.withLock { $0 = time }
        return true
    }

    /// `func replaceCurrentItem(with item: AVPlayerItem?)` (key-value observable)
    public func replaceCurrentItem(with item: AVPlayerItem?) {
        let old = current.withLock { current in
            defer { current = item }
            return current
        }
        for observer in observers.withLock({ Array($0.values) }) { observer(old, item) }
    }
}

/// `class AVQueuePlayer`
open class AVQueuePlayer: AVPlayer, @unchecked Sendable {
    private let queued = Locked<[AVPlayerItem]>([])

    /// `init(items: [AVPlayerItem])`
    public init(items: [AVPlayerItem]) {
        super.init()
        queued.withLock { $0 = Array(items.dropFirst()) }
        current.withLock { $0 = items.first }
    }

    /// `func advanceToNextItem()`
    public func advanceToNextItem() {
        replaceCurrentItem(with: queued.withLock { $0.isEmpty ? nil : $0.removeFirst() })
    }
}

// MARK: Time (CoreMedia on Apple platforms)

/// `struct CMTime`
public struct CMTime: Sendable, Equatable {
    /// `var value: CMTimeValue`
    public var value: Int64
    /// `var timescale: CMTimeScale`
    public var timescale: Int32

    /// `static let zero: CMTime`
    public static let zero = CMTime(value: 0, timescale: 1)

    /// `init(value: CMTimeValue, timescale: CMTimeScale)`
    public init(value: Int64, timescale: Int32) {
        (self.value, self.timescale) = (value, timescale)
    }

    /// `init(seconds: Double, preferredTimescale: CMTimeScale)`
    public init(seconds: Double, preferredTimescale: Int32) {
        self.init(value: Int64((seconds * Double(preferredTimescale)).rounded()), timescale: preferredTimescale)
    }

    /// `var seconds: Double { get }`
    public var seconds: Double { Double(value) / Double(timescale) }
}

// MARK: Key-value observing (Foundation on Apple platforms)

/// `struct NSKeyValueObservingOptions : OptionSet`
public struct NSKeyValueObservingOptions: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let new = NSKeyValueObservingOptions(rawValue: 1 << 0)
    public static let old = NSKeyValueObservingOptions(rawValue: 1 << 1)
    public static let initial = NSKeyValueObservingOptions(rawValue: 1 << 2)
    public static let prior = NSKeyValueObservingOptions(rawValue: 1 << 3)
}

/// `struct NSKeyValueObservedChange<Value>`
public struct NSKeyValueObservedChange<Value> {
    /// `let oldValue: Value?`
    public let oldValue: Value?
    /// `let newValue: Value?`
    public let newValue: Value?
}

/// `class NSKeyValueObservation`: observation ends when it is released or invalidated.
public final class NSKeyValueObservation: NSObject, @unchecked Sendable {
    private let end: Locked<(() -> Void)?>

    init(end: @escaping () -> Void) {
        self.end = Locked(end)
    }

    /// `func invalidate()`
    public func invalidate() {
        end.withLock { $0.take() }?()
    }

    deinit {
        invalidate()
    }
}

/// What `observe(_:options:changeHandler:)` is declared on (`_KeyValueCodingAndObserving` on
/// Apple platforms), so that `Self` is the observed object's own type.
public protocol KeyValueObservingStandIn: AnyObject {}

extension AVPlayer: KeyValueObservingStandIn {}

extension KeyValueObservingStandIn where Self: AVPlayer {
    /// `func observe<Value>(_ keyPath: KeyPath<Self, Value>, options: NSKeyValueObservingOptions = [], changeHandler: @escaping (Self, NSKeyValueObservedChange<Value>) -> Void) -> NSKeyValueObservation`,
    /// for `currentItem` and `isExternalPlaybackActive` only.
    public func observe<Value>(
        _ keyPath: KeyPath<Self, Value>, options: NSKeyValueObservingOptions = [],
        changeHandler: @escaping (Self, NSKeyValueObservedChange<Value>) -> Void
    ) -> NSKeyValueObservation {
        let id = nextObserver.add(1, ordering: .relaxed).newValue
        // One change as the options ask for it, whatever the property's type.
        let report: (Any?, Any?) -> Void = { [unowned self] old, new in
            changeHandler(
                self,
                NSKeyValueObservedChange(
                    oldValue: options.contains(.old) ? (old as! Value) : nil,
                    newValue: options.contains(.new) ? (new as! Value) : nil))
        }
        if keyPath == \Self.isExternalPlaybackActive {
            externalObservers.withLock { $0[id] = { report($0, $1) } }
            return NSKeyValueObservation { [weak self] in
                _ = self?.externalObservers.withLock { $0.removeValue(forKey: id) }
            }
        }
        precondition(keyPath == \Self.currentItem, "the stand-in observes currentItem and isExternalPlaybackActive")
        observers.withLock { $0[id] = { report($0, $1) } }
        return NSKeyValueObservation { [weak self] in _ = self?.observers.withLock { $0.removeValue(forKey: id) } }
    }
}

// MARK: Low Power Mode (Apple's Foundation)

/// Low Power Mode, which Foundation has only on Apple platforms.
private let lowPowerMode = LowPowerMode()

private final class LowPowerMode: @unchecked Sendable {
    private let lock = NSLock()
    private var on = false

    var isOn: Bool {
        get { lock.withLock { on } }
        set { lock.withLock { on = newValue } }
    }
}

extension ProcessInfo {
    /// `var isLowPowerModeEnabled: Bool { get }`
    public var isLowPowerModeEnabled: Bool { lowPowerMode.isOn }

    /// Turns Low Power Mode on or off as the test says the system does, and posts the notice.
    public func simulateLowPowerMode(_ on: Bool) {
        lowPowerMode.isOn = on
        NotificationCenter.default.post(name: .NSProcessInfoPowerStateDidChange, object: self)
    }
}

extension Notification.Name {
    /// `static let NSProcessInfoPowerStateDidChange: NSNotification.Name`
    // swift-format-ignore: AlwaysUseLowerCamelCase
    // (Apple's own name, which the adapter's sources use.)
    public static let NSProcessInfoPowerStateDidChange = Notification.Name(
        "NSProcessInfoPowerStateDidChangeNotification")
}
