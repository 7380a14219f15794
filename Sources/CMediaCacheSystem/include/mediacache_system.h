// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

#ifndef MEDIACACHE_SYSTEM_H
#define MEDIACACHE_SYSTEM_H

/// Forces every written byte of the file system holding the open descriptor `fd` to the disk
/// and waits for it (Linux `syncfs`, which Swift's C library module leaves out); 0 on success,
/// -1 with `errno` set otherwise (`ENOSYS` where the system has no such call).
int mediacache_syncfs(int fd);

#endif
