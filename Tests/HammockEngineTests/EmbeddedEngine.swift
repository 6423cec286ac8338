import Foundation
import HammockTestSupport
import HammockConfig
@testable import HammockCore
import HammockJSON
import HammockPluginKit
import HammockProtocol
import HammockRendering
import HammockSystem
import Logging
import Synchronization
import Testing

@testable import HammockEngine
@testable import HammockLogging
@testable import HammockPluginHost

/// A whole engine in memory, as swift-nio's `EmbeddedChannel` is a channel without a socket and
/// HummingbirdTesting's `.router` client is an application without a network: the test writes the
/// configuration, sends control lines, plays the plugins, moves the clock, and reads the output lines.
///
/// What is real: `Engine`'s loop and stop, `EngineCore`, `ReloadStateMachine`, the configuration loader (over
/// a file in a temporary folder, so that a reload reads what the test wrote), every `PluginHost` and its
/// supervisor, `OutputWriter` (its coalescing, its JSON or bar encoding), `ControlMailbox`, `CacheStore`
/// (under the temporary folder). What is the test's: the clock (`ManualEngineClock`: time moves only when
/// the test says, for the core's deadlines and the plugin hosts' alike), stdout (`MemoryStdout`: every line written is kept), stdin (`send(controlLine:)` puts
/// the line in the mailbox, as the stdin thread would), the plugins (in process: the built-in `fake`, and
/// whatever `TestPlugin`s the test names), on-click commands (recorded, not run), the log (recorded). No
/// process is started and no signal is sent: the signals' inputs go straight into the engine's inbox.
///
/// ```swift
/// try await EmbeddedEngine.run("version: 1\nsources:\n  a: { kind: fake, content: 1 }") { engine in
///     try await engine.waitFor(type: "source", id: "a") { $0.event == "newData" }
///     engine.send(controlLine: #"{"op":"wipe","source":"a","id":1}"#)
///     try await engine.waitFor(type: "ack")
/// }
/// ```
final class EmbeddedEngine: Sendable {
    let directory: String
    let configPath: String
    let clock: ManualEngineClock
    let output: OutputBook
    let log: LogBook
    let clicks: ClickBook
    private let engine: Engine
    private let controls: ControlMailbox
    private let stop: StopRequest
    private let stdout: MemoryStdout
    private let writer: OutputWriter
    private let format: StdoutFormat
    private let nextClient = Atomic<Int>(0)
    private var standardErrorSecrets: Secrets { engine.secrets }

    /// Waits this long, at most, for a line; a busy machine must not fail a test that is only slow.
    static let defaultTimeout: Duration = .seconds(10)

    private init(
        directory: String, configPath: String, clock: ManualEngineClock, output: OutputBook, log: LogBook,
        clicks: ClickBook, engine: Engine, controls: ControlMailbox, stop: StopRequest, stdout: MemoryStdout,
        writer: OutputWriter, format: StdoutFormat
    ) {
        self.directory = directory
        self.configPath = configPath
        self.clock = clock
        self.output = output
        self.log = log
        self.clicks = clicks
        self.engine = engine
        self.controls = controls
        self.stop = stop
        self.stdout = stdout
        self.writer = writer
        self.format = format
    }

