import Foundation
import Glibc
import HammockCore
import HammockJSON
import HammockProtocol
import HammockSystem

/// A running hammock engine: launched by the app (`launch`), or one whose pipes the app already has
/// (`init(attachingTo:output:errors:)`).
///
///     let hammock = try await Hammock.launch(configuration: "configs/demo.yaml")
///     let system = await hammock.view("system", as: System.self)
///     for try await content in system.contents { print(content) }
///     await hammock.stop()
///
/// Typed sources and views decode the engine's lines as they come; control calls (`snapshot()`, `reload()`,
/// and those of each source and view) return when the engine acknowledges them. When the engine exits
/// without being asked to, every stream and every pending call ends with `HammockError.engineExited`,
/// carrying how it exited and the last lines of its stderr.
///
/// Writing to an engine that has exited is an error, not the end of the app: the client's writes block
/// `SIGPIPE` on their own thread, and leave the app's disposition of it alone.
public final class Hammock: Sendable {
    let lines: EngineLines
    /// `nil` when attached.
    private let launched: Launched?
    /// The engine's process, to signal at `stop()`: launched, or given when attaching.
    private let enginePID: Int32?
    /// Written to, to end the reading of stdout without closing it under the reading thread.
    private let stopReading: Int32

    /// The engine the client started, and how it ended once it has.
    private struct Launched: Sendable {
        let pid: Int32
        /// Set by the thread that reaps it, just after: from then on the pid may be another process's, and
        /// is no longer signalled (Foundation's `isRunning` guarded the same way).
        let exitStatus: LatestValue<EngineExitStatus?>

