// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

/// The mpv script `mediacache integrate mpv` installs: every http(s) URL mpv opens, and each
/// stream URL its yt-dlp hook resolves (a URL, or an EDL of several), plays through the server
/// that holds the cache folder (found by `mediacache url --running`: nothing to configure);
/// with none running, mpv plays directly and says so. While an entry plays, the next playlist
/// entry's first seconds are preloaded.
enum MPVScript {
    /// The script, calling `executable` (with `--cache-dir cacheDirectory` when given).
    static func text(executable: String, cacheDirectory: String?) -> String {
        """
        -- MediaCache for mpv, written by `mediacache integrate mpv`; run it again to update.
        -- Every http(s) URL mpv opens (and each stream URL the yt-dlp hook resolves) plays through
        -- the running `mediacache serve`; with none running, mpv plays directly and says so.
        -- The next playlist entry is preloaded while one plays.
        local msg = require "mp.msg"

        local executable = \(luaString(executable))
        local cache_dir = \(luaString(cacheDirectory ?? ""))

        local function command(verb, url)
            local args = { executable, verb, "--running" }
            if cache_dir ~= "" then
                args[#args + 1] = "--cache-dir"
                args[#args + 1] = cache_dir
            end
            args[#args + 1] = url
            return { name = "subprocess", args = args, playback_only = false, capture_stdout = true, capture_stderr = true }
        end

        local function is_http(url)
            return url:match("^[hH][tT][tT][pP][sS]?://") ~= nil
        end

        -- The proxy URL for `url`, or nil and why not.
        local function through(url)
            local result = mp.command_native(command("url", url))
            local proxied = (result.stdout or ""):gsub("%s+$", "")
            if result.status == 0 and is_http(proxied) then
                return proxied
            end
            return nil, ((result.stderr or result.error_string or ""):gsub("%s+$", ""))
        end

        -- An EDL (how the yt-dlp hook gives separate video and audio): each %length%-quoted URL in it.
        local function through_edl(edl)
            local parts, position = {}, 1
            while true do
                local first, last, length = edl:find("%%(%d+)%%", position)
                if not first then
                    break
                end
                local text = edl:sub(last + 1, last + tonumber(length))
                parts[#parts + 1] = edl:sub(position, first - 1)
                if is_http(text) then
                    text = through(text) or text
                end
                parts[#parts + 1] = "%" .. #text .. "%" .. text
                position = last + tonumber(length) + 1
            end
            parts[#parts + 1] = edl:sub(position)
            return table.concat(parts)
        end

        -- After the yt-dlp hook (priority 10), which resolves a page's URL to its streams.
        mp.add_hook("on_load", 50, function()
            local url = mp.get_property("stream-open-filename", "")
            if is_http(url) then
                local proxied, why = through(url)
                if proxied then
                    if proxied ~= url then
                        msg.info("Playing through MediaCache: " .. proxied)
                        mp.set_property("stream-open-filename", proxied)
                    end
                else
                    msg.warn("MediaCache: " .. why .. " Playing directly.")
                    mp.osd_message("MediaCache is not running: playing directly", 3)
                end
            elseif url:find("^edl://") then
                mp.set_property("stream-open-filename", through_edl(url))
            end
        end)

        -- The next playlist entry's first seconds, stored while this one plays.
        mp.register_event("file-loaded", function()
            local position = mp.get_property_number("playlist-pos", -1)
            local following = mp.get_property("playlist/" .. (position + 1) .. "/filename")
            if position < 0 or not following or not is_http(following) then
                return
            end
            mp.command_native_async(command("preload", following), function(success, result)
                if success and result.status == 0 then
                    msg.info("MediaCache preloads " .. following)
                else
                    msg.verbose("MediaCache cannot preload " .. following)
                end
            end)
        end)

        """
    }

    /// `text` as a Lua string literal.
    static func luaString(_ text: String) -> String {
        var escaped = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: escaped += String(format: "\\%03d", scalar.value)
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + "\""
    }
}