    /// Runs an engine over `yaml` (written to `config.yaml` in a fresh folder, or in `directory`: a second
    /// engine over the same folder is a restart, which finds the first one's cache), with `plugins` beside
    /// the built-in ones, until `body` returns; then stops it as SIGTERM does, unless it ended by itself
    /// (`--once`, a closed stdout, a stop the test sent). Returns the exit status.
    @discardableResult
    static func run(
        _ yaml: String, plugins: [TestPlugin] = [], options: RunOptions = RunOptions(),
        directory existing: String? = nil, validatingPlugins: Bool = true, serving: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation, _ body: (EmbeddedEngine) async throws -> Void
    ) async throws -> Int32 {
        let directory = try existing ?? makeTemporaryDirectory()
        defer { if existing == nil { try? FileManager.default.removeItem(atPath: directory) } }
        let configPath = directory + "/config.yaml"
        try TestFiles.writeInPlace(yaml, to: configPath)

        let clock = ManualEngineClock()
        let catalog = TestPlugin.catalog(plugins, clock: SupervisionClock(clock.supervision))
        let kinds = Set(plugins.flatMap(\.kinds)).union(BuiltInPlugins.kinds.map(\.rawValue))
        let read: @Sendable () -> Result<LoadedConfiguration, ConfigurationError> = {
            ConfigurationLoader(
                kindIsAvailable: { kinds.contains($0) }, pluginSearchDescription: { _ in "the test's plugins" }
            ).load(file: configPath)
        }
        let loaded: LoadedConfiguration
        switch read() {
        case .success(let configuration): loaded = configuration
        case .failure(let error):
            throw HarnessError("the configuration does not read: \(error.diagnostics.map { $0.formatted(file: error.file) })", sourceLocation)
        }
        let clicks = ClickBook()
        let environment = EngineEnvironment(
            now: { clock.now },
            makeClock: { inbox in
                clock.attach(inbox)
                return clock
            },
            readConfiguration: read,
            plugins: catalog,
            cacheEnvironment: ["HAMMOCK_CACHE_DIR": directory + "/cache"],
            makeClickCommands: { _, _ in clicks },
            sweepOrphans: {})
        let log = LogBook()
        let logger = Logger(label: "hammock") { _ in log.handler }
        let nowhere = try devNull()
        let standardError = StandardError(secrets: Secrets(), descriptor: nowhere)
        let engine = Engine(
            configuration: loaded, environment: environment, options: options, logger: logger,
            standardError: standardError)
        // As `hammock run`: the plugins check their sources first (unless the test plays a plugin, which
        // answers once `body` runs).
        if validatingPlugins {
            let validation = await engine.validatePlugins()
            guard validation.optionProblems.isEmpty else {
                await engine.shutdownLoaders()
                throw HarnessError("the plugins refused options: \(validation.optionProblems.map(\.message))", sourceLocation)
            }
        }
        let output = OutputBook(parsesJSON: options.format == .json)
        let stdout = MemoryStdout(book: output)
        let stop = StopRequest()
        let inbox = engine.inbox
        let writer = OutputWriter(
            transport: stdout, secrets: standardError.secrets, bar: engine.barEncoder, metrics: nil,
            reportProblem: { [logger] in logger.warning("\($0)") }
        ) {
            if stop.request(.stdoutClosed, signal: nil) { inbox.yield(.stop) }
        }
        let controls = ControlMailbox(waitForRoomForAnswers: { writer.waitForRoomForAnswers() })
        let embedded = EmbeddedEngine(
            directory: directory, configPath: configPath, clock: clock, output: output, log: log, clicks: clicks,
            engine: engine, controls: controls, stop: stop, stdout: stdout, writer: writer,
            format: options.format)

        async let status: Int32 = {
            let status =
                serving
                ? await engine.run(primary: nil, clients: nil, stop: stop) { output.stopping() }
                : await engine.run(output: writer, controls: controls, stop: stop) { output.stopping() }
            output.finished(status: status)
            return status
        }()
        do {
            try await body(embedded)
        } catch {
            if embedded.isRunning { embedded.stop(signal: SIGTERM) }
            _ = await status
            throw error
        }
        if embedded.isRunning { embedded.stop(signal: SIGTERM) }
        return await status
    }