        func kill(_ signal: Int32) {
            if exitStatus.value == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    private init(lines: EngineLines, launched: Launched?, enginePID: Int32?, stopReading: Int32) {
        self.lines = lines
        self.launched = launched
        self.enginePID = enginePID
        self.stopReading = stopReading
    }

    deinit {
        // Nothing can reach the engine any more: stop it (launched), stop reading it (attached).
        launched?.kill(SIGTERM)
        close(stopReading)
    }

    // MARK: Launching and attaching

    /// Starts `hammock run CONFIGURATION ARGUMENTS...` and returns once it has said `hello` (its plugins
    /// started, its sources known).
    ///
    /// - Parameters:
    ///   - configuration: the configuration file's path (relative paths inside it are the engine's working
    ///     folder's: `workingDirectory`, else the app's).
    ///   - binary: the `hammock` executable. Without it: `$HAMMOCK_BIN`, then the `hammock` beside the app's own
    ///     executable, then the first on `PATH` (see `findBinary`).
    ///   - arguments: more arguments of `run` (e.g. `["--log-level", "debug"]`).
    ///   - environment: the engine's environment; the app's when `nil`.
    ///   - workingDirectory: the engine's working folder; the app's when `nil`.
    ///   - forwardingStderr: whether the engine's log lines also go to the app's stderr (the client always
    ///     keeps the last ones for `engineExited`).
    /// - Throws: `HammockError.binaryNotFound`; `HammockError.engineExited` when it exits before `hello` (an
    ///   invalid configuration: its stderr says why).
    public static func launch(
        configuration: String, binary: String? = nil, arguments: [String] = [],
        environment: [String: String]? = nil, workingDirectory: String? = nil, forwardingStderr: Bool = false
    ) async throws -> Hammock {
        try await spawn(
            ["run", configuration] + arguments, binary: binary, environment: environment,
            workingDirectory: workingDirectory, forwardingStderr: forwardingStderr)
    }

    /// Starts `hammock attach CONFIGURATION ARGUMENTS...`: the configuration's shared engine (`hammock
    /// serve`), which every consumer of the configuration reads, started by `attach` when none runs. The
    /// same API as `launch`: `hammock attach`'s stdout and stdin are `hammock run`'s, so the sources, views
    /// and control calls work alike, and the states are those every other consumer sees.
    ///
    /// `stop()` ends this client's `attach` (SIGTERM), not the engine: it serves its other clients, and exits
    /// by itself once none has been connected for its idle time (`--idle-exit`, in `arguments`).
    ///
    /// - Parameters:
    ///   - socket: the engine's socket (`--socket`); the configuration's default one when `nil`.
    ///   - arguments: more arguments of `attach` (e.g. `["--no-start"]`, `["--idle-exit", "1m"]`).
    ///   - environment: `attach`'s environment, which an engine it starts inherits (`${ENV}` secrets).
    /// - Throws: as `launch`; `HammockError.engineExited` too when the engine at the socket serves another
    ///   configuration (`attach` exits 2, its stderr says so).
    public static func attach(
        configuration: String, socket: String? = nil, binary: String? = nil, arguments: [String] = [],
        environment: [String: String]? = nil, workingDirectory: String? = nil, forwardingStderr: Bool = false
    ) async throws -> Hammock {
        try await spawn(
            ["attach"] + (socket.map { ["--socket", $0] } ?? []) + arguments + [configuration], binary: binary,
            environment: environment, workingDirectory: workingDirectory, forwardingStderr: forwardingStderr)
    }

    /// `hammock COMMANDLINE...` as a child whose stdout is the protocol, stdin its control lines; returns
    /// once it has said `hello`.
    private static func spawn(
        _ commandLine: [String], binary: String?, environment: [String: String]?, workingDirectory: String?,
        forwardingStderr: Bool
    ) async throws -> Hammock {
        let executable = try findBinary(binary, environment: ProcessInfo.processInfo.environment)
        // Started the one way hammock starts a process (as the engine starts its plugins' guards): its pipes
        // close-on-exec from the moment they are made, so a process the app's other threads spawn meanwhile
        // cannot hold an end open; every signal at its default (an app that ignores SIGINT or SIGHUP does not
        // hand that on to the engine); and a process group of its own, as Foundation's `Process` gave it: a
        // Ctrl-C in the app's terminal goes to the app alone, which stops the engine (`stop()`, or its `deinit`)
        // or, if it dies, leaves it a closed stdout, at which the engine stops with its plugins.
        let child: ChildProcess
        switch ChildProcess.spawn(
            path: executable, arguments: CStringArray([executable] + commandLine),
            environment: CStringArray(ProcessEnvironment.entries(environment ?? ProcessEnvironment.current())),
            workingDirectory: workingDirectory, standardInput: .pipe, nonBlockingOutput: false)
        {
        case .success(let started): child = started
        case .failure(.pipe(let error)): throw HammockError.io("could not make a pipe: \(error)")
        case .failure(.spawn(let error)): throw HammockError.io("could not start \(executable): \(error)")
        }
        guard let input = child.standardInput else { preconditionFailure("spawned with standardInput: .pipe") }
        let exitStatus = LatestValue<EngineExitStatus?>(nil)
        // A thread of its own for as long as the engine lives: it sleeps in `poll` on the pidfd, then reaps.
        OwnThread.start(named: "hammock.exit") {
            let status: EngineExitStatus
            switch try? child.waitForEnd() {
            case .exited(let code): status = .exited(code)
            case .signaled(let signal): status = .signaled(signal)
            case nil: status = .unknown
            }
            exitStatus.send(status)
        }
        let tail = StderrTail(descriptor: child.standardError, forwarding: forwardingStderr)
        let started: (lines: EngineLines, stopReading: Int32)
        do {
            started = try start(
                input: input, output: child.standardOutput,
                whenOutputEnds: { stopRequested in
                    let status = await exitStatus.first { $0 != nil } ?? nil
                    // Processes the engine started may hold its stderr a moment longer than it lives.
                    await tail.waitForEnd(timeout: .seconds(1))
                    if stopRequested, status == .exited(0) { return nil }
                    return .engineExited(status: status ?? .unknown, stderrTail: tail.text)
                })
        } catch {
            // Nothing would read it: the engine must not run on unseen.
            kill(child.pid, SIGKILL)
            close(input)
            close(child.standardOutput)
            throw error
        }
        let launched = Launched(pid: child.pid, exitStatus: exitStatus)
        let hammock = Hammock(
            lines: started.lines, launched: launched, enginePID: child.pid, stopReading: started.stopReading)
        do {
            try await hammock.waitForHello()
        } catch {
            // The app never gets it to stop: what broke the protocol before its hello must not run on unseen.
            launched.kill(SIGKILL)
            throw error
        }
        return hammock
    }

    /// Reads a running engine's stdout from `output` and writes control lines to `input` (its stdin), for an
    /// app that started `hammock run` itself. Takes ownership of the descriptors: they are closed when the
    /// engine's output ends or at `stop()`.
    ///
    /// The states start with the lines read from now on: an engine that said `hello` long ago shows its
    /// sources after their next change, or at once after `snapshot()`. The streams end with
    /// `engineExited(status: .unknown, …)` at the end of the engine's output.
    ///
    /// - Parameters:
    ///   - errors: the engine's stderr, if the app wants its last lines in `engineExited`.
    ///   - processIdentifier: the engine's process, if `stop()` is to stop it gracefully (`SIGTERM`, as for
    ///     a launched engine). Without it, `stop()` only closes the client's ends of the pipes: the engine
    ///     stops when it next writes a line.
    public convenience init(
        attachingTo input: Int32, output: Int32, errors: Int32? = nil, processIdentifier: Int32? = nil
    ) throws {
        let tail = errors.map { StderrTail(descriptor: $0, forwarding: false) }
        let started = try Self.start(
            input: input, output: output,
            whenOutputEnds: { stopRequested in
                if stopRequested { return nil }
                await tail?.waitForEnd(timeout: .seconds(1))
                return .engineExited(status: .unknown, stderrTail: tail?.text ?? "")
            })
        self.init(lines: started.lines, launched: nil, enginePID: processIdentifier, stopReading: started.stopReading)
    }

    /// Starts reading `output` into a new `EngineLines`; when it ends, asks `whenOutputEnds` how the engine
    /// ended (`nil`: gracefully) and ends every stream and call with that.
    private static func start(
        input: Int32, output: Int32,
        whenOutputEnds: @escaping @Sendable (_ stopRequested: Bool) async -> HammockError?
    ) throws -> (lines: EngineLines, stopReading: Int32) {
        let lines = EngineLines(writer: ControlWriter(descriptor: input))
        let stop = try makePipe()
        let (events, delivery) = AsyncStream.makeStream(of: LineReader.Event.self)
        // At most this many lines wait between the reading thread and `EngineLines`: when the app keeps
        // `EngineLines` busy, the reader stops, the pipe fills, and the engine's queue coalesces states per id
        // instead of this process buffering a backlog.
        // A count of free places the reading thread sleeps on (a thread may wait on a condition; a task may not).
        let inFlight = LockedCondition(Self.maximumLinesWaiting)
        let maximumLineLength = Self.maximumLineLength
        // A thread of its own for as long as the engine writes: the read blocks for the whole run.
        OwnThread.start(named: "hammock.stdout") {
            // Content can be large (a whole file, an API's answer); a line beyond this is not one of hammock's.
            // A last line without its newline is one the engine was killed in the middle of: its end says more.
            LineReader.read(
                descriptor: output, maximumLineLength: maximumLineLength, stopDescriptor: stop.read,
                dropsUnterminatedLine: true
            ) {
                inFlight.withLock(when: { $0 > 0 }) { $0 -= 1 }
                delivery.yield($0)
            }
            close(output)
            close(stop.read)
            delivery.finish()
        }
        // Unstructured: `launch` and `init(attachingTo:)` return while it runs. It ends when the reading thread
        // finishes `events` (the engine's stdout ended, or `stop()` wrote to the stop pipe).
        Task {
            for await event in events {
                defer {
                    inFlight.withLock { $0 += 1 }
                    inFlight.signal()
                }
                switch event {
                case .line(let bytes):
                    await lines.handle(bytes)
                case .tooLong(let length):
                    await lines.finish(
                        .protocolViolation("a line of \(length) bytes, beyond the client's \(maximumLineLength)"))
                case .end:
                    break
                }
            }
            let stopRequested = await lines.stopRequested
            await lines.finish(await whenOutputEnds(stopRequested))
        }
        return (lines, stop.write)
    }

    /// How many lines the reading thread may hand over before `EngineLines` has taken them.
    static let maximumLinesWaiting = 256

    /// The longest stdout line the client reads.
    static let maximumLineLength = 1 << 30

    private func waitForHello() async throws {
        for try await ids in lines.ids.stream where ids != nil { return }
        throw await lines.endError ?? HammockError.stopped
    }

    // MARK: Stopping

    /// Stops the engine gracefully and returns once it has: launched (or attached with its process id), it
    /// gets `SIGTERM` (it stops its plugins, writes `bye` and exits 0; `SIGKILL` follows if its output has not
    /// ended after 10 seconds); attached without one, the client closes its ends of the pipes (the engine
    /// stops at its closed stdout). Every stream then ends normally, and pending and later control calls
    /// throw `HammockError.stopped`.
    public func stop() async {
        await lines.requestStop()
        if let pid = enginePID {
            // A launched engine is signalled only until it is reaped: its pid may be another process's then.
            let launched = launched
            func signal(_ number: Int32) {
                if let launched { launched.kill(number) } else { _ = kill(pid, number) }
            }
            signal(SIGTERM)
            if await lines.ended.first(timeout: .seconds(10), where: { $0 }) == nil { signal(SIGKILL) }
        } else {
            // The reading may have ended already (its end of this pipe closed): no SIGPIPE for that.
            try? Descriptor.writeAllWithoutBrokenPipeSignal([1], to: stopReading)
        }
        _ = await lines.ended.first { $0 }
    }

    /// Waits until the engine has ended; returns why (`nil` after `stop()`). It waits as long as the engine
    /// runs: `waitUntilEnded(timeout:)` gives up.
    public func waitUntilEnded() async -> HammockError? {
        _ = await lines.ended.first { $0 }
        return await lines.endError
    }

    /// Waits until the engine has ended, at most `timeout`; returns why (`nil` after `stop()`), or throws
    /// `HammockError.timedOut` when it still runs then (the engine is left running).
    public func waitUntilEnded(timeout: Duration) async throws -> HammockError? {
        guard await lines.ended.first(timeout: timeout, where: { $0 }) != nil else {
            throw HammockError.timedOut("the engine was still running after \(timeout)")
        }
        return await lines.endError
    }

    /// The reason on the engine's `bye` line (`signal` after `stop()`), once it came.
    public var byeReason: String? {
        get async { await lines.byeReason }
    }

    /// The engine's process id, when launched.
    public var processIdentifier: Int32? { launched?.pid }

    // MARK: Sources, views, control

    /// The engine's sources and views, in the configuration's order (from `hello`, then each reload); `nil`
    /// before `hello` (only when attached).
    public var ids: EngineIDs? { lines.ids.value }

    /// `ids` now, then whenever a reload changes them (a slow reader gets the newest), until the engine ends.
    public var idChanges: AsyncThrowingStream<EngineIDs?, any Error> { lines.ids.stream }

    /// The source `id`, its content decoded as `Content`. Asking again for the same id and type gives the
    /// same states (one decoding per line, however many readers).
    public func source<Content: Decodable & Sendable>(_ id: String, as type: Content.Type) async -> TypedSource<Content> {
        TypedSource(id: id, output: await lines.sourceOutput(id, as: type), hammock: self)
    }

    /// The source `id`, its content as the engine's JSON value.
    public func source(_ id: String) async -> TypedSource<JSONValue> {
        await source(id, as: JSONValue.self)
    }

    /// The view `id`, its content (`{source: content}`) decoded as `Content`.
    public func view<Content: Decodable & Sendable>(_ id: String, as type: Content.Type) async -> TypedView<Content> {
        let (view, loadable) = await lines.viewOutputs(id, as: type)
        return TypedView(id: id, viewOutput: view, output: loadable, hammock: self)
    }

    /// The view `id`, its content as the engine's JSON value.
    public func view(_ id: String) async -> TypedView<JSONValue> {
        await view(id, as: JSONValue.self)
    }

    /// The latest line the engine wrote for a source or view, whole, as JSON (`{"type":"source","seq":…,
    /// "id":…,"state":{…}}`); nil before its first line, or once a reload removed it. For a consumer that
    /// passes lines on as they are (`hammock-mcp`); an app reads typed states from `source` and `view`.
    public func latestLine(_ subject: LineSubject) async -> JSONValue? {
        await lines.latestLine(subject)
    }

    /// Names each source and view as a line of it comes (its latest line is then `latestLine`), until the
    /// engine ends; a follower that does not keep up loses the oldest names, never the newest.
    public func lineChanges() async -> AsyncStream<LineSubject> {
        await lines.followLines()
    }

    /// Asks the engine to write every source's and view's state again; returns once they are in.
    public func snapshot() async throws { try await perform(.snapshot) }

    /// Asks the engine to read its configuration file again; returns once the new configuration is in force
    /// (`ids` updated, removed sources and views showing `LoadError.removedCode`). Throws
    /// `HammockError.refused` with every problem when the file is not valid: the running configuration goes on.
    public func reload() async throws { try await perform(.reload) }

    /// Sends any control command and returns when the engine acknowledges it.
    public func perform(_ command: ControlCommand) async throws {
        try await lines.perform(command)
    }

    // MARK: Processes and pipes

    /// The executable to run, in this order: `explicit` (the `binary:` argument); else `$HAMMOCK_BIN`; else
    /// `hammock` beside the app's own executable (an app shipped with its engine); else the first `hammock` on
    /// `PATH`. An explicit path or `$HAMMOCK_BIN` that is not an executable is an error, never passed over
    /// for another hammock: the app asked for that one.
    static func findBinary(
        _ explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> String {
        for chosen in [explicit, environment["HAMMOCK_BIN"].flatMap { $0.isEmpty ? nil : $0 }] {
            guard let chosen else { continue }
            guard FileManager.default.isExecutableFile(atPath: chosen) else {
                throw HammockError.binaryNotFound(searched: [chosen])
            }
            return chosen
        }
        var folders: [String] = []
        if let own = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            folders.append((own as NSString).deletingLastPathComponent)
        }
        if let own = Bundle.main.executablePath { folders.append((own as NSString).deletingLastPathComponent) }
        if let first = CommandLine.arguments.first, first.contains("/") {
            folders.append((first as NSString).deletingLastPathComponent)
        }
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        folders += path.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        var searched: [String] = []
        for folder in folders {
            let candidate = (folder.isEmpty ? "." : folder) + "/hammock"
            guard !searched.contains(candidate) else { continue }
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            searched.append(candidate)
        }
        throw HammockError.binaryNotFound(searched: searched)
    }

    /// A pipe whose ends are closed on `exec` from the moment it is made, so that no other process the app
    /// starts inherits them (which would keep them from reaching their ends).
    private static func makePipe() throws -> (read: Int32, write: Int32) {
        do {
            return try Descriptor.makePipe()
        } catch {
            throw HammockError.io("could not make a pipe: \(error)")
        }
    }
}

/// The last lines the engine wrote on stderr, read on a thread of its own.
final class StderrTail: Sendable {
    /// How many lines `engineExited` quotes.
    static let lineCount = 20

