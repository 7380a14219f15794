#!/usr/bin/env bash
# Instructions per request of `mediacache serve`, counted by callgrind (repeatable, unlike
# timings on a shared machine).
#
#   scripts/callgrind-requests.sh [BUILD_DIR]   (default .build-release/release)
#
# Build first: swift build -c release --scratch-path .build-release
# Prints, for each request kind, the instructions the whole server process executed
# between the first and the last of N requests, divided by N:
#   hot   : a cached 64 KiB range, N requests one after another on one keep-alive connection
#           (of a 64 MiB file; HOT_LENGTH=BYTES for another size; HOT_PARTIAL=1: the file is
#           not stored whole first, only the ranges the uncounted first pass asks for; HOT_MIME:
#           its Content-Type, video/mp4 by default)
#   new   : the same cached ranges, each on a new connection (accept, pipeline set-up, answer)
#   cold  : the first 64 KiB of a file nobody read yet (origin on loopback), one per file
#   stream: a file nobody read yet (STREAM_MIB MiB, 16 by default) read whole, per MiB (the
#           index's commits, every 50 ms of wall time, weigh more under callgrind than at speed)
#   floor : the same hot and new requests answered by `mediacache-bench floor-server` (a bare
#           SwiftNIO server sending the range with sendfile: no cache, no checks, no log), and
#           the same cold requests by `mediacache-bench floor-proxy` (SwiftNIO's server and
#           AsyncHTTPClient, the body to a file and the client; again with the file written on
#           NIO's thread pool, as the product must), under callgrind in the same run; the ratios
#           say how far above the framework we are
# With KEEP=1 the work folder stays, its callgrind dumps (hot, new, cold, stream in that order) ready
# for callgrind_annotate.
# Needs valgrind and curl. valgrind 3.19 (Debian 12) crashes in libdispatch's
# sigsuspend (it writes into the read-only mask it is given); a small preloaded shim
# copies the mask first. Nothing of it is in the product.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-.build-release/release}
hot_requests=${HOT_REQUESTS:-200}
cold_requests=${COLD_REQUESTS:-20}
work=$(mktemp -d /tmp/mediacache-callgrind-XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

cat > "$work/sigshim.c" <<'EOF'
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, 8);
}
EOF
cc -shared -fPIC -O2 "$work/sigshim.c" -o "$work/sigshim.so"
# valgrind 3.19 cannot read DWARF 5: profile a copy without debug sections (symbols stay).
strip --strip-debug -o "$work/mediacache" "$build/mediacache"

source scripts/servers.sh
start_origin "$build"
LD_PRELOAD="$work/sigshim.so" start_serve valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$work/callgrind.%p" "$work/mediacache"
valgrind_pid=$serve_pid

# Counts the instructions the server executes while "$@" runs.
count() {
    local pid=${count_pid:-$valgrind_pid}
    callgrind_control --zero "$pid" > /dev/null
    callgrind_control --instr=on "$pid" > /dev/null
    "$@"
    callgrind_control --instr=off "$pid" > /dev/null
    callgrind_control --dump "$pid" > /dev/null
    local dump
    dump=$(ls -t "$work"/callgrind."$pid".* 2>/dev/null | head -1)
    grep -m1 '^totals:' "$dump" | awk '{print $2}'
}

# Hot: a 64 MiB file (HOT_LENGTH bytes), cached whole first, then N 64 KiB ranges at spread offsets.
curl -s "$origin/_origin/serve?path=/hot.bin&length=${HOT_LENGTH:-67108864}&seed=1&mime=$(encode "${HOT_MIME:-video/mp4}")" > /dev/null
hot_url="$proxy/?url=$(encode "$origin/hot.bin")"
# HOT_PARTIAL=1: not fetched whole; the uncounted pass below stores only the ranges asked for.
[ -n "${HOT_PARTIAL:-}" ] || curl -s -o /dev/null "$hot_url"
hot_blocks=$(( ${HOT_LENGTH:-67108864} / 65536 )); [ "$hot_blocks" -gt 1000 ] && hot_blocks=1000
hot_args=()
for i in $(seq 0 $((hot_requests - 1))); do
    start=$(( (i * 7919 % hot_blocks) * 65536 ))
    [ "$i" -gt 0 ] && hot_args+=(--next)
    hot_args+=(-s -o /dev/null -r "$start-$((start + 65535))" "$hot_url")
done
hot() { curl "${hot_args[@]}"; }
hot  # once uncounted, so lazily initialised code is not counted
hot_total=$(count hot)

new_args=()
for i in $(seq 0 $((hot_requests - 1))); do
    start=$(( (i * 7919 % hot_blocks) * 65536 ))
    [ "$i" -gt 0 ] && new_args+=(--next)
    new_args+=(-s -o /dev/null -H "Connection: close" -r "$start-$((start + 65535))" "$hot_url")
done
new() { curl "${new_args[@]}"; }
new_total=$(count new)

