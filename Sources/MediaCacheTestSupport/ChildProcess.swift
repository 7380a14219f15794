// This file is part of MediaCache. Copyright 2026 the MediaCache authors.
// Licensed under the Apache License, Version 2.0 (see LICENSE). SPDX-License-Identifier: Apache-2.0

public import Foundation
import Synchronization

/// Starts the project's own executables from tests and benchmarks.
public enum ChildProcess {
    /// The built `name` executable beside the running test bundle or binary.
    public static func executable(named name: String) throws -> URL {
        var candidates: [URL] = []
        let running = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var folder = running.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(folder.appendingPathComponent(name))
            folder = folder.deletingLastPathComponent()
        }
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) {
            return found
        }
        throw ChildProcessError(
            message: "Cannot find the executable \(name) near \(running.path); build it with `swift build` first.")
    }

    /// Starts `executable` with `arguments`, its standard output piped back and its standard
    /// error written to `errorFile` if given (else shared with the parent's).
    public static func start(_ executable: URL, _ arguments: [String], errorFile: URL? = nil) throws -> (
        SpawnedProcess, Pipe
    ) {
        let output = Pipe()
        var errors: FileHandle?
        if let errorFile {
            guard FileManager.default.createFile(atPath: errorFile.path, contents: nil) else {
                throw ChildProcessError(message: "Cannot create \(errorFile.path).")
            }
            errors = try FileHandle(forWritingTo: errorFile)
        }
        defer { try? errors?.close() }
        let process = try SpawnedProcess(
            executable.path, arguments, standardOutput: output.fileHandleForWriting.fileDescriptor,
            standardError: errors?.fileDescriptor)
        try output.fileHandleForWriting.close()
        return (process, output)
    }

    /// Starts `executable` and waits, off the cooperative pool, until it prints a line that
    /// starts with `prefix`; returns the process and that line. Its standard error goes to
    /// `errorFile` if given.
    public static func startServer(
        _ executable: URL, _ arguments: [String], readyLinePrefix prefix: String,
        errorFile: URL? = nil
    ) async throws -> (SpawnedProcess, String) {
        let (process, output) = try start(executable, arguments, errorFile: errorFile)
        do {
            let text = try await onOwnThread { try waitForLine(prefix, on: output) }
            let line = text.split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init) ?? text
            return (process, line)
        } catch {
            process.terminate()
            throw error
        }
    }

    /// Runs a command-line tool found on the `PATH` and returns its exit status, standard
    /// output and standard error. The waiting happens on a thread of its own: blocking the
    /// cooperative pool would starve servers running in the same process.
    public static func run(_ arguments: [String]) async throws -> (status: Int32, output: Data, error: String) {
        try await onOwnThread { try runBlocking(arguments) }
    }

    /// Whether a tool named `name` is on the `PATH`: an executable file of that name in one
    /// of its folders. Looked up without starting a process (it was `which`, started and
    /// waited for on the calling thread: a blocked thread of the cooperative pool when a test
    /// asked at its start).
    public static func toolExists(_ name: String) -> Bool {
        let folders = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return folders.contains { access("\($0)/\(name)", X_OK) == 0 }
    }

    /// Runs `body`, which blocks, on a thread of its own. Not on a Dispatch global queue:
    /// their threads are few and shared with the cooperative pool on Linux, so a blocked one
    /// held up the servers of the test it waited for until Dispatch's monitor, which looks once
    /// a second, added a thread (a curl through the proxy took whole seconds to its first
    /// byte, and under load more than its 30 s limit).
    public static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    private static func runBlocking(_ arguments: [String]) throws -> (status: Int32, output: Data, error: String) {
        guard let tool = arguments.first else { throw ChildProcessError(message: "No command to run.") }
        let output = Pipe()
        let errors = Pipe()
        let process = try SpawnedProcess(
            tool, Array(arguments.dropFirst()), searchingPath: true,
            standardOutput: output.fileHandleForWriting.fileDescriptor,
            standardError: errors.fileHandleForWriting.fileDescriptor)
        try output.fileHandleForWriting.close()
        try errors.fileHandleForWriting.close()
        // Read both pipes to the end before waiting, so a chatty tool cannot block on a full pipe.
        let collected = Mutex<(Data, Data)>((Data(), Data()))
        let group = DispatchGroup()
        for (index, pipe) in [output, errors].enumerated() {
            group.enter()
            Thread {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                collected.withLock { if index == 0 { $0.0 = data } else { $0.1 = data } }
                group.leave()
            }.start()
        }
        group.wait()
        process.waitUntilExit()
        let (out, err) = collected.withLock { $0 }
        return (process.terminationStatus, out, String(decoding: err, as: UTF8.self))
    }

    /// ``waitForLine(_:on:)`` on a thread of its own, for async code.
    public static func lineArrives(_ line: String, on pipe: Pipe) async throws -> String {
        try await onOwnThread { try waitForLine(line, on: pipe) }
    }

    /// Reads `pipe` until a line equal to `line` arrives; throws at end of file.
    public static func waitForLine(_ line: String, on pipe: Pipe) throws -> String {
        var text = ""
        while true {
            let data = pipe.fileHandleForReading.availableData
            if data.isEmpty {
                throw ChildProcessError(message: "The child process ended before printing \(line); it printed: \(text)")
            }
            text += String(decoding: data, as: UTF8.self)
            if text.split(separator: "\n").contains(where: { $0 == line || $0.hasPrefix(line + " ") }) { return text }
        }
    }
}

