import CHammockSystem
import Glibc
import HammockJSON
import HammockProtocol
import HammockSystem
import Synchronization

/// A plugin run the way hammock runs every plugin, for the plugin host and for `hammock plugin check`
/// alike: the transport outside tests.
///
/// The plugin runs below a guard (`PluginGuard`: the hammock-guard program, installed beside hammock),
/// which keeps everything the plugin starts below it and ends it all when the plugin exits, when hammock
/// dies however it dies, or on `endGuardedPlugin`. The guard gets a process group of its own, which the
/// plugin shares (a terminal's Ctrl-C is hammock's to handle). Its stderr is cut into lines for
/// `standardErrorLine`; its stdout into protocol lines of at most `maximumLineLength` bytes. When its stdout
/// closes the plugin is ending, so its input is finished and nothing more is written to it.
package struct ProcessTransport: PluginTransport {
    let command: [String]
    let maximumLineLength: Int
    /// Whether hammock takes in the orphans of its plugins and ends them (`OrphanReaper`): the engine does;
    /// `hammock plugin check` has nothing else running to protect.
    let reapsOrphans: Bool
    /// Set in the process's environment, over what it inherits from hammock.
    let environment: [String: String]
    let standardErrorLine: @Sendable ([UInt8]) async -> Void
    private let input = PluginInput()
    /// The guard's end and the kill of it.
    private let watch = GuardWatch()

    package init(
        command: [String], maximumLineLength: Int = PluginSupervisor.maximumLineLength, reapsOrphans: Bool,
        environment: [String: String] = [:], standardErrorLine: @escaping @Sendable ([UInt8]) async -> Void
    ) {
        self.command = command
        self.maximumLineLength = maximumLineLength
        self.reapsOrphans = reapsOrphans
        self.environment = environment
        self.standardErrorLine = standardErrorLine
    }

    package func send(line: [UInt8]) { input.send(line) }

    package func closeInput() { input.close() }

    /// Its guard kills it and everything below it (see `endGuardedPlugin`); a guard that has not ended
    /// after `PluginHost.killGrace` has its whole process group killed.
    package func kill() { watch.requestKill() }

    /// Cancelled, the run ends its plugin as `kill` does and returns once the guard has ended: a plugin
    /// whose supervisor has gone must not run on unwatched, and a guard is reaped only by its run.
    package func run(receive: ([LineSplitter.Piece]) async -> Void) async -> PluginExit {
        // Orphans of a guard that was itself killed come to hammock, not to init, from the first plugin on
        // (`Engine.run` asks too, but `check` and the start-up validation come before it).
        if reapsOrphans { OrphanReaper.becomeSubreaper() }
        let spawn = LivePlugins.shared.spawning()
        let (exit, pid) = await withTaskCancellationHandler {
            await runProcess(spawn: spawn, receive: receive)
        } onCancel: { [watch] in
            watch.requestKill()
        }
        LivePlugins.shared.ended(pid, spawn: spawn)
        // Its guard ended what it left; if the guard was killed too, the orphans came to hammock: end them.
        if reapsOrphans { OrphanReaper.sweep() }
        return exit
    }

    /// Runs the process to its end; returns how it ended and the guard's pid, if it was spawned.
    ///
    /// The guard is started as every process is (`ChildProcess`), and served by threads of its own, not the
    /// Swift pool: `guard.exit` waits for its end from the spawn on (`GuardWatch`), `guard.stdout` and
    /// `guard.stderr` read its pipes (`PipeChunks`), `guard.stdin` writes the batches of `PluginInput` (a
    /// `BlockingExecutor`).
    ///
    /// The guard's end, not its pipes', ends the run: a process that escaped the guard (`setsid`) may hold
    /// the pipes open for ever. Once the guard is reaped, `guard.exit` makes `stop` readable: the readers
    /// take what the pipes hold then (a last line the plugin wrote before dying) and end, and the writer
    /// stops waiting for room.
    private func runProcess(spawn: Int, receive: ([LineSplitter.Piece]) async -> Void) async -> (PluginExit, pid_t?) {
        let input = input
        let commandLine = command.joined(separator: " ")
        guard let program = command.first, let path = executablePath(program) else {
            input.close()
            return (.couldNotStart("(\(commandLine)): no executable \"\(command.first ?? "")\" was found"), nil)
        }
        let guardPath: String
        switch PluginGuard.location {
        case .success(let found): guardPath = found
        case .failure(let missing):
            input.close()
            return (.couldNotStart("(\(commandLine)): \(missing)"), nil)
        }
        // Tells a plugin whose child it must stay: one that finds itself re-parented before it could ask for a
        // parent-death signal then knows that the engine is already gone (see HammockPluginKit's ParentWatch);
        // the guard checks the same.
        var environment = ProcessEnvironment.current()
        for (name, value) in self.environment { environment[name] = value }
        environment["HAMMOCK_ENGINE_PID"] = String(getpid())
        // Readable once the guard is reaped: ends the reading of its pipes and the wait to write to its stdin.
        let stop = hammock_event_create()
        guard stop >= 0 else {
            input.close()
            return (.couldNotStart("(\(commandLine)): \(SystemCallError(code: errno))"), nil)
        }
        let process: ChildProcess
        switch ChildProcess.spawn(
            path: guardPath, arguments: CStringArray([guardPath, path] + command),
            environment: CStringArray(ProcessEnvironment.entries(environment)), standardInput: .pipe,
            nonBlockingInput: true, nonBlockingOutput: false)
        {
        case .success(let started): process = started
        case .failure(.pipe(let error)), .failure(.spawn(let error)):
            close(stop)
            input.close()
            return (.couldNotStart("(\(commandLine)): \(error)"), nil)
        }
        let pid = process.pid
        LivePlugins.shared.started(pid, spawn: spawn)
        let stdin = process.standardInput!
        do throws(SystemCallError) {
            try watch.watch(process, stop: stop)
        } catch {
            // Nothing watches it: it ends here, now.
            killGuardGroup(pid)
            _ = try? process.waitForEnd()
            for descriptor in [stdin, process.standardOutput, process.standardError, stop] { close(descriptor) }
            input.close()
            return (.couldNotStart("(\(commandLine)): cannot start a thread to serve it: \(error)"), pid)
        }
        let output = Result { () throws(SystemCallError) in
            try PipeChunks(reading: process.standardOutput, name: "guard.stdout", stopDescriptor: stop)
        }
        let errors = Result { () throws(SystemCallError) in
            try PipeChunks(reading: process.standardError, name: "guard.stderr", stopDescriptor: stop)
        }
        let writer = Result { () throws(SystemCallError) in try BlockingExecutor.started(name: "guard.stdin") }
        switch (output, errors, writer) {
        case (.success(let output), .success(let errors), .success(let writer)):
            await serve(output: output, errors: errors, writer: writer, stdin: stdin, stop: stop, receive: receive)
        case (.failure(let error), _, _), (_, .failure(let error), _), (_, _, .failure(let error)):
            // The guard ends now, with its plugin; the readers that started end at its end.
            watch.killGroupNow()
            close(stdin)
            input.close()
            if case .success(let output) = output { for await _ in output {} }
            if case .success(let errors) = errors { for await _ in errors {} }
            _ = await watch.end()
            close(stop)
            return (.couldNotStart("(\(commandLine)): cannot start a thread to serve it: \(error)"), pid)
        }
        let end = await watch.end()
        close(stop)
        switch end {
        case .success(.exited(let code)): return (.exited(code), pid)
        case .success(.signaled(let signal)): return (.killed(signal: signal), pid)
        // Reaped by someone else: it ended, but how is not known.
        case .failure(let error) where error.code == ECHILD: return (.endedWithUnknownStatus, pid)
        case .failure(let error): return (.couldNotStart("(\(commandLine)): \(error)"), pid)
        }
    }

    /// Serves the guard's pipes until its stdout has ended and its stdin's writer has stopped.
    private func serve(
        output: PipeChunks, errors: PipeChunks, writer: BlockingExecutor, stdin: Int32, stop: Int32,
        receive: ([LineSplitter.Piece]) async -> Void
    ) async {
        let (input, standardErrorLine, maximumLineLength) = (input, standardErrorLine, maximumLineLength)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await input.writeBatches { batch in
                        // SIGPIPE held off: a plugin that died must not take the process that writes to it along.
                        try await writer.run {
                            Result { () throws(SystemCallError) in
                                try Descriptor.writeAllWithoutBrokenPipeSignal(batch, to: stdin, stop: stop)
                            }
                        }.get()
                    }
                } catch {
                    // The plugin closed its stdin or died, or its guard has ended; its exit is reported by the run.
                }
                await writer.run { _ = close(stdin) }
            }
            group.addTask {
                var splitter = LineSplitter(maximumLineLength: 64 << 10)
                var lines: [[UInt8]] = []
                let collect: (LineSplitter.Piece) -> Void = { piece in
                    if case .line(let bytes) = piece { lines.append(bytes) }
                }
                for await buffer in errors {
                    buffer.withUnsafeBytes { splitter.feed($0, emit: collect) }
                    for line in lines { await standardErrorLine(line) }
                    lines.removeAll()
                }
                splitter.finish(emit: collect)
                for line in lines { await standardErrorLine(line) }
            }
            // Of a line too long the head is kept: it names the load or source that fails for it.
            var splitter = LineSplitter(maximumLineLength: maximumLineLength, headLength: pluginLineHeadLength)
            for await buffer in output {
                var pieces: [LineSplitter.Piece] = []
                buffer.withUnsafeBytes { splitter.feed($0) { pieces.append($0) } }
                if !pieces.isEmpty { await receive(pieces) }
            }
            var last: [LineSplitter.Piece] = []
            splitter.finish { last.append($0) }
            if !last.isEmpty { await receive(last) }
            input.close()
        }
    }
}

