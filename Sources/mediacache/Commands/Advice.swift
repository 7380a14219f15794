// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import MediaCache
import MediaCacheProxy

/// What the command line tells a user to do about an error or a waiting download: the
/// libraries say what can be done as data (``CacheError/Remedy``, an error's code); the words, with this
/// tool's flags and commands, are written here only.
enum Advice {
    /// The advice for `remedy`, if there is one.
    static func words(for remedy: CacheError.Remedy?) -> String? {
        guard let remedy else { return nil }
        let job = remedy.job ?? "ID"
        switch remedy.action {
        case .raisePinnedQuota: return "Unpin something (`mediacache unpin`) or raise --max-pinned-size."
        case .freeDiskSpace: return "Free some disk space, or lower the space the cache keeps free (--min-free-disk)."
        case .listJobs: return "`mediacache downloads` lists the jobs."
        case .resumeJob: return "`mediacache resume \(job)` fetches what is missing."
        case .pinFirst: return "Pin it first (`mediacache pin`)."
        case .exportAsStored: return "Export it as it is stored with --output."
        case .pinIntoEncryptedStore:
            return "Pin the asset into a cache folder encrypted with --encryption-key-file, which keeps its keys."
        case .allowAnyNetwork: return "`mediacache downloads set \(job) --network any` downloads it on any network."
        case .allowAnyPower: return "`mediacache downloads set \(job) --power any` downloads it on any power."
        default: return nil
        }
    }

    /// The advice an error's code alone calls for.
    static func words(for code: CacheError.Code) -> String? {
        code == .encryptionKeyRequired ? "Give its key with --encryption-key-file." : nil
    }

    /// The advice for a proxy setting that would end an error, in `serve`'s flags.
    static func words(for setting: ProxyError.Setting?) -> String? {
        switch setting {
        case .allowsRemoteClients?: "Pass --allow-remote with --token to do it on purpose (and consider --allow-host)."
        case .token?: "--allow-remote needs --token: pass one with a long random value (openssl rand -hex 16)."
        case .port?: "Stop what listens there, or choose another port with --port (0 picks a free one)."
        case .host?: "Choose an address this machine has with --host."
        default: nil
        }
    }

    /// `error`'s message with the advice for it.
    static func message(_ error: ProxyError) -> String {
        joined(error.message, words(for: error.setting))
    }

    /// `error`'s message with the advice for it.
    static func message(_ error: CacheError) -> String {
        joined(error.message, words(for: error.remedy) ?? words(for: error.code))
    }

    /// `text` followed by `advice`, if any.
    static func joined(_ text: String, _ advice: String?) -> String {
        guard let advice else { return text }
        return text + " " + advice
    }
}
