#!/usr/bin/env bash
# How much later a cold range's first byte comes through `mediacache serve` than straight
# from the origin, both on loopback.
#
#   scripts/cold-first-byte.sh [BUILD_DIR] [OTHER_MEDIACACHE]   (default .build-release/release)
#
# Build first: swift build -c release --scratch-path .build-release
# Serves N files of 2 MB (N=40 by default) from the test origin and, one at a time, asks
# for one straight from the origin and for another, never read before, through the proxy
# (whose origin connection is warm), with curl; prints the medians of curl's first byte and
# of the per-file difference. With OTHER_MEDIACACHE (another build of `mediacache`, e.g. the
# binary of an earlier commit), a second server runs beside the first and each round asks
# both, interleaved: an A/B in one run, the per-round difference printed.
# Needs curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-.build-release/release}
other=${2:-}
files=${N:-40}
root=$(mktemp -d /tmp/mediacache-first-byte-XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$root"' EXIT

source scripts/servers.sh
work=$root
start_origin "$build"
mkdir -p "$root/a" "$root/b"
work=$root/a start_serve "$build/mediacache"
proxy_a=$proxy
proxy_b=
if [ -n "$other" ]; then
    work=$root/b start_serve "$other"
    proxy_b=$proxy
fi

for i in $(seq 0 "$files"); do
    for name in a b d; do
        curl -s "$origin/_origin/serve?path=/$name$i.bin&length=2000000&seed=$i" > /dev/null
    done
done
# Warm each proxy's origin connection.
curl -s -o /dev/null "$proxy_a/?url=$(encode "$origin/a0.bin")"
[ -z "$proxy_b" ] || curl -s -o /dev/null "$proxy_b/?url=$(encode "$origin/b0.bin")"

first_byte() { curl -s -o /dev/null -w '%{time_starttransfer}' "$1"; }
for i in $(seq 1 "$files"); do
    direct=$(first_byte "$origin/d$i.bin")
    a=$(first_byte "$proxy_a/?url=$(encode "$origin/a$i.bin")")
    b=0
    [ -z "$proxy_b" ] || b=$(first_byte "$proxy_b/?url=$(encode "$origin/b$i.bin")")
    echo "$direct $a $b"
done | python3 -c '
import sys, statistics
rows = [[float(x) * 1000 for x in line.split()] for line in sys.stdin]
median = lambda values: statistics.median(list(values))
print("cold first byte, %d files, medians: direct %.2f ms, through the proxy %.2f ms, per file %.2f ms later"
      % (len(rows), median(r[0] for r in rows), median(r[1] for r in rows), median(r[1] - r[0] for r in rows)))
if any(r[2] for r in rows):
    print("the other build: through it %.2f ms, per file %.2f ms later than direct; other minus this, per round: %.3f ms"
          % (median(r[2] for r in rows), median(r[2] - r[0] for r in rows), median(r[2] - r[1] for r in rows)))
'
