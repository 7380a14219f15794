#!/usr/bin/env bash
# Hot 64 KiB ranges per second, and their latency p50, of `mediacache serve`: wrk with 8
# kept-alive connections on the same cores, asking ranges of a cached 16 MiB file. Several
# builds are measured alternated, round after round, so a busy moment of this shared machine
# falls on all of them alike.
#
#   scripts/hot-wrk.sh BUILD_DIR[:SERVE OPTIONS] ...   (ROUNDS=3, DURATION=10 seconds per run,
#                                                      CONNECTIONS=8)
#
# Each argument is a build folder, optionally with `serve` options after a colon
# (`.build-release/release:--threads 2`), so one build can be compared with itself; or
# `nginx`: nginx's slice cache (two workers, the bench's configuration) over the origin of
# the first build, the file stored whole first as ours is.
# Build first: swift build -c release --scratch-path .build-release (and the other builds).
# Prints one line per run and, per build, the median requests/s and p50 over the rounds.
# Needs wrk and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- .build-release/release
rounds=${ROUNDS:-3}
duration=${DURATION:-10}
connections=${CONNECTIONS:-8}
root=$(mktemp -d /tmp/mediacache-wrk-XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$root"' EXIT
source scripts/servers.sh

# wrk's script: each request a 64 KiB range at one of 256 spread offsets of the file.
cat > "$root/ranges.lua" <<'LUA'
local i = 0
request = function()
    i = i + 1
    local start = (i * 7919 % 256) * 65536
    return wrk.format("GET", nil, { Range = "bytes=" .. start .. "-" .. (start + 65535) })
end
LUA

declare -A results
for round in $(seq "$rounds"); do
    for candidate in "$@"; do
        build=${candidate%%:*}
        SERVE_ARGS=""; [ "$candidate" = "$build" ] || SERVE_ARGS=${candidate#*:}
        work="$root/run"
        rm -rf "$work"; mkdir -p "$work"
        if [ "$candidate" = nginx ]; then
            for first in "$@"; do [ "$first" = nginx ] || break; done
            start_origin "${first%%:*}"
            curl -s "$origin/_origin/serve?path=/hot.bin&length=16777216&seed=1" > /dev/null
            start_nginx "${origin#http://}"
            url="$proxy/hot.bin"
        else
            start_origin "$build"
            start_serve "$build/mediacache"
            curl -s "$origin/_origin/serve?path=/hot.bin&length=16777216&seed=1" > /dev/null
            url="$proxy/?url=$(encode "$origin/hot.bin")"
        fi
        curl -s -o /dev/null "$url"  # stored whole before the count
        [ -z "${VERBOSE:-}" ] || { curl -s -o /dev/null -w "check: %{http_code} %{size_download}\n" -r 0-65535 "$url"; cat "$work/nginx/error.log" 2>/dev/null | tail -3; }
        wrk -t2 -c"$connections" -d2s -s "$root/ranges.lua" "$url" > /dev/null  # warm-up, not counted
        out=$(wrk -t2 -c"$connections" -d"${duration}s" --latency -s "$root/ranges.lua" "$url")
        [ -z "${VERBOSE:-}" ] || echo "$out"
        rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
        p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
        # Connections each event loop accepted (few long-lived connections can land unevenly).
        loops=$([ "$candidate" = nginx ] || curl -s "$proxy/metrics" | awk -F'[{}"]' '/^mediacache_connections_accepted_total/ {printf "loop %s: %s  ", $3, $5}')
        echo "round $round  $candidate  $rps requests/s  p50 $p50  $loops"
        results[$candidate]+="$rps $p50;"
        kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true
    done
done
for candidate in "$@"; do
    median_rps=$(echo "${results[$candidate]}" | tr ';' '\n' | awk 'NF {print $1}' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    p50s=$(echo "${results[$candidate]}" | tr ';' '\n' | awk 'NF {print $2}' | tr '\n' ' ')
    echo "$candidate: median $median_rps requests/s over $rounds rounds; p50 each round: $p50s"
done
