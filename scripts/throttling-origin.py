#!/usr/bin/env python3
"""An origin that slows long requests down, as some video hosts do past about 10 MB.

    scripts/throttling-origin.py FILE [--limit BYTES] [--slow BYTES_PER_SECOND]

Serves FILE at /media (any path) with ranges and a strong ETag; a request that asks for more
than --limit bytes (10 MB by default; no Range asks for the whole file) is sent at --slow bytes
per second (50 KB/s by default), any other at full speed. Prints "listening on PORT" when ready.
For scripts/origin-piece-bench.sh; not part of the product.
"""
import argparse
import http.server
import os
import re
import socketserver
import time

parser = argparse.ArgumentParser()
parser.add_argument("file")
parser.add_argument("--limit", type=int, default=10_000_000)
parser.add_argument("--slow", type=int, default=50_000)
args = parser.parse_args()
size = os.path.getsize(args.file)
etag = '"%x-%x"' % (size, int(os.path.getmtime(args.file)))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_):
        pass

    def do_GET(self):
        start, end = 0, size - 1
        status = 200
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if_range = self.headers.get("If-Range")
        if match and (if_range is None or if_range == etag):
            start = int(match.group(1))
            end = min(size - 1, int(match.group(2))) if match.group(2) else size - 1
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        length = end - start + 1
        self.send_response(status)
        self.send_header("Content-Type", "video/mp4")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(length))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        slow = length > args.limit
        with open(args.file, "rb") as file:
            file.seek(start)
            left = length
            try:
                while left > 0:
                    step = min(left, 5_000 if slow else 1 << 20)
                    self.wfile.write(file.read(step))
                    left -= step
                    if slow:
                        time.sleep(step / args.slow)
            except (BrokenPipeError, ConnectionResetError):
                pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


with Server(("127.0.0.1", 0), Handler) as server:
    print("listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()