# Cold: N files, the first 64 KiB of each, each file read once.
cold_args=()
for i in $(seq 1 "$cold_requests"); do
    curl -s "$origin/_origin/serve?path=/cold-$i.bin&length=8388608&seed=$i" > /dev/null
    [ "$i" -gt 1 ] && cold_args+=(--next)
    cold_args+=(-s -o /dev/null -r 0-65535 "$proxy/?url=$(encode "$origin/cold-$i.bin")")
done
curl -s "$origin/_origin/serve?path=/cold-warm.bin&length=8388608&seed=99" > /dev/null
curl -s -o /dev/null -r 0-65535 "$proxy/?url=$(encode "$origin/cold-warm.bin")"
cold() { curl "${cold_args[@]}"; sleep 1; }  # the downloads' tails finish in the second
cold_total=$(count cold)

# Stream: one file nobody read yet (STREAM_MIB MiB, 16 by default), whole, origin to store to client.
stream_mib=${STREAM_MIB:-16}
curl -s "$origin/_origin/serve?path=/stream.bin&length=$((stream_mib << 20))&seed=7" > /dev/null
stream() { curl -s -o /dev/null "$proxy/?url=$(encode "$origin/stream.bin")"; sleep 1; }
stream_total=$(count stream)

# The floor: the same ranges of the same bytes from a bare SwiftNIO server, same requests.
curl -s -o "$work/hot.bin" "$origin/hot.bin"
strip --strip-debug -o "$work/mediacache-bench" "$build/mediacache-bench"
LD_PRELOAD="$work/sigshim.so" valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$work/callgrind.%p" "$work/mediacache-bench" floor-server --file "$work/hot.bin" \
    > "$work/floor.log" 2>&1 &
count_pid=$!
for _ in $(seq 600); do grep -q "listening on" "$work/floor.log" && break; sleep 0.1; done
floor=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/floor.log" | head -1)
hot_args=("${hot_args[@]//"$hot_url"/$floor/hot.bin}")
new_args=("${new_args[@]//"$hot_url"/$floor/hot.bin}")
hot
floor_hot_total=$(count hot)
floor_new_total=$(count new)
kill "$count_pid"

# The miss's floor: `floor-proxy` (SwiftNIO's server and AsyncHTTPClient on one loop, each body
# written to a file and to the client, no cache), the same cold requests for files of its own;
# then again with each file made, written and closed on NIO's thread pool (`--writes-on-pool`),
# as the product's rule on blocking calls asks. Prints the instructions of the requests.
floor_proxy_cold() {
    local name=$1
    shift
    LD_PRELOAD="$work/sigshim.so" valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$work/callgrind.%p" "$work/mediacache-bench" floor-proxy \
        --origin-port "${origin##*:}" --folder "$work" "$@" > "$work/$name.log" 2>&1 &
    count_pid=$!
    for _ in $(seq 600); do grep -q "listening on" "$work/$name.log" && break; sleep 0.1; done
    local floor_proxy
    floor_proxy=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/$name.log" | head -1)
    floor_cold_args=()
    for i in $(seq 1 "$cold_requests"); do
        curl -s "$origin/_origin/serve?path=/$name-cold-$i.bin&length=8388608&seed=$i" > /dev/null
        [ "$i" -gt 1 ] && floor_cold_args+=(--next)
        floor_cold_args+=(-s -o /dev/null -r 0-65535 "$floor_proxy/$name-cold-$i.bin")
    done
    curl -s -o /dev/null -r 0-65535 "$floor_proxy/cold-warm.bin"
    floor_cold() { curl "${floor_cold_args[@]}"; sleep 1; }
    count floor_cold
    kill "$count_pid"
}
floor_cold_total=$(floor_proxy_cold floor-proxy)
pool_cold_total=$(floor_proxy_cold floor-pool --writes-on-pool)

echo "hot 64 KiB range:  $((hot_total / hot_requests)) instructions per request ($hot_requests requests, one connection)"
echo "hot, new connection: $((new_total / hot_requests)) instructions per request ($hot_requests requests, each on its own connection)"
echo "cold first 64 KiB: $((cold_total / cold_requests)) instructions per request ($cold_requests files, each asked of the origin for just the 64 KiB wanted)"
echo "cold stream: $((stream_total / stream_mib)) instructions per MiB (one file of $stream_mib MiB, whole)"
echo "floor (bare SwiftNIO, sendfile), same requests: hot $((floor_hot_total / hot_requests)), new connection $((floor_new_total / hot_requests)) instructions per request"
echo "floor proxy (SwiftNIO and AsyncHTTPClient, no cache), same cold requests: $((floor_cold_total / cold_requests)) instructions per request; its file on NIO's thread pool: $((pool_cold_total / cold_requests))"
awk -v h="$hot_total" -v n="$new_total" -v fh="$floor_hot_total" -v fn="$floor_new_total" \
    -v c="$cold_total" -v fc="$floor_cold_total" -v pc="$pool_cold_total" \
    'BEGIN { printf "ours / floor: hot %.2fx, new connection %.2fx, cold %.2fx (%.2fx the floor writing on the pool)\n", h / fh, n / fn, c / fc, c / pc }'