/// The end of one plugin's guard, and the kill of it: the thread `guard.exit` waits on the guard's pidfd
/// from its spawn on, reaps it, and then makes the run's stop descriptor readable; while a kill's grace
/// runs, it wakes at its end to kill the guard's group.
///
/// A thread and a lock rather than a task: the kill must be carried out when the run that would own such a
/// task is cancelled (its task's cancellation is what asks for it), and a kill may be asked for before the
/// spawn (it is carried out once the pid is known). Signals go out under the lock, before the guard is
/// marked ended and reaped, so none reaches a pid the kernel has given to another process.
final class GuardWatch: Sendable {
    private struct State {
        var pid: pid_t?
        /// Wakes `guard.exit` to look at `killDeadline` again; -1 when it is not watching.
        var wake: Int32 = -1
        var isKillWanted = false
        /// When the guard's group is killed if the guard has not ended by then.
        var killDeadline: SuspendingClock.Instant?
        var hasEnded = false
        /// How it ended, once reaped, until `end` takes it.
        var termination: Termination?
        var endWaiter: CheckedContinuation<Termination, Never>?
    }

    typealias Termination = Result<ChildProcess.Termination, SystemCallError>

    private let state = Mutex(State())

    /// Asks the guard to end its plugin (`endGuardedPlugin`), and kills its group if it has not ended after
    /// `PluginHost.killGrace`; before the spawn, once it has happened. Asking again does nothing more.
    func requestKill() {
        state.withLock { state in
            guard !state.isKillWanted else { return }
            state.isKillWanted = true
            Self.beginKill(&state)
        }
    }

