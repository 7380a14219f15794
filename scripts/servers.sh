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

# Starts nginx as a slice cache (the bench's configuration: two workers on two cores, 1 MiB
# slices, sendfile) in front of the origin at host:port $1, in "$work/nginx"; sets $proxy.
start_nginx() {
    local dir="$work/nginx" port
    mkdir -p "$dir"
    # Run as root, nginx's workers are another user (www-data): they must reach the cache.
    chmod 755 "$work" "$(dirname "$work")" 2>/dev/null || true
    chmod 777 "$dir"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat > "$dir/nginx.conf" <<CONF
daemon off;
worker_processes auto;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush off;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy_temp;
    proxy_cache_path $dir/cache levels=1:2 keys_zone=media:16m max_size=8g inactive=1d use_temp_path=off;
    upstream origin { server $1; keepalive 32; }
    server {
        listen 127.0.0.1:$port;
        slice 1m;
        proxy_cache media;
        proxy_cache_key \$uri\$slice_range;
        proxy_set_header Range \$slice_range;
        proxy_cache_valid 200 206 1d;
        proxy_cache_lock on;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        location / { proxy_pass http://origin; }
    }
}
CONF
    nginx -c "$dir/nginx.conf" -e "$dir/error.log" > /dev/null 2>&1 &
    proxy="http://127.0.0.1:$port"
    for _ in $(seq 100); do curl -s -o /dev/null "$proxy/" && break; sleep 0.1; done
}