    /// Waits for the run to end by itself (`--once`, a closed stdout, a stop the test asked for) and returns
    /// its exit status.
    @discardableResult
    func waitForExit(timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Int32 {
        try await output.await("the end of the run", timeout: timeout, sourceLocation: sourceLocation) { $0.exitStatus }
    }

    // MARK: What the consumer and the system do

    /// A control line on stdin (without its newline), as the stdin thread hands it over; with `--format
    /// i3bar`, a click line.
    func send(controlLine: String) {
        let event = LineReader.Event.line(Array(controlLine.utf8))
        let announce = format == .i3bar ? controls.receiveClick(event) : controls.receive(event)
        if announce { engine.inbox.yield(.controls(.standardOutput)) }
    }

    /// A client connects, as `hammock serve`'s listener hands one to the loop: it reads `subscription`'s
    /// lines (acknowledged with `subscriptionID`), in `format` over `views`, from a queue of its own.
    func connect(
        _ subscription: Subscription = .everything, subscriptionID: ControlID? = nil, format: StdoutFormat = .json,
        views: [ViewID] = []
    ) -> EmbeddedClient {
        let client = EmbeddedClient(
            id: ConsumerID(rawValue: nextClient.add(1, ordering: .relaxed).newValue), inbox: engine.inbox,
            secrets: standardErrorSecrets, format: format,
            bar: format == .json ? nil : BarEncoder(format: format, views: views.compactMap { engine.view($0) }))
        engine.inbox.yield(.joined(client.consumer(subscription, subscriptionID: subscriptionID)))
        return client
    }

    /// SIGHUP: read the configuration again.
    func reload() { engine.inbox.yield(.reload) }

    /// `Engine.ask`, as `--http` asks it.
    func ask(_ question: EngineQuestion, timeout: Duration = .seconds(5)) async -> EngineAnswer? {
        await engine.ask(question, timeout: timeout)
    }

    /// SIGUSR1 (`failingOnly`) or SIGUSR2.
    func loadEverySource(failingOnly: Bool) { engine.inbox.yield(.loadEverySource(failingOnly: failingOnly)) }

    /// A stop signal, as `SignalRouter` routes it while the engine runs: SIGINT is an interrupt, any
    /// other a signal. A second one (once stopping) interrupts the wait for the consumer.
    func stop(signal number: Int32) {
        if stop.request(number == SIGINT ? .interrupt : .signal, signal: number) {
            engine.inbox.yield(.stop)
        } else if output.isStopping {
            writer.interrupt()
        }
    }

    /// The consumer closes its end of stdout.
    func closeStdout() { stdout.close() }

    /// Writes a new configuration to the file a reload reads.
    func rewriteConfiguration(_ yaml: String) throws {
        try TestFiles.writeInPlace(yaml, to: configPath)
    }

    /// Moves the engine's clock on by `duration`: the core's deadlines and the plugin hosts' (handshake,
    /// `configure`, restart backoff, the waits of a shutdown) that fall in it are due (at once, as for a loop
    /// that woke late; call it in steps to see each on its own).
    func advance(by duration: Duration) { clock.advance(by: duration) }

    // MARK: What the consumer reads (as `HammockProcess` offers for a process)

    /// The loop takes inputs: it has not begun to stop.
    var isRunning: Bool { !output.isStopping }
    var logText: String { log.text }

    /// Waits until the log has a record containing `text`.
    func waitForLog(
        containing text: String, timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await log.await(containing: text, timeout: timeout, sourceLocation: sourceLocation)
    }

    /// Waits until the engine is idle: nothing left in its inbox, its plugins have no load running, and the
    /// writer has written everything. A quiet period on the real clock (`quiet`), for want of a way to ask
    /// every plugin whether it is working; use it only where a test asserts that nothing more comes.
    func linesUntilQuiet(quiet: Duration = .milliseconds(200), timeout: Duration = defaultTimeout) async throws -> [WrittenLine] {
        let mark = lineCount
        let deadline = ContinuousClock.now + timeout
        var count = mark
        var lastChange = ContinuousClock.now
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            if lineCount != count {
                count = lineCount
                lastChange = .now
            } else if ContinuousClock.now - lastChange >= quiet {
                break
            }
        }
        return lines(since: mark)
    }

    static func makeTemporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "hammock-embedded-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private static func devNull() throws -> Int32 {
        let descriptor = open("/dev/null", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw HarnessError("cannot open /dev/null", #_sourceLocation) }
        return descriptor
    }
}

/// A harness failure (a line that never came), with where the test waited.
struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ message: String, _ sourceLocation: SourceLocation) {
        description = "\(message)\n(at \(sourceLocation))"
    }
}

// MARK: - Output