    /// SIGKILL to the guard's group at once, unless it has ended.
    func killGroupNow() {
        state.withLock { state in
            guard !state.hasEnded, let pid = state.pid else { return }
            killGuardGroup(pid)
        }
    }

    private static func beginKill(_ state: inout State) {
        guard state.isKillWanted, !state.hasEnded, state.killDeadline == nil, let pid = state.pid else { return }
        endGuardedPlugin(pid)
        state.killDeadline = .now + PluginHost.killGrace
        if state.wake >= 0 { hammock_event_post(state.wake) }
    }

    /// Starts `guard.exit` for `process`; `end` tells how it ended, once it is reaped and `stop` has been
    /// made readable. Throws when the thread (or its wake-up descriptor) cannot be made; nothing watches the
    /// process then.
    func watch(_ process: ChildProcess, stop: Int32) throws(SystemCallError) {
        let wake = hammock_event_create()
        guard wake >= 0 else { throw SystemCallError(code: errno) }
        state.withLock { state in
            state.pid = process.pid
            state.wake = wake
            Self.beginKill(&state)
        }
        do throws(SystemCallError) {
            try OwnThread.tryStart(named: "guard.exit") { [self] in
                waitForEnd(process, wake: wake)
                let termination = Result { () throws(SystemCallError) in try process.waitForEnd() }
                hammock_event_post(stop)
                let waiter = state.withLock { state in
                    state.termination = termination
                    return state.endWaiter.take()
                }
                waiter?.resume(returning: termination)
            }
        } catch {
            state.withLock { state in
                state.wake = -1
                close(wake)
            }
            throw error
        }
    }

