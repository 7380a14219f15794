// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

import Foundation
public import MediaCache

/// `GET /status.json`: what the status page shows.
package struct StatusReport: Sendable, Codable, Equatable {
    package var store: CacheStoreSummary
    package var proxy: ProxyStatistics.Snapshot
    package var downloads: [DownloadSummary]
    /// The pinned downloads (`DownloadQueue`), when the server keeps a queue.
    package var pinned: [DownloadJob] = []
    /// The preload queue (`AdminSource.replacePreloads`).
    package var preloads: [PreloadItem.Status] = []
    /// The played files being fetched on to their end (`FillPolicy`).
    package var fills: [FillOnPlay.Progress] = []
    /// The background check of pinned entries (`PinScrubber`), when the server keeps a queue.
    package var scrub: PinScrubber.Progress? = nil
    /// The device's power as the system last said it (the download rules' `power`), when the
    /// server keeps a queue.
    package var power: DownloadRules.PowerConditions? = nil
    /// The most recently used entries (at most `StatusPage/entryLimit`).
    package var entries: [CacheEntrySummary]
    /// What the store served and let go over its life (`nil` from a server before it kept one).
    package var usage: UsageHistory? = nil
}

/// `GET /status`: one self-contained HTML page (no script, no external asset; it reloads
/// itself every 5 s) that a phone can read.
enum StatusPage {
    static let entryLimit = 100

    static func report(engine: any AdminSource, downloads: DownloadQueue?, statistics: ProxyStatistics)
        -> StatusReport
    {
        statistics.reportLifetime()
        let store = engine.store
        let activity = engine.activity
        let entries = store.entrySummaries().sorted { ($0.lastAccess, $0.key) > ($1.lastAccess, $1.key) }
        return StatusReport(
            store: store.summary(), proxy: statistics.snapshot, downloads: activity.downloads,
            pinned: downloads?.jobs ?? [], preloads: activity.preloads, fills: activity.fills,
            scrub: downloads?.scrubber.progress, power: downloads?.power, entries: Array(entries.prefix(entryLimit)),
            usage: store.usage)
    }

    /// `items` as HTML rows between `open` and `close`, or a line that says there are none.
    private static func list<Items: Sequence>(
        _ items: Items, empty: String, open: String = "<ul>", close: String = "</ul>", row: (Items.Element) -> String
    ) -> String {
        let rows = items.map(row)
        return rows.isEmpty ? "<p class=dim>\(empty)</p>" : open + rows.joined() + close
    }