/// One line the engine wrote, as the consumer read it.
struct WrittenLine: Sendable, CustomStringConvertible {
    /// Without its `\n`.
    let text: String
    /// `.null` when the line is not JSON (a bar's lines).
    let json: JSONValue
    let isJSON: Bool

    init(text: String, json: JSONValue?) {
        self.text = text
        self.json = json ?? .null
        isJSON = json != nil
    }

    var type: String? { json["type"]?.stringValue }
    var seq: Int? { json["seq"]?.numberValue?.intValue }
    var id: String? { json["id"]?.stringValue }
    var event: String? { json["event"]?.stringValue }
    var origin: String? { json["origin"]?.stringValue }
    var state: JSONValue? { json["state"] }
    var status: String? { json["status"]?.stringValue }
    var content: JSONValue? { self[pointer: "/state/content"] }
    subscript(key: String) -> JSONValue? { json[key] }
    subscript(pointer pointer: String) -> JSONValue? {
        guard let parsed = JSONPointer(pointer) else { return nil }
        return json[parsed]
    }
    var description: String { text }
}

/// A client of a serving `EmbeddedEngine` (`connect`): its own queue (`OutputWriter`) over memory, its own
/// control lines.
final class EmbeddedClient: LineReading, Sendable {
    let id: ConsumerID
    let output: OutputBook
    private let stdout: MemoryStdout
    private let writer: OutputWriter
    private let controls: ControlMailbox
    private let inbox: EngineInbox
    private let format: StdoutFormat

    init(id: ConsumerID, inbox: EngineInbox, secrets: Secrets, format: StdoutFormat, bar: BarEncoder?) {
        self.id = id
        self.inbox = inbox
        self.format = format
        output = OutputBook(parsesJSON: format == .json)
        stdout = MemoryStdout(book: output)
        let writer = OutputWriter(transport: stdout, secrets: secrets, bar: bar) { [inbox] in inbox.yield(.left(id)) }
        self.writer = writer
        controls = ControlMailbox(waitForRoomForAnswers: { writer.waitForRoomForAnswers() })
        Task { [writer] in await writer.run() }  // ends when the engine finishes or drops this client
    }

    func consumer(_ subscription: Subscription, subscriptionID: ControlID?) -> Consumer {
        Consumer(
            id: id, subscription: subscription, subscriptionID: subscriptionID, output: writer, controls: controls,
            format: format
        ) { [writer, output] in
            Task {
                _ = await writer.finish(with: nil, deadline: .seconds(2))
                output.finished(status: 0)
            }
        }
    }

    /// A control line from this client (without its newline).
    func send(controlLine: String) {
        let event = LineReader.Event.line(Array(controlLine.utf8))
        let announce = format == .i3bar ? controls.receiveClick(event) : controls.receive(event)
        if announce { inbox.yield(.controls(id)) }
    }

    /// The client closes its connection.
    func disconnect() { stdout.close() }

    /// The engine closed this client (it left, was refused, or the engine stopped).
    var isClosed: Bool { output.isFinishedForTest }

    /// Waits until the engine closes this client.
    func waitUntilClosed(
        timeout: Duration = EmbeddedEngine.defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        _ = try await output.await("the engine to close the client", timeout: timeout, sourceLocation: sourceLocation) {
            $0.isFinished ? true : nil
        }
    }
}

/// What reads the engine's lines in a test: its stdout (`EmbeddedEngine`), or a client (`EmbeddedClient`).
protocol LineReading {
    var output: OutputBook { get }
}

extension EmbeddedEngine: LineReading {}

extension LineReading {
    var lines: [WrittenLine] { output.lines }
    var lineCount: Int { output.lines.count }
    func lines(since mark: Int) -> [WrittenLine] { Array(output.lines.dropFirst(mark)) }
    /// Lines that were not JSON (none, for the protocol's lines).
    var malformedLines: [String] { output.lines.filter { !$0.isJSON }.map(\.text) }

