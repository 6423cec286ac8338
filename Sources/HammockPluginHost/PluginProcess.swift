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
    /// What the task that enforces a kill hears: the guard's pid once it is spawned, and kill requests.
    private let control = AsyncStream.makeStream(of: Control.self)

    private enum Control {
        case started(pid_t)
        case kill
    }

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
    package func kill() { control.continuation.yield(.kill) }

    package func run(receive: ([LineSplitter.Piece]) async -> Void) async -> PluginExit {
        // Orphans of a guard that was itself killed come to hammock, not to init, from the first plugin on
        // (`Engine.run` asks too, but `check` and the start-up validation come before it).
        if reapsOrphans { OrphanReaper.becomeSubreaper() }
        let spawn = LivePlugins.shared.spawning()
        return await withTaskGroup(of: Void.self) { group in
            group.addTask { [control] in await Self.enforceKill(control.stream) }
            let (exit, pid) = await runProcess(spawn: spawn, receive: receive)
            LivePlugins.shared.ended(pid, spawn: spawn)
            // Its guard ended what it left; if the guard was killed too, the orphans came to hammock: end them.
            if reapsOrphans { OrphanReaper.sweep() }
            // A kill's grace period ends with the process.
            control.continuation.finish()
            group.cancelAll()
            return exit
        }
    }

    /// Carries out a kill once the guard's pid is known: `endGuardedPlugin`, then the group's SIGKILL if
    /// the process has not ended within `killGrace` (the task is cancelled when it ends).
    private static func enforceKill(_ events: AsyncStream<Control>) async {
        var pid: pid_t?
        var isWanted = false
        for await event in events {
            switch event {
            case .started(let started): pid = started
            case .kill: isWanted = true
            }
            guard isWanted, let pid else { continue }
            endGuardedPlugin(pid)
            let clock = SupervisionClock.system
            guard await clock.sleep(until: clock.now() + PluginHost.killGrace) else { return }
            killGuardGroup(pid)
            return
        }
    }

    /// Runs the process to its end; returns how it ended and the guard's pid, if it was spawned.
    ///
    /// The guard is started as every process is (`ChildProcess`); its pipes are served by threads of their
    /// own, not the Swift pool: `guard.stdout` and `guard.stderr` read (`PipeChunks`), `guard.stdin` writes
    /// the batches of `PluginInput` (a `BlockingExecutor`), and `guard.exit` waits on its pidfd at the end.
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
        let process: ChildProcess
        switch ChildProcess.spawn(
            path: guardPath, arguments: CStringArray([guardPath, path] + command),
            environment: CStringArray(ProcessEnvironment.entries(environment)), standardInput: .pipe,
            nonBlockingOutput: false)
        {
        case .success(let started): process = started
        case .failure(.pipe(let error)), .failure(.spawn(let error)):
            input.close()
            return (.couldNotStart("(\(commandLine)): \(error)"), nil)
        }
        let pid = process.pid
        LivePlugins.shared.started(pid, spawn: spawn)
        control.continuation.yield(.started(pid))
        let (standardErrorLine, maximumLineLength) = (standardErrorLine, maximumLineLength)
        let output = PipeChunks(reading: process.standardOutput, name: "guard.stdout")
        let errors = PipeChunks(reading: process.standardError, name: "guard.stderr")
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                let writer = BlockingExecutor(name: "guard.stdin")
                let descriptor = process.standardInput!
                do {
                    try await input.writeBatches { batch in
                        // SIGPIPE held off: a plugin that died must not take the process that writes to it along.
                        try await writer.run {
                            Result { () throws(SystemCallError) in
                                try Descriptor.writeAllWithoutBrokenPipeSignal(batch, to: descriptor)
                            }
                        }.get()
                    }
                } catch {
                    // The plugin closed its stdin or died; its exit is reported below.
                }
                await writer.run { _ = close(descriptor) }
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
        let ended = await OwnThread.run(named: "guard.exit") {
            Result { () throws(SystemCallError) in try process.waitForEnd() }
        }
        switch ended {
        case .success(.exited(let code)): return (.exited(code), pid)
        case .success(.signaled(let signal)): return (.killed(signal: signal), pid)
        case .failure(let error): return (.couldNotStart("(\(commandLine)): \(error)"), pid)
        }
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