    static func html(_ report: StatusReport) -> String {
        let proxy = report.proxy
        let store = report.store
        let requests = CacheResult.allCases.map {
            "<li><b>\(escape($0.rawValue))</b> \(proxy.requests[$0.rawValue] ?? 0)</li>"
        }.joined()
        let fill = store.limit > 0 ? min(100, Double(store.bytes) * 100 / Double(store.limit)) : 0
        let downloads = list(report.downloads, empty: "None.") { download in
            let done =
                download.end > download.start
                ? Double(download.position - download.start) * 100 / Double(download.end - download.start) : 100
            return
                "<li>\(bar(done))<span class=url>\(escape(download.url))</span> \(bytes(download.position - download.start)) of \(bytes(download.end - download.start))</li>"
        }
        let pinned = list(report.pinned, empty: "None.") { job in
            let total = job.bytesTotal.map { " of \(job.totalIsEstimate ? "about " : "")\(bytes($0))" } ?? ""
            return
                "<li>\(bar((job.fraction ?? 0) * 100))<b>\(escape(job.state.rawValue))</b> \(bytes(job.bytesDone))\(total)"
                + (job.waitingDetail.map { " <span class=dim>waits: \(escape($0))</span>" } ?? "")
                + (job.recordedSeconds.map { " <span class=dim>recording, \(String(format: "%.0f", $0)) s held</span>" }
                    ?? "")
                + (job.failure.map { " <span class=dim>\(escape($0))</span>" } ?? "")
                + "<br><span class=url>\(escape(job.url.absoluteString))</span></li>"
        }
        let scrub = report.scrub.map { scrub in
            let state =
                scrub.isRunning
                ? "checking: \(scrub.entriesChecked) of \(scrub.entriesTotal) pinned entries"
                : "\(scrub.passes) pass\(scrub.passes == 1 ? "" : "es") done"
                    + (scrub.lastPassEnded.map { ", the last ended \(escape($0.formatted(.iso8601)))" } ?? "")
            let done = scrub.bytesTotal > 0 ? Double(scrub.bytesChecked) * 100 / Double(scrub.bytesTotal) : 100
            return "<p id=scrub>\(bar(min(100, done)))Stored bytes check: \(state), \(bytes(scrub.bytesChecked)) of "
                + "\(bytes(scrub.bytesTotal)) read, \(scrub.entriesDamaged) damaged (\(scrub.entriesLeftDamaged) left)</p>"
        }
        let power = report.power.flatMap { power in
            power.isKnown ? "<p id=power class=dim>Power: \(escape(power.words))</p>" : nil
        }
        let preloads = list(report.preloads, empty: "None.") { item in
            "<li><b>\(escape(item.state.rawValue))</b> \(String(format: "%g", item.seconds)) s, \(bytes(item.bytesFetched)) fetched"
                + (item.waiting.map { " <span class=dim>waiting for \(escape($0))</span>" } ?? "")
                + (item.error.map { " <span class=dim>\(escape($0))</span>" } ?? "")
                + "<br><span class=url>\(escape(item.url.absoluteString))</span></li>"
        }
        let fills = list(report.fills, empty: "None.") { fill in
            "<li>\(bar(Double(fill.position) * 100 / Double(max(1, fill.length))))\(bytes(fill.position)) of \(bytes(fill.length))"
                + "<br><span class=url>\(escape(fill.url))</span></li>"
        }
        let entries = list(grouped(report.entries), empty: "Nothing is cached.", open: "<ul class=entries>") { group in
            guard let asset = group.asset else {
                let entry = group.entries[0]
                let picture = entry.length.map { entry.spanSet.coverageBar(length: $0, width: 32) } ?? ""
                return
                    "<li><code class=cover>\(picture)</code> <b>\(String(format: "%.0f", entry.fraction * 100))%</b> of \(entry.length.map(bytes) ?? "?")\(entry.isPinned ? " <b>pinned</b>" : "")"
                    + " <span class=dim>\(escape(entry.mimeType ?? "-"))</span><br><span class=url>\(escape(entry.url ?? entry.key))</span></li>"
            }
            let stored = group.entries.reduce(Int64(0)) { $0 + $1.storedBytes }
            let pinned = group.entries.contains(where: \.isPinned) ? " <b>pinned</b>" : ""
            return "<li><b>\(group.entries.count) segments</b>, \(bytes(stored))\(pinned)"
                + " <span class=dim>\(escape(group.entries[0].mimeType ?? "-"))</span><br><span class=url>\(escape(asset))</span></li>"
        }
        let history = report.usage.map(usage) ?? ""
        let recent = list(
            proxy.recent.reversed(), empty: "No request yet.",
            open: "<table><tr><th>status</th><th>result</th><th>range</th><th>URL</th></tr>", close: "</table>"
        ) { request in
            "<tr><td>\(request.status)</td><td>\(escape(request.result))</td><td>\(escape(request.range ?? "-"))</td><td class=url>\(escape(request.url))</td></tr>"
        }
        return """
            <!doctype html>
            <html lang=en><head><meta charset=utf-8><meta name=viewport content="width=device-width, initial-scale=1">
            <meta http-equiv=refresh content=5><title>mediacache status</title>
            <style>
            body{font:15px/1.4 system-ui,sans-serif;margin:0 auto;max-width:60em;padding:1em;color:#222;background:#fafafa}
            h1{font-size:1.3em;margin:.2em 0}h2{font-size:1.05em;margin:1.2em 0 .4em}
            .cards{display:flex;flex-wrap:wrap;gap:.6em}.card{background:#fff;border:1px solid #ddd;border-radius:8px;padding:.6em .9em;min-width:9em}
            .card b{display:block;font-size:1.4em}.dim{color:#777}.url{word-break:break-all;font-size:.9em}
            .meter{height:.6em;background:#e5e5e5;border-radius:4px;overflow:hidden;margin:.3em 0}.meter span{display:block;height:100%;background:#2a7ae2}
            ul{padding-left:1.1em}ul.entries{list-style:none;padding:0}ul.entries li{margin:.5em 0}code.cover{font-size:.75em;letter-spacing:-.05em;color:#2a7ae2}
            table{border-collapse:collapse;width:100%;font-size:.9em}td,th{text-align:left;padding:.2em .4em;border-bottom:1px solid #eee;vertical-align:top}
            </style></head><body>
            <h1>mediacache</h1>
            <div class=cards>
            <div class=card id=hit-ratio><b>\(String(format: "%.0f", proxy.byteHitRatio * 100))%</b>of bytes from the cache</div>
            <div class=card id=saved><b>\(bytes(proxy.bytesFromCache))</b>saved since the server started</div>
            <div class=card id=lifetime><b>\(bytes(report.usage?.fromCache ?? 0))</b>saved over the cache's life</div>
            <div class=card id=size><b>\(bytes(store.bytes))</b>of \(bytes(store.limit)) in \(store.entries) entr\(store.entries == 1 ? "y" : "ies")<div class=meter><span style="width:\(String(format: "%.1f", fill))%"></span></div></div>
            </div>
            \(history)
            <h2>Requests</h2><ul id=requests>\(requests)</ul>
            <h2>Downloads in flight</h2><div id=downloads>\(downloads)</div>
            <h2>Pinned downloads</h2><div id=pinned>\(pinned)</div>\(power ?? "")\(scrub ?? "")
            <h2>Preloading</h2><div id=preloads>\(preloads)</div>
            <h2>Filling played files</h2><div id=fills>\(fills)</div>
            <h2>Cached</h2><div id=entries>\(entries)</div>
            <h2>Recent requests</h2><div id=recent>\(recent)</div>
            <p class=dim>\(escape(store.directory)) · reloads every 5 s · <a href="/status.json">JSON</a></p>
            </body></html>

            """
    }