/// A child process did not do what was expected.
public struct ChildProcessError: Error, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// A child process started with `posix_spawn`, closing every descriptor above 2 in the child.
///
/// Not Foundation's `Process`: on Linux its `run()` lists `/proc/self/fd` with a read of 256
/// bytes per entry past the end of glibc's buffer, and crashed the test process (SIGSEGV in
/// `Process.run`) once the suites over three schemes held some 1,400 descriptors open
/// (swift-corelibs-foundation PR 5472, not in this toolchain).
public final class SpawnedProcess: Sendable {
    /// How a process ended.
    public enum Ending: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)
    }

    public let processIdentifier: pid_t
    private let ending = Mutex<Ending?>(nil)

    /// Starts `executable` (a path, or with `searchingPath` a name looked up on `PATH`) with
    /// `arguments`; the given descriptors become its standard output and error (else it
    /// shares the parent's).
    public init(
        _ executable: String, _ arguments: [String], searchingPath: Bool = false,
        standardOutput: Int32? = nil, standardError: Int32? = nil
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let standardOutput { posix_spawn_file_actions_adddup2(&actions, standardOutput, 1) }
        if let standardError { posix_spawn_file_actions_adddup2(&actions, standardError, 2) }
        guard addCloseFrom(&actions, 3) == 0 else {
            throw ChildProcessError(message: "posix_spawn_file_actions_addclosefrom_np failed.")
        }
        // A child inherits the spawning thread's signal mask and ignored signals: threads of
        // this process block some (ffmpeg then ignored SIGTERM). Every signal reaches it as it
        // would from a shell.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result =
            searchingPath
            ? posix_spawnp(&pid, executable, &actions, &attributes, argv, environ)
            : posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard result == 0 else {
            throw ChildProcessError(message: "Cannot start \(executable): \(String(cString: strerror(result)))")
        }
        processIdentifier = pid
    }

    /// Waits for the process to end, blocking the calling thread.
    public func waitUntilExit() {
        _ = reap(blocking: true)
    }

    /// Waits for the process to end on a thread of its own: in a test, blocking one of the
    /// cooperative pool's few threads (two on a two-core machine) stalls every other test
    /// of the process, whose timeouts then fire.
    public func exited() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                self.waitUntilExit()
                continuation.resume()
            }.start()
        }
    }

    /// Asks it to stop (SIGTERM) and waits for it to end, off the cooperative pool.
    public func stop() async {
        terminate()
        await exited()
    }

    /// Whether it has not ended yet.
    public var isRunning: Bool {
        reap(blocking: false) == nil
    }

    /// Asks it to stop (SIGTERM).
    public func terminate() {
        if isRunning { kill(processIdentifier, SIGTERM) }
    }

    /// How it ended (after ``waitUntilExit()``).
    public var terminationReason: Ending? {
        ending.withLock { $0 }
    }

    /// Its exit status, or 128 + the signal that ended it.
    public var terminationStatus: Int32 {
        switch ending.withLock({ $0 }) {
        case .exited(let status)?: status
        case .signalled(let signal)?: 128 + signal
        case nil: -1
        }
    }

    /// How it ended, once it has; with `blocking`, waits for that first. The wait holds no
    /// lock: `waitid` with `WNOWAIT` sees the end without reaping it (the process stays a
    /// zombie, so its pid is not reused), and only the reaping, which does not wait, is done
    /// under the lock. (The wait once held the lock, so `terminate()` and `isRunning` from
    /// another task blocked a thread of the cooperative pool until the process ended on its
    /// own, and the signal meant to end it was never sent.)
    private func reap(blocking: Bool) -> Ending? {
        if blocking, ending.withLock({ $0 }) == nil {
            var info = siginfo_t()
            while waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT) == -1, errno == EINTR {}
        }
        return ending.withLock { ending in
            if let ending { return ending }
            var status: Int32 = 0
            var result: pid_t
            repeat {
                result = waitpid(processIdentifier, &status, WNOHANG)
            } while result == -1 && errno == EINTR
            guard result == processIdentifier else { return nil }
            // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import as functions.
            let signal = status & 0x7f
            ending = signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
            return ending
        }
    }
}

/// glibc 2.34's `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module does
/// not import (it is behind `_GNU_SOURCE`).
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func addCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ lowest: Int32) -> Int32
