# Shared by the measurement scripts (sourced, not run): start the test origin and
# `mediacache serve` on free loopback ports in the folder "$work".

# Starts `$1/mediacache-bench origin`; sets $origin to its base URL.
start_origin() {
    "$1/mediacache-bench" origin --port 0 > "$work/origin.log" 2>&1 &
    for _ in $(seq 100); do grep -q listening "$work/origin.log" && break; sleep 0.1; done
    origin=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/origin.log")
}

# Runs "$@" (a `mediacache` binary, possibly behind a wrapper such as valgrind) as
# `serve` with its cache in "$work/cache" and the options in $SERVE_ARGS; sets $serve_pid
# and $proxy (its base URL).
start_serve() {
    # shellcheck disable=SC2086  # SERVE_ARGS: further options, split on spaces
    "$@" serve --port 0 --cache-dir "$work/cache" --log-level warning ${SERVE_ARGS:-} > "$work/serve.log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 600); do grep -q "serving on" "$work/serve.log" && break; sleep 0.1; done
    proxy=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.log" | head -1)
}

# Percent-encodes $1 for a `?url=` query.
encode() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
