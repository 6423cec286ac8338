import Foundation
import HammockJSON
import HammockSystem
import Synchronization
import Testing

// The one process harness of every test target: it drives the real, built `hammock` executable (or a plugin
// executable built beside it) as a consumer would, a subprocess with pipes on stdin, stdout and stderr.
//
//     try await HammockProcess.withRunning(config: yaml) { hammock in
//         let hello = try await hammock.nextLine { _ in true }
//         try hammock.send(controlLine: #"{"op":"load","source":"a"}"#)
//         try await hammock.waitFor(type: "source", id: "a") { $0.event == "newData" }
//     }
//
// `withRunning` kills the process and removes its temporary folder however the body ends. Waits fail
// the test (by throwing `HammockHarnessError`) with every line read so far and the tail of stderr. Every
// stdout line must be a JSON object: `stop()` fails the test for any other (`execute` is the way to read
// raw output, such as `check`'s or `--help`'s).

// MARK: - One line of output

/// One line `hammock` wrote on stdout, parsed.
public struct HammockLine: Sendable, CustomStringConvertible {
    /// The line as written, without its `\n`.
    public let text: String
    public let json: JSONValue
    /// When the harness read it.
    public let receivedAt: ContinuousClock.Instant

    public var type: String? { json["type"]?.stringValue }
    public var seq: Int? { json["seq"]?.numberValue?.intValue }
    public var id: String? { json["id"]?.stringValue }
    /// `source` lines: the event that produced the state (`requested`, `newData`, ...).
    public var event: String? { json["event"]?.stringValue }
    /// `source` lines with a `newData` event: `load`, `push`, `cache`, `override` or `wipe`.
    public var origin: String? { json["origin"]?.stringValue }
    /// `source` lines: the whole state of the source.
    public var state: JSONValue? { json["state"] }
    /// `view` lines: `loading`, `error`, `data` or `idle`.
    public var status: String? { json["status"]?.stringValue }
    /// `state.content`, for source lines.
    public var content: JSONValue? { self[pointer: "/state/content"] }
    /// `state.latestError`, for source lines (`.null` when there is none).
    public var latestError: JSONValue? { self[pointer: "/state/latestError"] }
    /// `state.latestError.message`, or "" when there is none.
    public var errorMessage: String { self[pointer: "/state/latestError/message"]?.stringValue ?? "" }
    /// `state.latestError.code`, or nil when there is none.
    public var errorCode: String? { self[pointer: "/state/latestError/code"]?.stringValue }

    /// A member of the line.
    public subscript(key: String) -> JSONValue? { json[key] }

    /// The value at a JSON Pointer into the line, e.g. `/state/latestError/httpStatus`.
    public subscript(pointer pointer: String) -> JSONValue? {
        guard let parsed = JSONPointer(pointer) else { return nil }
        return json[parsed]
    }

    public var description: String { text }
}

/// How a process ended.
public enum Termination: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    public var description: String {
        switch self {
        case .exited(let status): "exit status \(status)"
        case .signaled(let signal): "killed by signal \(signal)"
        }
    }
}

/// A wait that gave up or a harness operation that failed; the description says everything the test
/// author needs (what was expected, every line read so far, the tail of stderr).
public struct HammockHarnessError: Error, CustomStringConvertible {
    public let message: String
    public let sourceLocation: SourceLocation

    public init(message: String, sourceLocation: SourceLocation) {
        self.message = message
        self.sourceLocation = sourceLocation
    }

    public var description: String { "\(message)\n(at \(sourceLocation))" }
}

/// The result of a run that was left to finish by itself (`check`, `--version`, ...).
public struct CompletedRun: Sendable {
    public var termination: Termination
    public var stdout: String
    public var stderr: String
}

// MARK: - The process

public final class HammockProcess: Sendable {
    /// Generous, so a loaded machine does not fail a correct engine; tests stay fast because waits return
    /// as soon as the line is there.
    public static let defaultTimeout: Duration = .seconds(8)

    public let pid: Int32
    /// A fresh temporary folder owned by this process; removed by `stop()`.
    public let directory: String
    /// The configuration file `hammock run` was given.
    public let configPath: String
    public let arguments: [String]

