#!/usr/bin/env bash
# How much faster a host that slows long requests streams through `serve --origin-piece`.
#
#   scripts/origin-piece-bench.sh [BUILD_DIR]   (default .build-release/release; SECONDS_SLOW=20)
#
# A Python origin (scripts/throttling-origin.py) sends any request for more than 10 MB at
# 50 KB/s and smaller ones at full speed. A 60 MB file is read through `mediacache serve`
# without pieces (for SECONDS_SLOW seconds: the whole file would take 20 minutes) and with
# `--origin-piece 127.0.0.1=8M` (to its end, its bytes compared with the file's), each on a
# fresh cache; prints both rates and their ratio. Needs python3, curl and cmp.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-.build-release/release}
slow_seconds=${SECONDS_SLOW:-20}
work=$(mktemp -d /tmp/mediacache-pieces-XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
head -c 62914560 /dev/urandom > "$work/film.mp4"
python3 scripts/throttling-origin.py "$work/film.mp4" > "$work/origin.log" 2>&1 &
for _ in $(seq 100); do grep -q listening "$work/origin.log" && break; sleep 0.1; done
origin="http://127.0.0.1:$(awk '/listening/ {print $3}' "$work/origin.log")/film.mp4"
source scripts/servers.sh

# Reads the film through a fresh `serve` with $SERVE_ARGS for at most $1 seconds; prints bytes/s.
rate() {
    local out="$work/out-$2"
    rm -rf "$work/cache"
    start_serve "$build/mediacache"
    local url="$proxy/?url=$(encode "$origin")"
    local began=$(date +%s.%N)
    curl -s --max-time "$1" -o "$out" "$url" || true
    local ended=$(date +%s.%N)
    local bytes=$(stat -c %s "$out")
    kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
    python3 -c "print(int($bytes / ($ended - $began)))"
}
slow=$(SERVE_ARGS="" rate "$slow_seconds" plain)
fast=$(SERVE_ARGS="--origin-piece 127.0.0.1=8M" rate 600 pieces)
cmp "$work/out-pieces" "$work/film.mp4" && echo "with pieces: every byte the origin's (60 MiB)"
echo "without pieces: $slow bytes/s (for $slow_seconds s); with --origin-piece 127.0.0.1=8M: $fast bytes/s"
python3 -c "print('ratio: %.0fx' % ($fast / $slow))"