    /// The entries to list, the segments of one rendition (``EvictionPolicy/item(of:mimeType:)``)
    /// under one row named by their folder, in the order of their most recent.
    static func grouped(_ entries: [CacheEntrySummary]) -> [(asset: String?, entries: [CacheEntrySummary])] {
        var groups: [(asset: String?, entries: [CacheEntrySummary])] = []
        var index: [String: Int] = [:]
        for entry in entries {
            guard let asset = EvictionPolicy.item(of: entry.url ?? "", mimeType: entry.mimeType) else {
                groups.append((nil, [entry]))
                continue
            }
            if let at = index[asset] {
                groups[at].entries.append(entry)
            } else {
                index[asset] = groups.count
                groups.append((asset, [entry]))
            }
        }
        return groups
    }

    /// The byte hit ratio of each of the last 30 days as a bar chart (inline SVG: no script, no
    /// external asset), and what eviction let go, by reason.
    static func usage(_ usage: UsageHistory) -> String {
        let days = usage.days.suffix(30)
        let width = 12
        let bars = days.enumerated().map { index, day in
            let height = Int((day.byteHitRatio * 100).rounded())
            return "<rect x=\(index * width) y=\(100 - height) width=\(width - 2) height=\(height) fill=\"#2a7ae2\">"
                + "<title>\(escape(day.day)): \(height)% of \(bytes(day.fromCache + day.fromOrigin))</title></rect>"
        }.joined()
        let chart =
            days.isEmpty
            ? "<p class=dim>Nothing served yet.</p>"
            : "<svg id=hit-chart role=img aria-label=\"byte hit ratio by day\" width=\(max(1, days.count) * width) height=100 "
                + "style=\"background:#fff;border:1px solid #ddd\">\(bars)</svg>"
                + "<p class=dim>\(escape(days.first!.day)) to \(escape(days.last!.day)): the share of each day's bytes served from the cache</p>"
        let evicted = usage.evicted.sorted { $0.value > $1.value }.map {
            "<li><b>\(escape($0.key))</b> \(bytes($0.value))</li>"
        }.joined()
        return "<h2>Hit ratio by day</h2>\(chart)<h2>Evicted, by reason</h2>"
            + (evicted.isEmpty ? "<p class=dim>Nothing yet.</p>" : "<ul id=evicted>\(evicted)</ul>")
    }

    private static func bar(_ percent: Double) -> String {
        "<div class=meter><span style=\"width:\(String(format: "%.1f", max(0, min(100, percent))))%\"></span></div>"
    }

    static func bytes(_ count: Int64) -> String {
        ByteCountText.format(count)
    }

    /// `text` safe inside HTML text and attribute values.
    static func escape(_ text: String) -> String {
        MarkupText.escaped(text)
    }
}
