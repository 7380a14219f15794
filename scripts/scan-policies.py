#!/usr/bin/env python3
# This file is part of MediaCache. Copyright 2026 the MediaCache authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0
"""What libCacheSim's reference policies keep after a scan: 300 objects of size 1, each asked
once, through a cache that holds 100; prints, per policy, the runs of object numbers it still
holds (looked up without admitting). A policy that keeps the newest holds 201-300; one that
keeps what filled it first holds the warm-up, whatever comes later.

Needs PyPI's libcachesim (pip install libcachesim); not a dependency of the product.
"""
import libcachesim as lcs

POLICIES = [("LRU", lcs.LRU), ("S3-FIFO", lcs.S3FIFO), ("SIEVE", lcs.Sieve), ("W-TinyLFU", lcs.WTinyLFU),
            ("ARC", lcs.ARC)]


def kept(make, objects=300, capacity=100):
    cache = make(capacity)
    request = lcs.Request()
    for obj in range(1, objects + 1):
        request.obj_id, request.obj_size = obj, 1
        cache.get(request)
    held = []
    for obj in range(1, objects + 1):
        request.obj_id, request.obj_size = obj, 1
        if cache.find(request, False):
            held.append(obj)
    return held


def runs(numbers):
    out = []
    for n in numbers:
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in out)


if __name__ == "__main__":
    print(f"libcachesim {getattr(lcs, '__version__', '?')}: 300 objects asked once, a cache of 100")
    for name, make in POLICIES:
        print(f"{name}\t{runs(kept(make))}")