    private let process: Process
    private let stdinDescriptor: Mutex<Int32?>
    private let stdout: PipeReader
    private let stderr: PipeReader
    /// Whether stdout is checked line by line as JSON objects (not for `execute`).
    private let stdoutIsJSON: Bool
    /// Where the test started the process: `stop()` reports stdout lines that are not JSON there.
    private let startedAt: SourceLocation
    /// Just before the process was started: what a test measures hammock's own times from (a test may wait
    /// for a `RunSlots` slot before that).
    public let launchedAt = ContinuousClock.now
    /// Set by the first `stop()`, so its checks run once.
    private let stopped = Mutex(false)

    // MARK: Finding the executable, writing configurations

    /// The built `hammock` executable: beside the running test executable, where SwiftPM puts both the test
    /// bundle and the products (`HAMMOCK_EXECUTABLE` overrides it).
    public static func executablePath(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        if let override = ProcessInfo.processInfo.environment["HAMMOCK_EXECUTABLE"] { return override }
        return try productPath("hammock", sourceLocation: sourceLocation)
    }

    /// The folder holding the built products: the test executable's.
    public static var productsDirectory: String {
        let testExecutable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        return (testExecutable as NSString).deletingLastPathComponent
    }

    /// A built product of this package (`hammock`, `hammock-plugin-shell`, ...), beside the test executable.
    public static func productPath(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let path = productsDirectory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw HammockHarnessError(
                message: """
                    \(name) is not at \(path) (beside the test executable); \
                    build it first with `swift build --build-tests`
                    """,
                sourceLocation: sourceLocation)
        }
        return path
    }

    /// A new, empty folder under the system's temporary folder.
    public static func makeTemporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/hammock-e2e-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Removes a folder that `makeTemporaryDirectory` made, and nothing else: a folder whose name does not
    /// start with `hammock-e2e-` (a project folder handed in by mistake) is left where it is.
    public static func removeTemporaryDirectory(_ path: String) {
        let name = (path as NSString).lastPathComponent
        guard name.hasPrefix("hammock-e2e-"), path.hasPrefix(FileManager.default.temporaryDirectory.path + "/")
        else { return }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Writes `yaml` to `name` in `directory` and returns the file's path.
    ///
    /// Without Foundation's `fsync` of every file it writes (`TestFiles.writeInPlace`): a wait for the disk, on a
    /// busy machine a long one, in a test's task on the cooperative pool, for a file nothing needs on the disk.
    @discardableResult
    public static func writeConfig(_ yaml: String, in directory: String, name: String = "config.yaml") throws -> String {
        let path = directory + "/" + name
        try TestFiles.writeInPlace(yaml, to: path)
        return path
    }

    /// The environment a child gets: a small, predictable base plus `extra`.
    public static func environment(_ extra: [String: String], home: String) -> [String: String] {
        var environment = [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "LANG": "C.UTF-8",
        ]
        environment.merge(extra) { _, new in new }
        return environment
    }

    // MARK: Running

    /// Writes `config` to a fresh temporary folder, starts `hammock run CONFIG ARGUMENTS...`, runs `body`,
    /// then kills the process and removes the folder, whether `body` returned or threw. Also fails the test
    /// if any stdout line was not a JSON object.
    ///
    /// - Parameter launcher: a program and its arguments that start hammock in their turn (`exec "$@"`),
    ///   for the rare test that must wrap it.
    /// - Parameter readingStderr: false leaves stderr unread (its pipe fills up) until `resumeReadingStderr()`,
    ///   as with a consumer that never reads it.
    /// - Parameter stdoutIsJSON: false reads stdout as plain text lines (`--format text`, `polybar`):
    ///   `stdoutLines`, `waitForStdoutLines`.
    public static func withRunning<Result: Sendable>(
        config: String, arguments: [String] = [], environment: [String: String] = [:],
        readingStdout: Bool = true, readingStderr: Bool = true, launcher: [String] = [],
        stdoutIsJSON: Bool = true, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: (HammockProcess) async throws -> Result
    ) async throws -> Result {
        try await RunSlots.withSlot {
            let hammock = try launch(
                config: config, arguments: arguments, environment: environment, readingStdout: readingStdout,
                readingStderr: readingStderr, launcher: launcher, stdoutIsJSON: stdoutIsJSON,
                sourceLocation: sourceLocation)
            let result: Result
            do {
                result = try await body(hammock)
            } catch {
                await hammock.stop()
                throw error
            }
            await hammock.stop()
            return result
        }
    }

    /// `withRunning` on a configuration file the test keeps (to run the same file several times, or to change
    /// it for a reload): starts `hammock run CONFIGPATH`, runs `body`, then stops the process however `body`
    /// ended.
    public static func withRunning<Result: Sendable>(
        configPath: String, arguments: [String] = [], environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation, _ body: (HammockProcess) async throws -> Result
    ) async throws -> Result {
        try await RunSlots.withSlot {
            let hammock = try launch(
                configPath: configPath, arguments: arguments, environment: environment, sourceLocation: sourceLocation)
            let result: Result
            do {
                result = try await body(hammock)
            } catch {
                await hammock.stop()
                throw error
            }
            await hammock.stop()
            return result
        }
    }

    /// Starts `hammock run CONFIG ARGUMENTS...` with `config` written to a fresh temporary folder. Prefer
    /// `withRunning`, which always cleans up; whoever calls this must call `stop()`.
    public static func launch(
        config: String, arguments: [String] = [], environment: [String: String] = [:],
        readingStdout: Bool = true, readingStderr: Bool = true, launcher: [String] = [],
        stdoutIsJSON: Bool = true, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> HammockProcess {
        let hammock = try executablePath(sourceLocation: sourceLocation)
        let directory = try makeTemporaryDirectory()
        let configPath = try writeConfig(config, in: directory)
        let command = launcher + [hammock, "run", configPath] + arguments
        return try HammockProcess(
            executable: command[0], arguments: Array(command.dropFirst()),
            environment: Self.environment(environment, home: directory), directory: directory,
            configPath: configPath, stdoutIsJSON: stdoutIsJSON, readingStdout: readingStdout, readingStderr: readingStderr,
            sourceLocation: sourceLocation)
    }

    /// Starts `hammock run CONFIGPATH` on a configuration file the test keeps (to run the same file several
    /// times), in a fresh temporary working folder; whoever calls this must call `stop()`.
    public static func launch(
        configPath: String, arguments: [String] = [], environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> HammockProcess {
        let executable = try executablePath(sourceLocation: sourceLocation)
        let directory = try makeTemporaryDirectory()
        return try HammockProcess(
            executable: executable, arguments: ["run", configPath] + arguments,
            environment: Self.environment(environment, home: directory), directory: directory,
            configPath: configPath, stdoutIsJSON: true, readingStdout: true, sourceLocation: sourceLocation)
    }

    /// Starts another product of this package (a plugin: `hammock-plugin-shell`, ...) with `arguments`, in a
    /// fresh temporary working folder, its stdout read as JSON lines like hammock's; the test plays its
    /// engine. Whoever calls this must call `stop()` (or leave it to `deinit`, which kills it).
    public static func launch(
        product: String, arguments: [String] = [], environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> HammockProcess {
        let executable = try productPath(product, sourceLocation: sourceLocation)
        let directory = try makeTemporaryDirectory()
        return try HammockProcess(
            executable: executable, arguments: arguments, environment: Self.environment(environment, home: directory),
            directory: directory, configPath: "", stdoutIsJSON: true, readingStdout: true, sourceLocation: sourceLocation)
    }

    /// Starts a program the test needs beside hammock (a server such as httpbin), in a fresh temporary working
    /// folder, its stdout read as text (`stdoutLines`). Whoever calls this must call `stop()`.
    public static func launch(
        program: String, arguments: [String] = [], environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> HammockProcess {
        let directory = try makeTemporaryDirectory()
        return try HammockProcess(
            executable: program, arguments: arguments, environment: Self.environment(environment, home: directory),
            directory: directory, configPath: "", stdoutIsJSON: false, readingStdout: true, sourceLocation: sourceLocation)
    }

    /// Runs `hammock ARGUMENTS...` to its end with stdin empty and returns its status and output; kills it
    /// and fails if it takes longer than `timeout`.
    public static func execute(
        _ arguments: [String], environment: [String: String] = [:], timeout: Duration = defaultTimeout,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> CompletedRun {
        let executable = try executablePath(sourceLocation: sourceLocation)
        let directory = try makeTemporaryDirectory()
        let child = try HammockProcess(
            executable: executable, arguments: arguments, environment: Self.environment(environment, home: directory),
            directory: directory, configPath: "", stdoutIsJSON: false, readingStdout: true,
            sourceLocation: sourceLocation)
        do {
            child.closeStdin()
            let termination = try await child.waitForExit(timeout: timeout, sourceLocation: sourceLocation)
            // The pipes reach their end shortly after the exit; wait for it so no output is lost.
            try await child.waitUntilStdoutEnds(timeout: .seconds(5), sourceLocation: sourceLocation)
            try await child.waitUntilStderrEnds(timeout: .seconds(5), sourceLocation: sourceLocation)
            let run = CompletedRun(
                termination: termination, stdout: child.stdout.text, stderr: child.stderr.text)
            await child.stop()
            return run
        } catch {
            await child.stop()
            throw error
        }
    }

    /// Writes `config` to a fresh folder and runs `hammock check` on it to its end (`execute`).
    public static func check(
        config: String, arguments: [String] = [], environment: [String: String] = [:],
        timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> CompletedRun {
        let folder = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = try writeConfig(config, in: folder)
        return try await execute(
            ["check", path] + arguments, environment: environment, timeout: timeout, sourceLocation: sourceLocation)
    }

    private init(
        executable: String, arguments: [String], environment: [String: String], directory: String,
        configPath: String, stdoutIsJSON: Bool, readingStdout: Bool, readingStderr: Bool = true,
        sourceLocation: SourceLocation
    ) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let (stdinWrite, stdoutRead, stderrRead) = try Self.spawnLock.withLock { _ in
            let stdinPipe = try Self.makePipe()
            let stdoutPipe = try Self.makePipe()
            let stderrPipe = try Self.makePipe()
            process.standardInput = FileHandle(fileDescriptor: stdinPipe.read, closeOnDealloc: false)
            process.standardOutput = FileHandle(fileDescriptor: stdoutPipe.write, closeOnDealloc: false)
            process.standardError = FileHandle(fileDescriptor: stderrPipe.write, closeOnDealloc: false)
            defer {
                // The child has its own copies; keeping the parent's would hide the ends of the pipes.
                close(stdinPipe.read)
                close(stdoutPipe.write)
                close(stderrPipe.write)
            }
            do {
                try process.run()
            } catch {
                [stdinPipe.write, stdoutPipe.read, stderrPipe.read].forEach { _ = close($0) }
                throw HammockHarnessError(
                    message: "could not start \(executable) \(arguments.joined(separator: " ")): \(error)",
                    sourceLocation: sourceLocation)
            }
            return (stdinPipe.write, stdoutPipe.read, stderrPipe.read)
        }
        self.process = process
        self.pid = process.processIdentifier
        self.directory = directory
        self.configPath = configPath
        self.arguments = arguments
        self.stdinDescriptor = Mutex(stdinWrite)
        self.stdoutIsJSON = stdoutIsJSON
        self.startedAt = sourceLocation
        self.stdout = PipeReader(descriptor: stdoutRead, parsesJSON: stdoutIsJSON, paused: !readingStdout)
        self.stderr = PipeReader(descriptor: stderrRead, parsesJSON: false, paused: !readingStderr)
        stdout.start(name: "hammock-e2e.stdout")
        stderr.start(name: "hammock-e2e.stderr")
    }

    deinit {
        // A backstop only: `withRunning` and `execute` stop the process themselves.
        if process.isRunning { kill(pid, SIGKILL) }
        stdinDescriptor.withLock { descriptor in
            if let open = descriptor { close(open) }
            descriptor = nil
        }
        if !stopped.withLock({ $0 }) { Self.removeTemporaryDirectory(directory) }
    }

    /// A pipe whose ends are closed on `exec`, so a process started by a test running in parallel never
    /// inherits them (which would keep this test's pipes from reaching their end).
    ///
    /// Glibc's `pipe2` is not visible from Swift, so the flag is set just after `pipe`; callers hold
    /// `spawnLock` so that no other test of this process starts a child in between.
    private static func makePipe() throws -> (read: Int32, write: Int32) {
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        return (descriptors[0], descriptors[1])
    }

    /// Held while pipes are made and a child is started (see `makePipe`).
    private static let spawnLock = Mutex(())

    // MARK: Reading stdout

    /// Every line read so far, in order.
    public var lines: [HammockLine] { stdout.withState { $0.lines } }

    /// How many lines have been read so far: a mark for `lines(since:)`.
    public var lineCount: Int { stdout.withState { $0.lines.count } }

    /// The lines read after `mark` (a former `lineCount`).
    public func lines(since mark: Int) -> [HammockLine] { stdout.withState { Array($0.lines[min(mark, $0.lines.count)...]) } }

    /// Stdout lines that were not JSON objects (there must be none).
    public var malformedLines: [String] { stdout.withState { $0.malformed } }

    /// Everything written on stderr so far.
    public var stderrText: String { stderr.text }

    /// Everything written on stdout so far, as it was written.
    public var stdoutText: String { stdout.text }

    /// Returns the first line after the previous match (or from the start) that satisfies `predicate`, and
    /// moves past it; lines skipped over stay in `lines`. Throws when `timeout` passes first.
    @discardableResult
    public func nextLine(
        where predicate: (HammockLine) -> Bool, timeout: Duration = defaultTimeout, _ what: String = "a line matching the condition",
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> HammockLine {
        try await awaitLine(what, timeout: timeout, sourceLocation: sourceLocation) { state in
            while state.cursor < state.lines.count {
                let line = state.lines[state.cursor]
                state.cursor += 1
                if predicate(line) { return line }
            }
            return nil
        }
    }

    /// `nextLine` for a line of a `type` (and an `id`) that also satisfies `predicate`.
    @discardableResult
    public func waitFor(
        type: String, id: String? = nil, timeout: Duration = defaultTimeout,
        sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: (HammockLine) -> Bool = { _ in true }
    ) async throws -> HammockLine {
        var what = "a \"\(type)\" line"
        if let id { what += " for \"\(id)\"" }
        what += " matching the condition"
        return try await nextLine(
            where: { $0.type == type && (id == nil || $0.id == id) && predicate($0) }, timeout: timeout, what,
            sourceLocation: sourceLocation)
    }

    /// Waits until `condition` holds for every line read so far (for facts that do not depend on the order of
    /// lines, such as "both sources have answered"); throws when `timeout` passes first.
    public func waitUntil(
        _ what: String, timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: ([HammockLine]) -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while !stdout.withState({ condition($0.lines) }) {
            if ContinuousClock.now >= deadline {
                throw failure("timed out after \(timeout) waiting until \(what)", sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// The next `source` line for `source` that satisfies `predicate`, after the last one this returned for
    /// that source: each source has a place of its own, so waiting for one never skips another's lines (which
    /// `nextLine` and `waitFor`, with their one place for every line, would).
    @discardableResult
    public func next(
        _ source: String, timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: (HammockLine) -> Bool = { _ in true }
    ) async throws -> HammockLine {
        try await awaitLine("the awaited line for \"\(source)\"", timeout: timeout, sourceLocation: sourceLocation) { state in
            var cursor = state.sourceCursors[source] ?? 0
            defer { state.sourceCursors[source] = cursor }
            while cursor < state.lines.count {
                let line = state.lines[cursor]
                cursor += 1
                if line.type == "source" && line.id == source && predicate(line) { return line }
            }
            return nil
        }
    }

    /// Polls stdout's lines with `take` (which moves whichever place it reads from) until it finds one,
    /// stdout ends, or `timeout` passes. A poll, for want of an event: the reader is a thread of its own.
    private func awaitLine(
        _ what: String, timeout: Duration, sourceLocation: SourceLocation,
        _ take: (inout PipeReader.State) -> HammockLine?
    ) async throws -> HammockLine {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (found, finished) = stdout.withState { state in (take(&state), state.finished) }
            if let found { return found }
            if finished {
                throw failure("stdout ended before \(what)", sourceLocation: sourceLocation)
            }
            if ContinuousClock.now >= deadline {
                throw failure("timed out after \(timeout) waiting for \(what)", sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// `next` for `source`'s next answer to a load: `newData`, `notModified` or `error`.
    @discardableResult
    public func nextAnswer(
        _ source: String, timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> HammockLine {
        try await next(source, timeout: timeout, sourceLocation: sourceLocation) {
            ["newData", "notModified", "error"].contains($0.event ?? "")
        }
    }

    /// Forgets the lines read so far for the purpose of `nextLine`: the next match must come after them.
    public func skipLinesReadSoFar() {
        stdout.withState { $0.cursor = $0.lines.count }
    }

    /// Reads lines until none arrives for `quiet`, then returns those read since the call (at most
    /// `timeout` in all).
    public func linesUntilQuiet(quiet: Duration = .milliseconds(300), timeout: Duration = defaultTimeout) async throws -> [HammockLine] {
        let mark = lineCount
        let deadline = ContinuousClock.now + timeout
        var count = mark
        var lastChange = ContinuousClock.now
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            let now = lineCount
            if now != count {
                count = now
                lastChange = .now
            } else if ContinuousClock.now - lastChange >= quiet {
                break
            }
        }
        return lines(since: mark)
    }

    /// Stops reading stdout, so the pipe fills up as with a consumer that does not read.
    public func pauseReading() { stdout.withState { $0.paused = true } }

    public func resumeReading() { stdout.withState { $0.paused = false } }

    /// How many bytes hammock has written on stdout that the harness has not read yet.
    public var unreadStdoutBytes: Int { stdout.unreadBytes }

    /// Waits until stdout reaches its end (hammock and everything holding its stdout have exited), so that
    /// `lines` is all there will ever be; throws when `timeout` passes first.
    public func waitUntilStdoutEnds(timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        await stdout.waitUntilFinished(timeout: timeout)
        guard stdout.withState({ $0.finished }) else {
            throw failure("stdout did not reach its end within \(timeout)", sourceLocation: sourceLocation)
        }
    }

    /// Waits until stderr reaches its end, so that `stderrText` is all there will ever be; throws when
    /// `timeout` passes first.
    public func waitUntilStderrEnds(timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        await stderr.waitUntilFinished(timeout: timeout)
        guard stderr.withState({ $0.finished }) else {
            throw failure("stderr did not reach its end within \(timeout)", sourceLocation: sourceLocation)
        }
    }

    /// Stdout's complete lines, as text (for a process whose stdout is not JSON).
    public var stdoutLines: [String] {
        let text = stdout.text
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeLast()  // what follows the last newline: empty, or a line not finished yet
        return lines
    }

    /// Waits until stdout's complete text lines satisfy `condition`; throws when `timeout` passes first.
    @discardableResult
    public func waitForStdoutLines(
        _ what: String, timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: ([String]) -> Bool
    ) async throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let lines = stdoutLines
            if condition(lines) { return lines }
            if ContinuousClock.now >= deadline {
                throw failure(
                    "timed out after \(timeout) waiting until \(what); stdout: \(lines)", sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until stderr holds `text`; throws when `timeout` passes first.
    public func waitForStderr(
        containing text: String, timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while !stderr.text.contains(text) {
            if stderr.withState({ $0.finished }) {
                throw failure("stderr ended without \"\(text)\"", sourceLocation: sourceLocation)
            }
            if ContinuousClock.now >= deadline {
                throw failure("timed out after \(timeout) waiting for \"\(text)\" on stderr", sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Starts reading stderr, left unread by `readingStderr: false`.
    public func resumeReadingStderr() { stderr.withState { $0.paused = false } }

    /// How many bytes hammock has written on stderr that the harness has not read yet (a full pipe holds
    /// 64 KiB).
    public var unreadStderrBytes: Int { stderr.unreadBytes }

    /// Closes the read end of stdout, as a consumer that goes away does; waits until it is closed.
    public func closeStdout() async {
        stdout.withState { $0.closeRequested = true }
        await stdout.waitUntilFinished(timeout: .seconds(5))
    }

    // MARK: Writing stdin, signals, exit

    /// Writes one control line (a `\n` is added).
    public func send(controlLine: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        if let problem = write(Array((controlLine + "\n").utf8)) {
            throw failure("cannot send \(controlLine): \(problem)", sourceLocation: sourceLocation)
        }
    }

    /// Writes `bytes` to hammock's stdin as they are (several control lines at once, for a flood); blocks
    /// while the pipe is full. False once stdin cannot be written (closed, or hammock has ended).
    public func send(bytes: [UInt8]) -> Bool { write(bytes) == nil }

    /// Writes to stdin; what went wrong, or nil.
    private func write(_ bytes: [UInt8]) -> String? {
        stdinDescriptor.withLock { descriptor in
            guard let descriptor else { return "stdin is already closed" }
            // Writing to a process that has ended raises SIGPIPE, which would end the whole test run: the
            // system layer's write blocks it on this thread for the write.
            do {
                try Descriptor.writeAllWithoutBrokenPipeSignal(bytes, to: descriptor)
            } catch {
                return "write to stdin failed: \(error)"
            }
            return nil
        }
    }

    /// Writes one control line given as a JSON value.
    public func send(_ control: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try send(controlLine: control.jsonString, sourceLocation: sourceLocation)
    }

    /// Closes hammock's stdin (its end of input).
    public func closeStdin() {
        stdinDescriptor.withLock { descriptor in
            if let open = descriptor { close(open) }
            descriptor = nil
        }
    }

    public func signal(_ number: Int32) {
        kill(pid, number)
    }

    public var isRunning: Bool { process.isRunning }

    /// Waits for the process to end and says how; throws if it is still running after `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Termination {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now >= deadline {
                throw failure("the process was still running after \(timeout)", sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return termination
    }

    /// How the process ended; only valid once it has.
    private var termination: Termination {
        switch process.terminationReason {
        case .exit: .exited(process.terminationStatus)
        case .uncaughtSignal: .signaled(process.terminationStatus)
        @unknown default: .exited(process.terminationStatus)
        }
    }

    /// The process's peak resident memory so far, in KiB (`VmHWM`, the kernel's high-water mark: no sample
    /// can miss a short peak), or nil once it has ended.
    public func peakResidentKiB() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }

    /// The process's resident set size (`VmRSS` in /proc/PID/status), in KiB; nil once it has ended.
    public func residentKiB() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }

    /// Kills the process if it still runs, waits for it, closes every pipe and removes the temporary folder;
    /// the first call fails the test if any stdout line was not a JSON object (unless stdout was read raw, by
    /// `execute`). Safe to call more than once.
    public func stop() async {
        let firstStop = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        if process.isRunning { kill(pid, SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(5)
        while process.isRunning && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        closeStdin()
        stdout.withState { $0.closeRequested = true }
        stderr.withState { $0.closeRequested = true }
        await stdout.waitUntilFinished(timeout: .seconds(2))
        await stderr.waitUntilFinished(timeout: .seconds(2))
        Self.removeTemporaryDirectory(directory)
        let malformed = malformedLines
        if firstStop && stdoutIsJSON && !malformed.isEmpty {
            Issue.record("stdout lines that are not JSON objects: \(malformed)", sourceLocation: startedAt)
        }
        if firstStop, let crash = Self.swiftCrashReport(in: stderrText) {
            Issue.record("a Swift process of this hammock crashed (the engine or a plugin):\n\(crash)", sourceLocation: startedAt)
        }
    }

    /// The Swift runtime's report of a crash (`*** Program crashed: …`, the crashed thread's backtrace) in
    /// `stderr`, at most 80 lines of it, or nil. No test crashes hammock's own Swift code on purpose (the
    /// plugins that crash on purpose are Python fixtures): one that did crashed in earnest, and its backtrace,
    /// passed on with the plugin's stderr, is all there will be to go on. (Seen once in CI: the rest plugin
    /// "killed by signal 11", and the backtrace was thrown away with the rest of stderr.)
    public static func swiftCrashReport(in stderr: String) -> String? {
        guard let start = stderr.range(of: "*** Program crashed:") ?? stderr.range(of: "*** Signal ") else { return nil }
        let from = stderr.index(start.lowerBound, offsetBy: -200, limitedBy: stderr.startIndex) ?? stderr.startIndex
        let lines = stderr[from...].split(separator: "\n", omittingEmptySubsequences: false)
        return lines.prefix(80).joined(separator: "\n")
    }

    // MARK: Failures

    private func failure(_ message: String, sourceLocation: SourceLocation) -> HammockHarnessError {
        let seen = lines
        let shown = seen.suffix(80)
        var text = "\(message)\n"
        text += "hammock \(arguments.joined(separator: " ")) (pid \(pid), \(process.isRunning ? "running" : "\(termination)"))\n"
        text += "stdout: \(seen.count) lines read"
        if shown.count < seen.count { text += ", the last \(shown.count) shown" }
        text += ":\n" + shown.map { "  " + $0.text }.joined(separator: "\n")
        let malformed = malformedLines
        if !malformed.isEmpty { text += "\nnot JSON on stdout:\n" + malformed.map { "  " + $0 }.joined(separator: "\n") }
        let errorText = stderr.text
        text += "\nstderr (tail):\n" + errorText.split(separator: "\n").suffix(30).map { "  " + $0 }.joined(separator: "\n")
        return HammockHarnessError(message: text, sourceLocation: sourceLocation)
    }
}

// MARK: - Reading a pipe

/// Reads one pipe on a thread of its own and keeps what it read: lines, parsed as JSON for stdout.
///
/// The thread polls with a short timeout rather than blocking in `read`, so it can be paused (a consumer that
/// stops reading) and can close the descriptor itself (closing it from another thread while `read` blocks
/// on it would not end the pipe).
private final class PipeReader: Sendable {
    struct State {
        var lines: [HammockLine] = []
        var text: [UInt8] = []
        var malformed: [String] = []
        /// The index in `lines` where `nextLine` continues.
        var cursor = 0
        /// For each source, the index in `lines` where `next(_:)` continues.
        var sourceCursors: [String: Int] = [:]
        var paused: Bool
        var closeRequested = false
        /// The end of the pipe was reached, or the descriptor was closed.
        var finished = false
    }

    private let descriptor: Int32
    private let parsesJSON: Bool
    private let state: Mutex<State>

    init(descriptor: Int32, parsesJSON: Bool, paused: Bool) {
        self.descriptor = descriptor
        self.parsesJSON = parsesJSON
        state = Mutex(State(paused: paused))
    }

    func start(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    func withState<R>(_ body: (inout State) -> R) -> R {
        state.withLock { state in body(&state) }
    }

    var text: String { withState { String(decoding: $0.text, as: UTF8.self) } }

    /// Bytes waiting in the pipe, not read yet.
    var unreadBytes: Int {
        var count: Int32 = 0
        return ioctl(descriptor, UInt(FIONREAD), &count) == 0 ? Int(count) : 0
    }

    func waitUntilFinished(timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        while !withState({ $0.finished }) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    private func run() {
        var partial: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        defer {
            close(descriptor)
            withState { $0.finished = true }
        }
        while true {
            let (closeRequested, paused) = withState { ($0.closeRequested, $0.paused) }
            if closeRequested { return }
            if paused {
                usleep(5_000)
                continue
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 20)
            if ready <= 0 { continue }  // a timeout, or EINTR
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return
            }
            if count == 0 {
                if !partial.isEmpty { deliver(partial, terminated: false) }
                return
            }
            let received = chunk[0..<count]
            withState { $0.text.append(contentsOf: received) }
            var start = received.startIndex
            while let newline = received[start...].firstIndex(of: UInt8(ascii: "\n")) {
                partial.append(contentsOf: received[start..<newline])
                deliver(partial, terminated: true)
                partial.removeAll(keepingCapacity: true)
                start = newline + 1
            }
            partial.append(contentsOf: received[start...])
        }
    }

    private func deliver(_ bytes: [UInt8], terminated: Bool) {
        guard parsesJSON else { return }
        let text = String(decoding: bytes, as: UTF8.self)
        let now = ContinuousClock.now
        guard terminated else {
            withState { $0.malformed.append("(no final newline) " + text) }
            return
        }
        do {
            let value = try JSONValue(parsing: bytes)
            guard case .object = value else {
                withState { $0.malformed.append(text) }
                return
            }
            withState { $0.lines.append(HammockLine(text: text, json: value, receivedAt: now)) }
        } catch {
            withState { $0.malformed.append("\(text)  (\(error))") }
        }
    }
}