    /// The first line after the previous match (or from the start) that satisfies `predicate`; lines
    /// skipped over stay in `lines`. Throws when none comes within `timeout`.
    @discardableResult
    func nextLine(
        where predicate: @escaping (WrittenLine) -> Bool, timeout: Duration = EmbeddedEngine.defaultTimeout,
        _ what: String = "a line matching the condition", sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> WrittenLine {
        try await output.await(what, timeout: timeout, sourceLocation: sourceLocation) { state in
            while state.cursor < state.lines.count {
                let line = state.lines[state.cursor]
                state.cursor += 1
                if predicate(line) { return line }
            }
            return nil
        }
    }

    /// `nextLine` for a line of `type` (and `id`) that also satisfies `predicate`.
    @discardableResult
    func waitFor(
        type: String, id: String? = nil, timeout: Duration = EmbeddedEngine.defaultTimeout,
        sourceLocation: SourceLocation = #_sourceLocation, where predicate: @escaping (WrittenLine) -> Bool = { _ in true }
    ) async throws -> WrittenLine {
        try await nextLine(
            where: { $0.type == type && (id == nil || $0.id == id) && predicate($0) }, timeout: timeout,
            "a \"\(type)\" line\(id.map { " for \"\($0)\"" } ?? "")", sourceLocation: sourceLocation)
    }

    /// The next `source` line of `source` satisfying `predicate`, after the last one this returned for it.
    @discardableResult
    func next(
        _ source: String, timeout: Duration = EmbeddedEngine.defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: @escaping (WrittenLine) -> Bool = { _ in true }
    ) async throws -> WrittenLine {
        try await output.await("the next line of \"\(source)\"", timeout: timeout, sourceLocation: sourceLocation) { state in
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

    /// Waits until `condition` holds for every line written so far.
    func waitUntil(
        _ what: String, timeout: Duration = EmbeddedEngine.defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: @escaping ([WrittenLine]) -> Bool
    ) async throws {
        _ = try await output.await(what, timeout: timeout, sourceLocation: sourceLocation) { state in
            condition(state.lines) ? true : nil
        }
    }

    /// Forgets the lines read so far for `nextLine` and `waitFor`: the next match comes after them.
    func skipLinesReadSoFar() { output.skipReadSoFar() }

}

/// Every line written to the in-memory stdout, and whoever waits for one. A `Mutex`: the writer's thread
/// appends, test tasks read; waiters are resumed outside the lock.
final class OutputBook: Sendable {
    struct State {
        var lines: [WrittenLine] = []
        var partial: [UInt8] = []
        var cursor = 0
        var sourceCursors: [String: Int] = [:]
        var generation = 0
        var isFinished = false
        var exitStatus: Int32?
        var isStopping = false
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var cancelled: Set<Int> = []
        var nextWaiter = 0
    }

    let parsesJSON: Bool
    private let state = Mutex(State())

    init(parsesJSON: Bool) { self.parsesJSON = parsesJSON }

    var lines: [WrittenLine] { state.withLock { $0.lines } }
    var isStopping: Bool { state.withLock { $0.isStopping } }
    var isFinishedForTest: Bool { state.withLock { $0.isFinished } }

    func skipReadSoFar() { state.withLock { $0.cursor = $0.lines.count } }

    func stopping() { state.withLock { $0.isStopping = true } }

    /// Bytes the writer wrote: complete lines join `lines`.
    func append(_ bytes: UnsafeRawBufferPointer) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            var added = false
            for byte in bytes {
                guard byte == UInt8(ascii: "\n") else {
                    state.partial.append(byte)
                    continue
                }
                let text = String(decoding: state.partial, as: UTF8.self)
                state.partial.removeAll(keepingCapacity: true)
                let json = parsesJSON ? try? JSONValue(parsing: Array(text.utf8)) : nil
                state.lines.append(WrittenLine(text: text, json: json))
                added = true
            }
            guard added else { return [] }
            state.generation += 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The run is over: nothing more will be written.
    func finished(status: Int32) {
        let waiters = state.withLock { state in
            state.isFinished = true
            state.exitStatus = status
            state.generation += 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Looks with `take` after every new line until it finds something, the run ends, or `timeout` passes.
    func await<Found: Sendable>(
        _ what: String, timeout: Duration, sourceLocation: SourceLocation, _ take: @escaping (inout State) -> Found?
    ) async throws -> Found {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (found, generation, finished) = state.withLock { state in (take(&state), state.generation, state.isFinished) }
            if let found { return found }
            if finished { throw HarnessError("the run ended before \(what)", sourceLocation) }
            if ContinuousClock.now >= deadline { throw HarnessError("timed out after \(timeout) waiting for \(what)", sourceLocation) }
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.change(after: generation) }
                group.addTask { try? await Task.sleep(until: deadline) }
                await group.next()
                group.cancelAll()
            }
        }
    }

    /// Returns once a line came after `generation` (or the task is cancelled).
    private func change(after generation: Int) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.generation != generation || state.isFinished || state.cancelled.contains(id) { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.cancelled.insert(id)
                return state.waiters.removeValue(forKey: id)
            }
            waiter?.resume()
        }
    }
}