    /// How the guard ended, once `guard.exit` has reaped it; called once, after `watch`. Not a stream: a
    /// cancelled run still waits here for the end its cancellation brings.
    func end() async -> Termination {
        await withCheckedContinuation { continuation in
            let termination = state.withLock { state in
                if state.termination == nil { state.endWaiter = continuation }
                return state.termination
            }
            if let termination { continuation.resume(returning: termination) }
        }
    }

    /// Blocks until the guard has ended (not reaped yet), killing its group when a kill's grace runs out;
    /// then it is marked ended, and no signal goes to its pid any more.
    private func waitForEnd(_ process: ChildProcess, wake: Int32) {
        var watched = [
            pollfd(fd: process.pidfd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let timeout = state.withLock { state in state.killDeadline.map { Self.milliseconds(until: $0) } ?? -1 }
            watched[0].revents = 0
            watched[1].revents = 0
            let ready = poll(&watched, 2, timeout)
            if ready < 0 && errno == EINTR { continue }
            // A poll that fails leaves the wait to `ChildProcess.waitForEnd`, which reports the failure.
            if ready < 0 || watched[0].revents != 0 { break }
            if watched[1].revents != 0 { hammock_event_clear(wake) }
            state.withLock { state in
                guard let deadline = state.killDeadline, deadline <= .now, let pid = state.pid else { return }
                state.killDeadline = nil
                killGuardGroup(pid)
            }
        }
        state.withLock { state in
            state.hasEnded = true
            state.killDeadline = nil
            state.wake = -1
            close(wake)
        }
    }

    /// How long a `poll` waits for `deadline`, rounded up to a whole millisecond.
    private static func milliseconds(until deadline: SuspendingClock.Instant) -> Int32 {
        let (seconds, attoseconds) = (deadline - .now).components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: max(0, milliseconds))
    }
}

/// The lines queued for a plugin's stdin, handed to its writer in batches: every line queued while the
/// last batch was being written goes in the next, in order. A thousand loads decided in one turn of the
/// engine cost one write (and one read in the plugin), not a thousand.
final class PluginInput: Sendable {
    private struct Queue {
        var pending: [UInt8] = []
        var isClosed = false
    }

    /// A mutex, not an actor: `send` is called from the host's actor and must neither suspend nor hop.
    private let queue = Mutex(Queue())
    /// Tells the writer that there is something to take; at most one telling is kept.
    private let wakeUps = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    /// Queues `line`; dropped once the input is closed.
    func send(_ line: [UInt8]) {
        let queued = queue.withLock { queue in
            guard !queue.isClosed else { return false }
            queue.pending.append(contentsOf: line)
            return true
        }
        if queued { wakeUps.continuation.yield() }
    }

