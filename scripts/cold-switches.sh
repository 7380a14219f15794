#!/usr/bin/env bash
# Context switches of `mediacache serve` per MiB read through it: a cold file (origin →
# store → client) and the same file again, hot (store → client).
#
#   scripts/cold-switches.sh [BUILD_DIR] [SIZE_MIB]   (default .build-release/release, 256)
#
# Build first: swift build -c release --scratch-path .build-release
# Counts are the sums, over every thread of the server, of voluntary (the thread waited:
# a hand-off to another thread or an idle wait) and involuntary (preempted) switches from
# /proc, read before and after one curl of the whole file. They are counts, not timings,
# so a busy machine changes them less than it changes throughput (mostly the involuntary).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-.build-release/release}
size_mib=${2:-256}
work=$(mktemp -d /tmp/mediacache-switches-XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

source scripts/servers.sh
start_origin "$build"
start_serve "$build/mediacache"

# Sums "voluntary involuntary" over the server's threads.
switches() {
    cat /proc/"$serve_pid"/task/*/status 2>/dev/null | awk '
        /^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { n += $2 }
        END { print v, n }'
}
# Reads `url` whole and prints "<label>: voluntary and involuntary switches per MiB, MiB/s".
measure() {
    local label=$1 url=$2 before after seconds
    read -r v0 n0 < <(switches)
    seconds=$(curl -s -o /dev/null -w '%{time_total}' "$url")
    read -r v1 n1 < <(switches)
    awk -v l="$label" -v v=$((v1 - v0)) -v n=$((n1 - n0)) -v m="$size_mib" -v s="$seconds" \
        'BEGIN { printf "%s: %.1f voluntary + %.1f involuntary switches per MiB (%d + %d for %d MiB), %.0f MiB/s\n", l, v / m, n / m, v, n, m, m / s }'
}

# Warm the server's code paths on a small file first.
curl -s "$origin/_origin/serve?path=/warm.bin&length=1048576&seed=1" > /dev/null
curl -s -o /dev/null "$proxy/?url=$(encode "$origin/warm.bin")"
curl -s "$origin/_origin/serve?path=/cold.bin&length=$((size_mib << 20))&seed=2" > /dev/null
url="$proxy/?url=$(encode "$origin/cold.bin")"
if [ -n "${BY_THREAD:-}" ]; then
    for t in /proc/"$serve_pid"/task/*; do echo "$(cat $t/comm) $(awk '/^voluntary_ctxt/ {print $2}' $t/status)"; done | sort > "$work/before"
fi
measure "cold $size_mib MiB" "$url"
if [ -n "${BY_THREAD:-}" ]; then
    for t in /proc/"$serve_pid"/task/*; do echo "$(cat $t/comm) $(awk '/^voluntary_ctxt/ {print $2}' $t/status)"; done | sort > "$work/after"
    paste "$work/before" "$work/after" | awk '{ d[$1] += $4 - $2 } END { for (k in d) if (d[k] > 0) print "  " k ": " d[k] }' | sort -t: -k2 -n -r
fi
# The hot read starts once the download has ended (the admin endpoint's count).
for _ in $(seq 100); do
    curl -s -H "X-MediaCache-Admin: 1" "$proxy/_mediacache/stats" | grep -q '"downloadsInFlight":0' && break
    sleep 0.1
done
measure "hot  $size_mib MiB" "$url"