/// stdout in memory: a consumer that reads at once, and keeps every line in an `OutputBook`. Its writes
/// never block (the slow consumer is `OutputWriterTests`' matter); `close()` is the consumer leaving.
final class MemoryStdout: OutputTransport {
    let atomicWrite = 4096
    let knowsUnreadBytes = false
    private let book: OutputBook
    private let closed = LockedCondition((isClosed: false, isWatchStopped: false))

    init(book: OutputBook) { self.book = book }

    func write(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard !closed.withLock({ $0.isClosed }) else { return nil }
        book.append(bytes)
        return bytes.count
    }

    func waitForRoom(_ count: Int, stop: () -> Bool) -> Bool { !closed.withLock { $0.isClosed } }

    func waitForClosedConsumer() -> Bool {
        closed.withLock(when: { $0.isClosed || $0.isWatchStopped }) { $0.isClosed }
    }

    func stopWatching() {
        closed.withLock { $0.isWatchStopped = true }
        closed.broadcast()
    }

    func close() {
        closed.withLock { $0.isClosed = true }
        closed.broadcast()
    }
}

// MARK: - Clock

/// The engine's clock in a test: `now` moves only when the test calls `advance`, and a deadline the core
/// asks for is met (a `.tick` into the inbox) only when `now` reaches it. A `Mutex`: the loop schedules,
/// the test advances.
final class ManualEngineClock: EngineDeadlines {
    private struct State {
        var now: EngineTime
        var deadline: MonotonicInstant?
        var inbox: EngineInbox?
    }

    private let state: Mutex<State>
    /// The plugin hosts' clock (handshake and `configure` deadlines, restart backoff, the waits of a
    /// shutdown), moved by `advance` with the engine's: a test steps through a supervision deadline as
    /// through a load's, instead of waiting it out in real time.
    let supervision = ManualClock()

    /// Starts at an arbitrary instant, and a wall clock on 2026-09-21.
    init(start: EngineTime = EngineTime(
        instant: MonotonicInstant(milliseconds: 5_000_000), wall: Timestamp(millisecondsSince1970: 1_790_000_000_000)))
    {
        state = Mutex(State(now: start))
    }

    var now: EngineTime { state.withLock { $0.now } }

    /// The deadline the loop last asked for, if it is still to come.
    var deadline: MonotonicInstant? { state.withLock { $0.deadline } }

    func attach(_ inbox: EngineInbox) { state.withLock { $0.inbox = inbox } }

    func schedule(_ deadline: MonotonicInstant?) {
        state.withLock { state in
            state.deadline = deadline
            fireIfDue(&state)
        }
    }

    func advance(by duration: Duration) {
        state.withLock { state in
            state.now = EngineTime(
                instant: state.now.instant + duration,
                wall: Timestamp(millisecondsSince1970: state.now.wall.millisecondsSince1970 + duration.milliseconds))
            fireIfDue(&state)
        }
        supervision.advance(by: duration)
    }

