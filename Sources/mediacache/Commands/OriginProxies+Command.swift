// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import MediaCacheHTTP

extension OriginProxies {
    /// The proxies a command's origin requests go through: every one through `parent` (but
    /// the hosts `no_proxy` names), or those the environment names, as curl reads them.
    /// - Throws: `ValidationError` saying what is wrong with a proxy setting.
    static func forCommand(parent: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws -> OriginProxies
    {
        do {
            if let parent {
                let noProxy = [environment["no_proxy"], environment["NO_PROXY"]].compactMap { $0 }.first { !$0.isEmpty }
                return try OriginProxies(parent: parent, noProxy: noProxy)
            }
            return try OriginProxies(environment: environment)
        } catch {
            throw ValidationError(error.message)
        }
    }
}
