// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Synchronization

/// An origin answer handed to a transfer once (``OriginTransfer/firstResponse``): taken, it is
/// held by the transfer alone, which drops it (and so lets its connection go) when it is done
/// with it. (Kept in the transfer's value, a probe's answer held its connection for as long as
/// the transfer ran: a fill that went on with a request of its own then held two, and sixteen
/// such fills held every connection of the host while players waited.)
final class HeldResponse: Sendable {
    private let response: Mutex<OriginResponse?>

    init(_ response: OriginResponse) {
        self.response = Mutex(response)
    }

    /// The answer, the first time; `nil` after.
    func take() -> OriginResponse? {
        response.withLock { held in
            defer { held = nil }
            return held
        }
    }
}