    /// Takes no more lines; what is queued is still handed out.
    func close() {
        queue.withLock { $0.isClosed = true }
        wakeUps.continuation.finish()
    }

    /// Hands the queued bytes to `write`, a batch at a time, until the input is closed and all is written;
    /// called once, by the plugin's writer.
    func writeBatches(_ write: ([UInt8]) async throws -> Void) async rethrows {
        for await _ in wakeUps.stream {
            let batch = take()
            if !batch.isEmpty { try await write(batch) }
        }
        let last = take()
        if !last.isEmpty { try await write(last) }
    }

    private func take() -> [UInt8] {
        queue.withLock { queue in
            var batch: [UInt8] = []
            swap(&batch, &queue.pending)
            return batch
        }
    }
}

/// Where `program` is: itself when it holds a slash, else the first executable of that name on `PATH`, as
/// a shell would find it. The guard runs the path it is given, so the lookup happens here, where a
/// program not found can be reported as such.
private func executablePath(_ program: String) -> String? {
    guard !program.isEmpty else { return nil }
    if program.contains("/") { return access(program, X_OK) == 0 ? program : nil }
    return ProcessEnvironment.findOnPath(program, path: getenv("PATH").map { String(cString: $0) })
}

/// How much of an over-long line the host keeps: enough for the fields that come before the bulk of a
/// message.
let pluginLineHeadLength = 64 << 10

/// What the beginning of a message too long to read says it is: its top-level `type`, `id` and `source`,
/// when they come before the bulk. HammockPluginKit writes them first; most encoders keep the order in
/// which a plugin set its fields, which usually puts `content` last.
struct LineHead: Equatable {
    var type: String?
    var id: Int?
    var source: String?

    init(_ bytes: [UInt8]) {
        var scanner = HeadScanner(bytes: bytes)
        guard scanner.take(UInt8(ascii: "{")) else { return }
        while true {
            guard let key = scanner.string(), scanner.take(UInt8(ascii: ":")) else { return }
            switch key {
            case "type": type = scanner.string()
            case "source": source = scanner.string()
            case "id": id = scanner.integer()
            default: guard scanner.skipValue() else { return }
            }
            guard scanner.take(UInt8(ascii: ",")) else { return }
        }
    }
}

/// Reads JSON tokens from a prefix of a message, giving up (nil, false) where the prefix ends.
private struct HeadScanner {
    let bytes: [UInt8]
    var index = 0

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    /// Takes `byte` (after any whitespace) if it comes next.
    mutating func take(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// The end of the string that starts at `index`, past its closing quote; nil when the prefix ends first.
    private func endOfString() -> Int? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        var at = index + 1
        while at < bytes.count {
            switch bytes[at] {
            case UInt8(ascii: "\\"): at += 2
            case UInt8(ascii: "\""): return at + 1
            default: at += 1
            }
        }
        return nil
    }

    mutating func string() -> String? {
        skipWhitespace()
        guard let end = endOfString() else { return nil }
        defer { index = end }
        return (try? JSONValue(parsing: bytes[index..<end]))?.stringValue
    }

    mutating func integer() -> Int? {
        skipWhitespace()
        let start = index
        while index < bytes.count, bytes[index] == UInt8(ascii: "-") || (0x30...0x39).contains(bytes[index]) { index += 1 }
        // A number the prefix cut short is not known.
        guard index < bytes.count else { return nil }
        return Int(String(decoding: bytes[start..<index], as: UTF8.self))
    }

    /// Passes over one value of any kind; false when the prefix ends inside it.
    mutating func skipValue() -> Bool {
        skipWhitespace()
        var depth = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                guard let end = endOfString() else { return false }
                index = end
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return true }
                depth -= 1
            case UInt8(ascii: ","):
                if depth == 0 { return true }
            default:
                break
            }
            index += 1
        }
        return false
    }
}
