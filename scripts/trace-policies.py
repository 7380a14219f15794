#!/usr/bin/env python3
"""The reference policies on a trace: libCacheSim's LRU, S3-FIFO, SIEVE, W-TinyLFU, GDSF, LFUDA
and ARC, and the offline optimum (Belady, furthest next use), at the given cache sizes.

Reads a trace in mediacache-bench's CSV form (play,kind,path,size,type,first,last), cuts each
request into the 256 KiB objects it touches (object = path and index; the last of a file is
shorter), and asks each policy for them in order. A missed object costs its whole size from the
origin. Prints, per size and policy, the byte miss ratio (origin bytes / asked bytes) and the
plays whose first request missed nothing (instant starts), as tab-separated lines:

    size  policy  byte_miss_ratio  instant_starts  plays

Needs PyPI's libcachesim (pip install libcachesim); not a dependency of the product.
"""
import csv
import heapq
import sys

import libcachesim as lcs

CHUNK = 256 << 10


def objects(path):
    """The trace's requests as (play, first-of-play, asked bytes, [(object id, size)])."""
    ids = {}
    requests = []
    last_play = None
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            play = int(row["play"])
            size, first, last = int(row["size"]), int(row["first"]), int(row["last"])
            touched = []
            for index in range(first // CHUNK, last // CHUNK + 1):
                key = (row["path"], index)
                if key not in ids:
                    ids[key] = len(ids) + 1
                touched.append((ids[key], min(CHUNK, size - index * CHUNK)))
            requests.append((play, play != last_play, last - first + 1, touched))
            last_play = play
    return requests


def run(cache, requests, oracle=None):
    asked = missed = starts = 0
    plays = 0
    request = lcs.Request()
    step = 0
    for play, first, length, touched in requests:
        asked += length
        plays += first
        all_hit = True
        for obj, size in touched:
            request.obj_id, request.obj_size = obj, size
            if oracle is not None:
                request.next_access_vtime = oracle[step]
            step += 1
            if not cache.get(request):
                missed += size
                all_hit = False
        starts += first and all_hit
    return missed / asked, starts, plays


def belady(requests, size):
    """Furthest next use, sizes counted: evicts the object needed last until the new one fits."""
    accesses = [obj for _, _, _, touched in requests for obj, _ in touched]
    sizes = {obj: s for _, _, _, touched in requests for obj, s in touched}
    next_use = [0] * len(accesses)
    seen = {}
    for i in range(len(accesses) - 1, -1, -1):
        next_use[i] = seen.get(accesses[i], float("inf"))
        seen[accesses[i]] = i
    held = {}  # obj -> next use
    heap = []  # (-next use, obj)
    used = 0
    asked = missed = starts = plays = 0
    step = 0
    for play, first, length, touched in requests:
        asked += length
        plays += first
        all_hit = True
        for obj, s in touched:
            if obj in held:
                held[obj] = next_use[step]
                heapq.heappush(heap, (-next_use[step], obj))
            else:
                missed += s
                all_hit = False
                if next_use[step] != float("inf") and s <= size:
                    while used + s > size:
                        negative, victim = heapq.heappop(heap)
                        if victim in held and held[victim] == -negative:
                            if -negative < next_use[step]:
                                # Everything held is needed sooner than the new object: skip it.
                                heapq.heappush(heap, (negative, victim))
                                break
                            used -= sizes[victim]
                            del held[victim]
                    if used + s <= size:
                        held[obj] = next_use[step]
                        heapq.heappush(heap, (-next_use[step], obj))
                        used += s
            step += 1
        starts += first and all_hit
    return missed / asked, starts, plays


def main():
    trace, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
    requests = objects(trace)
    policies = [
        ("LRU", lcs.LRU), ("S3-FIFO", lcs.S3FIFO), ("SIEVE", lcs.Sieve), ("W-TinyLFU", lcs.WTinyLFU),
        ("GDSF", lcs.GDSF), ("LFUDA", lcs.LFUDA), ("ARC", lcs.ARC),
    ]
    for size in sizes:
        for name, policy in policies:
            ratio, starts, plays = run(policy(cache_size=size), requests)
            print(f"{size}\t{name}\t{ratio:.4f}\t{starts}\t{plays}", flush=True)
        ratio, starts, plays = belady(requests, size)
        print(f"{size}\toptimum\t{ratio:.4f}\t{starts}\t{plays}", flush=True)


if __name__ == "__main__":
    main()