    private func fireIfDue(_ state: inout State) {
        guard let deadline = state.deadline, deadline <= state.now.instant else { return }
        state.deadline = nil
        state.inbox?.yield(.tick)
    }

    /// Nothing to run: the test moves time. Returns when cancelled.
    func run() async {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self)
        await withTaskCancellationHandler {
            for await _ in stream {}
        } onCancel: {
            continuation.finish()
        }
    }
}

// MARK: - Plugins

/// A plugin the test provides for `kind`s, run in process as the built-in `fake` is: a `PluginDescription`
/// served by HammockPluginKit's own dispatcher over `InProcessTransport`, or an `EmbeddedPlugin` the test
/// plays line by line. `command` is what `plugins:` says for the kind (`[]` when nothing does), so that a
/// reload that changes it starts a new plugin, as it would a new process.
struct TestPlugin: Sendable {
    let kinds: [String]
    let makeTransport: @Sendable (_ command: [String]) -> any PluginTransport

    /// A plugin made with HammockPluginKit, served in process; `description` is asked for each start.
    /// `received` sees every line the host sends it (decoded), before the plugin does.
    static func kit(
        _ kinds: [String], received: (@Sendable (JSONValue) -> Void)? = nil,
        _ description: @escaping @Sendable (_ command: [String]) -> PluginDescription
    ) -> TestPlugin {
        TestPlugin(kinds: kinds) { command in
            let plugin = description(command)
            return InProcessTransport { input, writeLine in
                guard let received else { return await Plugin.serve(plugin, input: input, writeLine: writeLine) }
                let (tapped, continuation) = AsyncStream.makeStream(of: [UInt8].self)
                await withTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await line in input {
                            if let message = try? JSONValue(parsing: line) { received(message) }
                            continuation.yield(line)
                        }
                        continuation.finish()
                    }
                    await Plugin.serve(plugin, input: tapped, writeLine: writeLine)
                    group.cancelAll()
                }
            }
        }
    }

    /// A plugin of `kinds` whose every load of every source is answered by `answer` (the source's id and
    /// options): "the plugin answers load X with Y".
    static func answering(
        _ kinds: [String] = ["test"], received: (@Sendable (JSONValue) -> Void)? = nil,
        _ answer: @escaping @Sendable (_ source: String, _ options: JSONValue) async -> PluginLoadResult
    ) -> TestPlugin {
        kit(kinds, received: received) { _ in
            PluginDescription(kinds: kinds, version: "0.1") { setup in
                ClosureSource { _ in await answer(setup.id, setup.options) }
            }
        }
    }

    /// Plugins the test plays line by line: each start of `kind`'s plugin goes to `started`.
    static func embedded(_ kind: String, started: @escaping @Sendable (EmbeddedPlugin, _ command: [String]) -> Void) -> TestPlugin {
        TestPlugin(kinds: [kind]) { command in
            let plugin = EmbeddedPlugin()
            started(plugin, command)
            return plugin
        }
    }

    /// The engine's catalog: built-in kinds as hammock serves them, the test's kinds from `plugins`.
    static func catalog(_ plugins: [TestPlugin], clock: SupervisionClock) -> PluginCatalog {
        PluginCatalog(
            origin: { kind, configured in
                if BuiltInPlugins.kinds.contains(kind) { return .builtIn }
                guard plugins.contains(where: { $0.kinds.contains(kind.rawValue) }) else { return nil }
                return .command(configured[kind]?.command ?? [])
            },
            makeHost: { kind, origin, inbox, logger, standardError in
                switch origin {
                case .builtIn:
                    guard let serve = BuiltInPlugins.serve(kind) else { return nil }
                    return PluginHost(
                        kind: kind, origin: origin, report: { inbox.yield(.plugin($0, from: $1)) }, logger: logger, clock: clock,
                        secrets: standardError.secrets, makeTransport: { InProcessTransport(serve: serve) })
                case .command(let command):
                    guard let plugin = plugins.first(where: { $0.kinds.contains(kind.rawValue) }) else { return nil }
                    return PluginHost(
                        kind: kind, origin: origin, report: { inbox.yield(.plugin($0, from: $1)) }, logger: logger, clock: clock,
                        secrets: standardError.secrets, makeTransport: { plugin.makeTransport(command) })
                }
            })
    }
}