    private let lines = LatestValue<[String]>([])
    private let ended = LatestValue(false)

    /// Takes ownership of `descriptor`.
    init(descriptor: Int32, forwarding: Bool) {
        let lines = self.lines
        let ended = self.ended
        // A thread of its own for as long as the engine lives: the read blocks for the whole run.
        OwnThread.start(named: "hammock.stderr") {
            LineReader.read(descriptor: descriptor, maximumLineLength: 64 * 1024) { event in
                guard case .line(let bytes) = event else { return }
                // Not `FileHandle.write`, which traps when the app's stderr is closed.
                if forwarding { try? Descriptor.writeAllWithoutBrokenPipeSignal(bytes + [UInt8(ascii: "\n")], to: STDERR_FILENO) }
                // This thread is the only writer, so reading the value back and sending the next is safe.
                let line = String(decoding: bytes.prefix(1000), as: UTF8.self)
                lines.send(Array((lines.value + [line]).suffix(Self.lineCount)))
            }
            close(descriptor)
            ended.send(true)
        }
    }

    var text: String { lines.value.joined(separator: "\n") }

    func waitForEnd(timeout: Duration) async {
        _ = await ended.first(timeout: timeout) { $0 }
    }
}

extension LatestValue {
    /// The first value that satisfies `predicate` (the current one included), or `nil` when the value
    /// finishes or `timeout` passes first.
    func first(timeout: Duration? = nil, where predicate: @escaping @Sendable (Value) -> Bool) async -> Value? {
        let stream = self.stream
        let search: @Sendable () async -> Value? = {
            do {
                for try await value in stream where predicate(value) { return value }
            } catch {}
            return nil
        }
        guard let timeout else { return await search() }
        return await withTaskGroup(of: Value?.self) { group in
            group.addTask { await search() }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
