#!/bin/sh
# Makes Tests/Fixtures/store-9c82513.tar.gz: a cache folder in the one-folder layout, written by
# the mediacache binary of commit 9c82513 (before the two storage classes), for
# LayoutMigrationTests. Run from the repository root with that binary's path:
#   git worktree add /tmp/old9c 9c82513 && (cd /tmp/old9c && swift build --product mediacache)
#   scripts/make-layout-fixture.sh /tmp/old9c/.build/debug/mediacache
# The origin is a small Python server on 127.0.0.1:47321 whose answers are fresh for ten years.
set -eu
old="$1"
work=$(mktemp -d)
trap 'kill $origin $server 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/files/hls"
python3 - "$work/files" <<'PY'
import random, sys, os
root = sys.argv[1]
def write(name, seed, size):
    with open(os.path.join(root, name), "wb") as f:
        f.write(random.Random(seed).randbytes(size))
write("pinned.mp3", 1, 60000)
write("streamed.mp3", 2, 40000)
write("other.mp4", 3, 30000)
for i in range(3):
    write(f"hls/seg{i}.ts", 10 + i, 20000)
open(os.path.join(root, "hls/media.m3u8"), "w").write(
    "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n"
    + "".join(f"#EXTINF:4,\nseg{i}.ts\n" for i in range(3)) + "#EXT-X-ENDLIST\n")
open(os.path.join(root, "hls/master.m3u8"), "w").write(
    "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=40000\nmedia.m3u8\n")
PY
cat > "$work/origin.py" <<'PY'
import http.server, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        self.send_header("Cache-Control", "max-age=315360000")
        super().end_headers()
    def guess_type(self, path):
        if path.endswith(".m3u8"): return "application/vnd.apple.mpegurl"
        if path.endswith(".ts"): return "video/mp2t"
        return super().guess_type(path)
http.server.ThreadingHTTPServer(("127.0.0.1", 47321), lambda *a: Handler(*a, directory=sys.argv[1])).serve_forever()
PY
python3 "$work/origin.py" "$work/files" 2>/dev/null & origin=$!
"$old" serve --cache-dir "$work/store" --port 0 > "$work/serve.out" 2>&1 & server=$!
while ! grep -q "serving on" "$work/serve.out"; do sleep 0.2; done
base=$(sed -n 's/.*serving on \(http:[^,]*\),.*/\1/p' "$work/serve.out" | head -1)
"$old" pin --cache-dir "$work/store" http://127.0.0.1:47321/pinned.mp3 http://127.0.0.1:47321/hls/master.m3u8
for path in streamed.mp3 other.mp4; do
    curl -sf -o /dev/null "$base/?url=http%3A%2F%2F127.0.0.1%3A47321%2F$path"
done
kill $server; wait $server 2>/dev/null || true
rm -f "$work/store/server.json"
mkdir -p Tests/Fixtures
tar czf Tests/Fixtures/store-9c82513.tar.gz -C "$work" store files
echo "made Tests/Fixtures/store-9c82513.tar.gz"
