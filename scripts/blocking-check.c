// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0
//
// Finds blocking calls made on a thread of Swift's cooperative pool (see docs/testing.md).
// Loaded with LD_PRELOAD into the test process, it wraps the C library's blocking calls (file
// I/O, fsync, waits for processes, semaphores, sleeps) and SQLite's step; a call made while a
// Swift task runs on the calling thread (swift_task_getCurrent() is not NULL) is a call that
// holds one of the pool's few threads. Such a call is written, with its stack (as addresses:
// the test binary exports no symbols), to the file MEDIACACHE_BLOCKING_LOG names;
// scripts/blocking-report names the frames and keeps the calls the product makes.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// The executor a job runs on: {NULL, 0} is the global one (the cooperative pool); an actor
// with an executor of its own (GRDB's database queue) has another, whose thread is its own.
typedef struct { void *identity; unsigned long implementation; } executor_ref;
static void *(*current_task)(void);
static executor_ref (*current_executor)(void);
static void *(*preferred_task_executor)(void);
static __thread int reporting;
// Whether this process is the test binary (a `.xctest`). The library is preloaded into
// `swift test` itself so that the suite runs once: it passes through SwiftPM's own processes
// unchecked, and the test binary takes it out of the environment of the processes it starts
// (the command line, ffmpeg, nginx), whose blocking calls are not the test process's.
static int checking;

__attribute__((constructor)) static void start(void) {
    char exe[4096] = {0};
    ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    static const char suffix[] = ".xctest";
    size_t tail = sizeof suffix - 1;
    if (length < (ssize_t)tail || strcmp(exe + length - tail, suffix) != 0) return;
    checking = 1;
    unsetenv("LD_PRELOAD");
}

// Whether the calling thread is one of SwiftNIO's event loops (named "NIO-ELT-…", or
// "NIO-SGLTN-…" in its singleton group).
static int on_event_loop(void) {
    char name[32] = {0};
    if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) return 0;
    return strncmp(name, "NIO-ELT", 7) == 0 || strncmp(name, "NIO-SGLTN", 9) == 0;
}

static void check(const char *call) {
    if (!checking || reporting) return;
    if (!current_task) {
        current_executor = (executor_ref(*)(void))dlsym(RTLD_DEFAULT, "swift_task_getCurrentExecutor");
        preferred_task_executor = (void *(*)(void))dlsym(RTLD_DEFAULT, "swift_task_getPreferredTaskExecutor");
        current_task = (void *(*)(void))dlsym(RTLD_DEFAULT, "swift_task_getCurrent");
    }
    if (!current_task || !current_task()) return;
    // On an executor of its own (an actor's serial queue, a task executor's thread): not the
    // pool. But a task on an event loop (the proxy runs a request's work on its connection's
    // loop) holds every connection of that loop: a blocking call there counts too.
    if (!on_event_loop()) {
        if (current_executor && current_executor().identity) return;
        if (preferred_task_executor && preferred_task_executor()) return;
    }
    reporting = 1;
    void *frames[48];
    int count = backtrace(frames, 48);
    char **symbols = backtrace_symbols(frames, count);
    const char *path = getenv("MEDIACACHE_BLOCKING_LOG");
    if (symbols && path) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&lock);
        FILE *log = fopen(path, "a");
        if (log) {
            fprintf(log, "blocking call %s on a task's thread\n", call);
            for (int i = 2; i < count; i++) fprintf(log, "  %s\n", symbols[i]);
            fclose(log);
        }
        pthread_mutex_unlock(&lock);
    }
    free(symbols);
    reporting = 0;
}

#define NEXT(name) static __typeof__(name) *next; if (!next) next = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t pread(int fd, void *buf, size_t count, off_t offset) { NEXT(pread); check("pread"); return next(fd, buf, count, offset); }
ssize_t pread64(int fd, void *buf, size_t count, off_t offset) { NEXT(pread64); check("pread"); return next(fd, buf, count, offset); }
ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) { NEXT(pwrite); check("pwrite"); return next(fd, buf, count, offset); }
ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) { NEXT(pwrite64); check("pwrite"); return next(fd, buf, count, offset); }
int fsync(int fd) { NEXT(fsync); check("fsync"); return next(fd); }
int fdatasync(int fd) { NEXT(fdatasync); check("fdatasync"); return next(fd); }
int ftruncate(int fd, off_t length) { NEXT(ftruncate); check("ftruncate"); return next(fd, length); }
int unlink(const char *path) { NEXT(unlink); check("unlink"); return next(path); }
int rename(const char *a, const char *b) { NEXT(rename); check("rename"); return next(a, b); }
int mkdir(const char *path, mode_t mode) { NEXT(mkdir); check("mkdir"); return next(path, mode); }
int open(const char *path, int flags, ...) {
    NEXT(open);
    va_list args;
    va_start(args, flags);
    mode_t mode = (flags & O_CREAT) ? va_arg(args, int) : 0;
    va_end(args);
    check("open");
    return next(path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    NEXT(open64);
    va_list args;
    va_start(args, flags);
    mode_t mode = (flags & O_CREAT) ? va_arg(args, int) : 0;
    va_end(args);
    check("open");
    return next(path, flags, mode);
}
pid_t waitpid(pid_t pid, int *status, int options) { NEXT(waitpid); if (!(options & WNOHANG)) check("waitpid"); return next(pid, status, options); }
int sem_wait(sem_t *sem) { NEXT(sem_wait); check("sem_wait"); return next(sem); }
int nanosleep(const struct timespec *req, struct timespec *rem) { NEXT(nanosleep); check("nanosleep"); return next(req, rem); }
int usleep(useconds_t usec) { NEXT(usleep); check("usleep"); return next(usec); }
int sqlite3_step(void *statement) { NEXT(sqlite3_step); check("sqlite3_step"); return next(statement); }
