// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import NIOCore

/// What a player asks a resource loader for, independent of AVFoundation: a model of
/// `AVAssetResourceLoadingRequest` that Linux tests can drive.
@_spi(Adapter) public struct LoadingRequest: Sendable {
    /// Whether the player wants content information (length, type, range support).
    public var wantsContentInformation: Bool
    /// The bytes the player wants, if any.
    public var data: LoadingRequest.DataRequest?

    /// Creates a request.
    public init(wantsContentInformation: Bool, data: LoadingRequest.DataRequest?) {
        self.wantsContentInformation = wantsContentInformation
        self.data = data
    }
}

extension LoadingRequest {
    /// The data part of a loading request (`AVAssetResourceLoadingDataRequest`).
    public struct DataRequest: Sendable, Hashable {
        /// The first byte wanted.
        public var requestedOffset: Int64
        /// How many bytes are wanted; ignored when ``requestsAllDataToEndOfResource`` is set.
        public var requestedLength: Int64
        /// Give everything from the offset to the end, whatever the length says.
        public var requestsAllDataToEndOfResource: Bool
        /// Where the answer starts: bytes before it were already given to the player.
        public var currentOffset: Int64

        /// Creates a data request.
        public init(
            requestedOffset: Int64, requestedLength: Int64, requestsAllDataToEndOfResource: Bool = false,
            currentOffset: Int64? = nil
        ) {
            self.requestedOffset = requestedOffset
            self.requestedLength = requestedLength
            self.requestsAllDataToEndOfResource = requestsAllDataToEndOfResource
            self.currentOffset = currentOffset ?? requestedOffset
        }
    }
}

extension LoadingRequest {
    /// What the engine tells a player about the resource (`AVAssetResourceLoadingContentInformationRequest`).
    public struct ContentInformation: Sendable, Hashable {
        /// The total length in bytes.
        public var contentLength: Int64
        /// The Uniform Type Identifier (`public.mp3`, `public.mpeg-4`, …), not a MIME type.
        public var contentType: String?
        /// Whether the player may ask for any byte range.
        public var isByteRangeAccessSupported: Bool

        /// Creates content information.
        public init(contentLength: Int64, contentType: String?, isByteRangeAccessSupported: Bool) {
            self.contentLength = contentLength
            self.contentType = contentType
            self.isByteRangeAccessSupported = isByteRangeAccessSupported
        }
    }
}

extension LoadingRequest {
    /// The player side of one loading request: where the engine delivers its answer.
    ///
    /// AVFoundation's adapter forwards these calls to `AVAssetResourceLoadingRequest`; tests
    /// implement it to check what a player would receive.
    public protocol Responder: Sendable {
        /// Fills in the content information; called before `finishLoading()` for such requests.
        func fill(_ information: LoadingRequest.ContentInformation)
        /// Gives the next bytes, starting at the request's current offset.
        func respond(with data: ByteBuffer)
        /// The request is complete.
        func finishLoading()
        /// The request failed.
        func finishLoading(with error: any Error)
    }
}

/// What happened while an asset loaded, for an app's own statistics or UI.
public enum ResourceLoaderEvent: Sendable, Hashable {
    /// Bytes given to the player that were already cached.
    case bytesFromCache(Int64)
    /// Bytes given to the player that came from the network.
    case bytesFromNetwork(Int64)
    /// A data request is waiting for the network with nothing to give.
    case stalled
    /// Every byte of the resource is now cached.
    case resourceCompleted
}