/// A source of a test plugin whose every load runs `load`.
struct ClosureSource: PluginSource {
    let answer: @Sendable (PluginLoadRequest) async -> PluginLoadResult
    func load(_ request: PluginLoadRequest) async -> PluginLoadResult { await answer(request) }
}

/// A count that test plugins' closures share (an `Atomic` cannot be captured by one).
final class Tally: Sendable {
    private let value = Atomic(0)
    /// Counts one more and returns the new count.
    func next() -> Int { value.add(1, ordering: .acquiringAndReleasing).newValue }
    var count: Int { value.load(ordering: .acquiring) }
}

/// Holds a test plugin's answer back until the test opens it: each `open()` lets one `wait()` through,
/// so that a test sees the lines before the answer (a real plugin's answer takes the time of a process).
final class Gate: Sendable {
    private let openings = AsyncStream.makeStream(of: Void.self)

    func open() { openings.continuation.yield() }

    func wait() async {
        for await _ in openings.stream { return }
    }
}

/// A switch that test plugins' closures share.
final class Flag: Sendable {
    private let value = Atomic(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

// MARK: - Clicks and the log

/// The on-click commands the engine ran, recorded instead of run.
actor ClickBook: ClickCommandRunner {
    private(set) var commands: [ClickCommand] = []
    private(set) var isEnded = false

    func run(_ click: ClickCommand) async {
        guard !isEnded else { return }
        commands.append(click)
    }

    func endAll() async { isEnded = true }
}

/// What the engine logged, one record a line (`level: message key=value`).
final class LogBook: Sendable {
    private let records = Mutex<[String]>([])

    var handler: RecordingLogHandler { RecordingLogHandler(book: self) }
    var text: String { records.withLock { $0.joined(separator: "\n") } }
    var entries: [String] { records.withLock { $0 } }

    func add(_ record: String) { records.withLock { $0.append(record) } }

    func await(containing text: String, timeout: Duration, sourceLocation: SourceLocation) async throws {
        let deadline = ContinuousClock.now + timeout
        while !self.text.contains(text) {
            if ContinuousClock.now >= deadline { throw HarnessError("the log never said \"\(text)\": \(self.text)", sourceLocation) }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

struct RecordingLogHandler: LogHandler {
    let book: LogBook
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        let suffix = fields.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        book.add("\(event.level): \(event.message)\(suffix)")
    }
}

/// Sends `snapshot` once the engine is quiet and returns the re-emitted states, by id, checking that every
/// source and view comes back, sources first, each in file order (as `settledSnapshot` of the end-to-end
/// tests does for a process).
func settledSnapshot(
    of engine: EmbeddedEngine, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> (sources: [String: WrittenLine], views: [String: WrittenLine]) {
    let hello = try #require(engine.lines.first { $0.type == "hello" }, sourceLocation: sourceLocation)
    let sourceIDs = (hello["sources"]?.arrayValue ?? []).compactMap(\.stringValue)
    let viewIDs = (hello["views"]?.arrayValue ?? []).compactMap(\.stringValue)
    _ = try await engine.linesUntilQuiet()
    engine.skipLinesReadSoFar()
    let mark = engine.lineCount
    engine.send(controlLine: #"{"op":"snapshot"}"#)
    var sources: [String: WrittenLine] = [:]
    var views: [String: WrittenLine] = [:]
    for id in sourceIDs {
        sources[id] = try await engine.waitFor(type: "source", id: id, sourceLocation: sourceLocation)
    }
    for id in viewIDs {
        views[id] = try await engine.waitFor(type: "view", id: id, sourceLocation: sourceLocation)
    }
    let order = engine.lines(since: mark).prefix(sourceIDs.count + viewIDs.count).map { $0.id ?? "?" }
    #expect(order == sourceIDs + viewIDs, "a snapshot writes every source, then every view", sourceLocation: sourceLocation)
    return (sources, views)
}
