import CHammockSystem
import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockProtocol
import HammockSystem
import Synchronization

/// Runs a plugin: speaks the protocol on stdin and stdout and calls `makeSource` for each `configure`.
///
/// ```swift
/// @main struct WeatherPlugin {
///     static func main() async {
///         await Plugin.run(kinds: ["weather"], version: "0.3.0") { setup in
///             var options = OptionReader(setup.options, known: ["city"], kind: "weather")
///             let city = options.string("city", required: true)
///             try options.finish()
///             return WeatherSource(city: city!)
///         }
///     }
/// }
/// ```
///
/// The plugin exits when the engine says `shutdown`, when its stdin closes, on SIGTERM, or when the engine
/// dies (even with the plugin's stdin still open elsewhere), after stopping every source, so no command it
/// started outlives it.
/// `templates` declares, per kind, which options may hold no `{{ }}` template and which are URLs whose
/// template values the engine percent-encodes (see `TemplateRules`); a kind left out has no such rules.
/// `onShutdown` runs after that, just before the exit: the place to close what the sources share (an
/// HTTP client, a connection pool).
/// `queuesLoads`: the sources may hold a load back before working on it, and call `request.started()`
/// when its work begins; the engine then counts each load's timeout from that call, not from the send.
/// `optionsSchema`: per kind, a JSON Schema of its options (built with `JSONSchema.object(...)`), which
/// `hammock schema` puts into the configuration's schema for editors; give the same keys to `OptionReader`
/// (`JSONSchema.propertyNames(of:)`), so the two cannot drift apart.
public enum Plugin {
    public static func run(
        kinds: [String], version: String, templates: [String: TemplateRules] = [:], queuesLoads: Bool = false,
        optionsSchema: [String: JSONValue] = [:],
        onShutdown: @escaping @Sendable () async -> Void = {},
        makeSource: @escaping @Sendable (SourceSetup) async throws(OptionProblems) -> any PluginSource
    ) async -> Never {
        await run(
            PluginDescription(
                kinds: kinds, version: version, templates: templates, queuesLoads: queuesLoads,
                optionsSchema: optionsSchema, onShutdown: onShutdown, makeSource: makeSource))
    }

    /// Runs `plugin` as this process: the protocol on stdin and stdout, until `shutdown`, the end of stdin,
    /// SIGTERM or the engine's death (see above).
    public static func run(_ plugin: PluginDescription) async -> Never {
        let parentAtStart = getppid()
        ProcessMemory.returnLargeBlocks()
        // A terminal's Ctrl-C reaches the whole process group; the engine decides when plugins stop.
        signal(SIGINT, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        let output = PluginOutput()
        let dispatcher = PluginDispatcher(plugin, output: output)
        // A read's worth of lines at a time: one wake-up of the serving task for the many loads a write of the
        // engine can hold.
        let (messages, inbox) = AsyncStream.makeStream(of: [LineReader.Event].self)
        LineReader.startBatched(descriptor: STDIN_FILENO, maximumLineLength: 64 << 20, name: "plugin.stdin") { inbox.yield($0) }

        // Caught as the engine catches its signals (at once: a DispatchSource could lose one sent early).
        SignalCatcher.catchSignals([SIGTERM]) { _ in inbox.yield([.end]) }

        // If the engine dies without closing our stdin (it always closes on exit, but a descriptor could
        // have leaked to another process), the kernel still tells us.
        ParentWatch.start(parentAtStart: parentAtStart) {
            pluginLog("the engine that started this plugin is gone; stopping every source")
            inbox.yield([.end])
        }

        await serve(messages, with: dispatcher)
        await plugin.onShutdown()
        output.flush()
        exit(0)
    }

    /// Serves the protocol in this process, for a plugin that hammock runs as a part of itself: lines from
    /// the engine come from `input` (without their newline), and each line for the engine (newline included)
    /// goes to `writeLine`. Nothing of a process is touched (stdin, stdout, signals, the parent watch).
    /// Returns after `shutdown`, the end of `input` or the cancellation of the task serving, once every
    /// source has stopped and `onShutdown` has run.
    public static func serve(
        kinds: [String], version: String, templates: [String: TemplateRules] = [:], queuesLoads: Bool = false,
        optionsSchema: [String: JSONValue] = [:], input: AsyncStream<[UInt8]>,
        writeLine: @escaping @Sendable ([UInt8]) -> Void, onShutdown: @escaping @Sendable () async -> Void = {},
        makeSource: @escaping @Sendable (SourceSetup) async throws(OptionProblems) -> any PluginSource
    ) async {
        await serve(
            PluginDescription(
                kinds: kinds, version: version, templates: templates, queuesLoads: queuesLoads,
                optionsSchema: optionsSchema, onShutdown: onShutdown, makeSource: makeSource),
            input: input, writeLine: writeLine)
    }

    /// Serves `plugin` inside the calling process (see `serve(kinds:version:...)`).
    public static func serve(
        _ plugin: PluginDescription, input: AsyncStream<[UInt8]>, writeLine: @escaping @Sendable ([UInt8]) -> Void
    ) async {
        let dispatcher = PluginDispatcher(plugin, output: PluginOutput(writeLine: writeLine))
        // The task's cancellation ends the iteration of `input`, as its end does.
        await serve(input.map { [LineReader.Event.line($0)] }, with: dispatcher)
        await plugin.onShutdown()
    }

    /// Hands each line from the engine to `dispatcher` until `shutdown` or the end of `messages`, then stops
    /// every source.
    static func serve(_ batches: some AsyncSequence<[LineReader.Event], Never>, with dispatcher: PluginDispatcher) async {
        serving: for await events in batches {
            for event in events {
                switch event {
                case .line(let bytes):
                    do throws(ProtocolError) {
                        let message = try EngineMessage(line: bytes)
                        if case .shutdown = message { break serving }
                        await dispatcher.handle(message)
                    } catch {
                        pluginLog("ignoring a line from the engine that is not protocol: \(error.message)")
                    }
                case .tooLong(let length):
                    pluginLog("ignoring a line of \(length) bytes from the engine")
                case .end:
                    break serving
                }
            }
        }
        await dispatcher.shutdown()
    }
}

/// Tells the plugin that the engine which started it has died: the kernel's parent-death signal, made safe
/// against threads that end by `hammock_watch_parent`, with nothing polling.
enum ParentWatch {
    /// Set by the engine where it spawns plugins to its own pid, so a plugin whose engine died before the
    /// plugin first asked for its parent still knows whose child it was meant to be.
    static let engineVariable = "HAMMOCK_ENGINE_PID"

    /// Starts watching: the `plugin.parent` thread waits on the kernel's notice for as long as the plugin
    /// runs (the process's exit ends it), and calls `onDeath` at most once.
    static func start(parentAtStart: pid_t, onDeath: @escaping @Sendable () -> Void) {
        guard let parent = expectedParent(parentAtStart: parentAtStart) else {
            onDeath()
            return
        }
        let notice = hammock_watch_parent(parent)
        guard notice >= 0 else {
            pluginLog("cannot watch for the engine's death (\(String(cString: strerror(errno)))); the end of stdin still stops the plugin")
            return
        }
        // A parent that died before the signal was asked for sent none.
        if getppid() != parent {
            onDeath()
            return
        }
        OwnThread.start(named: "plugin.parent") {
            // The notice is non-blocking (its signal handler writes it): wait for it in poll, with no limit.
            var ready = pollfd(fd: notice, events: Int16(POLLIN), revents: 0)
            while poll(&ready, 1, -1) < 0 && errno == EINTR {}
            onDeath()
        }
    }

    /// The process this plugin must stay the child of, or nil when the engine is already gone.
    ///
    /// Without the engine's pid, the parent when the plugin started. With it: the engine when it is the
    /// parent; the parent when the engine is further up (a wrapper such as `sh -c` that did not `exec`); and
    /// nil when the engine is no ancestor at all, because the plugin was re-parented before it looked. A
    /// parent outside the plugin's pid namespace reads as 0, and the engine's pid means nothing there.
    static func expectedParent(parentAtStart: pid_t) -> pid_t? {
        guard parentAtStart > 0, let value = ProcessInfo.processInfo.environment[engineVariable],
            let engine = pid_t(value), engine > 1
        else { return parentAtStart }
        if parentAtStart == engine { return engine }
        var ancestor = parentAtStart
        for _ in 0..<64 {
            guard ancestor > 1, let next = ProcessStat(pid: ancestor)?.parent else { break }
            if next == engine { return parentAtStart }
            ancestor = next
        }
        return nil
    }
}

/// Writes a line of log text to stderr; the engine passes it on with the kind as prefix.
///
/// Never fails: once the engine is gone nobody reads stderr, and a plugin that logs its own shutdown then
/// must go on to stop its commands (`FileHandle.write` traps on a broken pipe, hence `write(2)`).
public func pluginLog(_ message: String) {
    Descriptor.writeOrDrop(Array((message + "\n").utf8), to: STDERR_FILENO)
}

/// Writes protocol lines to stdout, whole lines in the order sent.
///
/// Synchronous on purpose: the dispatcher decides what to send and queues it without suspending, so no
/// other message can slip in between (an answer and a push of the same source stay in order).
///
/// A message longer than the protocol's line limit once encoded (content under a source's `maxBytes` can
/// grow six-fold: a NUL byte is `\u0000`) is never written: the engine would skip it. What goes instead
/// is a small `tooLarge` error for the same load or source, so the failure is that source's alone.
final class PluginOutput: Sendable {
    /// A lock around each whole line of a `writeLine`: answers and pushes come from many tasks, and a line
    /// must not interleave with another.
    private let lock = Mutex(())
    /// Where each whole line goes when not to stdout: a test's list of lines.
    private let writeLine: (@Sendable ([UInt8]) -> Void)?
    private let standardOutput: BatchedStandardOutput?

    init(writeLine: @escaping @Sendable ([UInt8]) -> Void) {
        self.writeLine = writeLine
        standardOutput = nil
    }

    /// Writes to stdout in batches (see `BatchedStandardOutput`).
    init() {
        writeLine = nil
        standardOutput = BatchedStandardOutput()
    }

    func send(_ message: PluginMessage) {
        var line = message.line
        if line.count - 1 > maximumPluginLineLength { line = Self.replacement(for: message, length: line.count - 1).line }
        if let standardOutput {
            standardOutput.append(line)
        } else if let writeLine {
            lock.withLock { _ in writeLine(line) }
        }
    }

    /// Returns once every line sent so far is written.
    func flush() { standardOutput?.flush() }

    /// The dispatcher's count of loads in flight changed (see `BatchedStandardOutput.linger`).
    func loadsInFlight(_ count: Int) { standardOutput?.loadsInFlight(count) }

    /// What to send instead of `message`, which is `length` bytes once encoded.
    static func replacement(for message: PluginMessage, length: Int) -> PluginMessage {
        let limit = "the protocol's limit of \(maximumPluginLineLength) bytes for a line"
        switch message {
        case .newData(let id, let source, _, _, _), .error(let id, let source, _):
            return .error(id: id, source: source, error: tooLarge(message, length: length, limit: limit))
        case .pushedData(let source, _), .pushedError(let source, _):
            return .pushedError(source: source, error: tooLarge(message, length: length, limit: limit))
        case .invalid(let source, let problems):
            let first = problems.first.map { OptionProblem(pointer: $0.pointer, message: String($0.message.prefix(1000))) }
            let summary = OptionProblem(
                pointer: JSONPointer(tokens: []),
                message: "\(problems.count) problems in all, too long to list (\(length) bytes, over \(limit))")
            return .invalid(source: source, errors: (first.map { [$0] } ?? []) + [summary])
        case .hello, .configured, .notModified, .cancelled, .started, .fresh, .meta, .pushedMeta, .noStore:
            // Small by nature (a meta is bounded before it is sent, see `boundedMeta`); an absurd kind name or
            // version is the plugin author's to see.
            return message
        }
    }

    private static func tooLarge(_ message: PluginMessage, length: Int, limit: String) -> SourceError {
        let what = switch message {
        case .newData, .pushedData: "the content is"
        default: "the error is"
        }
        return SourceError(message: "\(what) \(length) bytes once encoded as JSON, over \(limit)", code: .tooLarge)
    }
}

/// Keeps the configured sources and the loads in flight, and answers each load exactly once.
actor PluginDispatcher {
    let plugin: PluginDescription
    let output: PluginOutput
    private var sources: [String: any PluginSource] = [:]
    private var loads: [Int: (source: String, task: Task<Void, Never>)] = [:]
    /// How many of `loads` each source has: asked at every answer and push, so counted rather than searched
    /// for (a search is a pass over every load in flight, a thousand of them when a thousand sources poll).
    private var loadsBySource: [String: Int] = [:]
    /// Pushes of each source that wait, in order, for that source's loads in flight to be answered.
    /// Each push is its lines (a `meta`, then the `newData` it describes), held and sent together.
    private var heldPushes: [String: [[PluginMessage]]] = [:]
    /// Beyond this many held pushes of one source the oldest are dropped: each push carries the whole
    /// content, so the newest ones are what matters, and a load that hangs must not grow memory.
    static let maximumHeldPushes = 1024
    /// Loads in flight at once from which the memory they leave is handed back to the system when the last
    /// ends (`malloc_trim`), at most once every `trimInterval`: a start-up storm, and once a minute a steady
    /// poll of as many. (256 before, which 250 rest sources starting together stayed under: their plugin kept
    /// 12.5 KiB a source that it no longer used; 4.8 KiB once trimmed, measured.)
    static let burstWorthTrimming = 64
    static let trimInterval: Duration = .seconds(60)
    private var peakLoads = 0
    private var lastTrim: ContinuousClock.Instant?

    init(_ plugin: PluginDescription, output: PluginOutput) {
        self.plugin = plugin
        self.output = output
    }

    func handle(_ message: EngineMessage) async {
        switch message {
        case .hello:
            output.send(
                .hello(
                    protocol: pluginProtocolVersion, kinds: plugin.kinds, version: plugin.version,
                    templates: plugin.templates, queuesLoads: plugin.queuesLoads, optionsSchema: plugin.optionsSchema))
        case .configure(let id, let options):
            if let old = sources.removeValue(forKey: id) { await old.stop() }
            do throws(OptionProblems) {
                let setup = SourceSetup(id: id, options: options, push: PushChannel(source: id, dispatcher: self))
                sources[id] = try await plugin.makeSource(setup)
                output.send(.configured(source: id))
            } catch {
                output.send(.invalid(source: id, errors: error.problems))
            }
        case .load(let id, let loadID, let etag, let lastModified, let timeout, let pages):
            guard let source = sources[id] else {
                output.send(.error(id: loadID, source: id, error: SourceError(message: "source \"\(id)\" is not configured in this plugin", code: .notConfigured)))
                return
            }
            var request = PluginLoadRequest(
                id: loadID, etag: etag, lastModified: lastModified,
                timeout: timeout.map { .milliseconds(Int64(($0 * 1000).rounded())) }, pages: pages)
            if plugin.queuesLoads {
                // Sent from the load's own task, without a hop through this actor: it always goes before
                // the answer, which that task sends after `load` returns.
                let once = StartSignal()
                request.onStart = { [output] in
                    if once.claim() { output.send(.started(id: loadID)) }
                }
            }
            // On the source's executor when it names one (the whole load, the answer to this actor included,
            // then stays on the thread its I/O completes on), else on the pool as any task. Unstructured: the
            // load outlives the message that starts it; kept in `loads`, it ends by answering, or a `cancel`
            // or the shutdown cancels it.
            let task = Task(executorPreference: source.loadExecutor) {
                let result = await source.load(request)
                await self.answer(loadID, source: id, result)
            }
            _ = takeLoad(loadID)  // an id the engine used twice counts once
            loads[loadID] = (id, task)
            output.loadsInFlight(loads.count)
            peakLoads = max(peakLoads, loads.count)
            loadsBySource[id, default: 0] += 1
        case .cancel(let loadID):
            if let load = takeLoad(loadID) {
                load.task.cancel()
                output.send(.cancelled(id: loadID))
                releaseHeldPush(for: load.source)
            }
        case .remove(let id):
            await sources.removeValue(forKey: id)?.stop()
            heldPushes[id] = nil
        case .shutdown:
            await shutdown()
        }
    }

    private func answer(_ loadID: Int, source: String, _ result: PluginLoadResult) {
        guard takeLoad(loadID) != nil else { return }  // cancelled: already answered
        send(result, answering: loadID, source: source)
        releaseHeldPush(for: source)
    }

    private func send(_ result: PluginLoadResult, answering loadID: Int, source: String) {
        switch result {
        case .newData(let content, let etag, let lastModified):
            output.send(.newData(id: loadID, source: source, content: content, etag: etag, lastModified: lastModified))
        case .notModified:
            output.send(.notModified(id: loadID))
        case .error(let error):
            output.send(.error(id: loadID, source: source, error: error))
        case .fresh(let answer, let duration):
            // The advice first, then the answer it is about.
            output.send(.fresh(id: loadID, seconds: Double(max(duration, .zero).milliseconds) / 1000))
            send(answer, answering: loadID, source: source)
        case .described(let answer, let meta):
            if let meta = boundedMeta(meta, of: source) { output.send(.meta(id: loadID, meta: meta)) }
            send(answer, answering: loadID, source: source)
        case .notStored(let answer):
            output.send(.noStore(id: loadID))
            send(answer, answering: loadID, source: source)
        }
    }

    private func takeLoad(_ loadID: Int) -> (source: String, task: Task<Void, Never>)? {
        guard let load = loads.removeValue(forKey: loadID) else { return nil }
        output.loadsInFlight(loads.count)
        let left = loadsBySource[load.source, default: 1] - 1
        loadsBySource[load.source] = left > 0 ? left : nil
        if loads.isEmpty && peakLoads >= Self.burstWorthTrimming {
            // glibc keeps what a burst of loads freed (thousands of sources starting at once: tens of MiB in
            // the shell plugin) for later mallocs that a steady state never makes; give it back, once a
            // minute at most (a trim walks the heap: not every round of a 1 s poll).
            let now = ContinuousClock.now
            if lastTrim.map({ now - $0 >= Self.trimInterval }) ?? true {
                peakLoads = 0
                lastTrim = now
                _ = hammock_release_free_memory()
            }
        }
        return load
    }

    func push(_ messages: [PluginMessage], for source: String) {
        if loadsBySource[source] != nil {
            heldPushes[source, default: []].append(messages)
            if heldPushes[source]!.count > Self.maximumHeldPushes { heldPushes[source]!.removeFirst() }
        } else {
            for message in messages { output.send(message) }
        }
    }

    private func releaseHeldPush(for source: String) {
        guard loadsBySource[source] == nil,
            let messages = heldPushes.removeValue(forKey: source)
        else { return }
        for message in messages.joined() { output.send(message) }
    }

    func shutdown() async {
        for load in loads.values { load.task.cancel() }
        loads.removeAll()
        loadsBySource.removeAll()
        heldPushes.removeAll()
        let stopping = sources.values
        sources.removeAll()
        await withTaskGroup(of: Void.self) { group in
            for source in stopping { group.addTask { await source.stop() } }
        }
    }
}

/// Makes `started` go out once per load however often the source says it.
private final class StartSignal: Sendable {
    private let sent = Atomic<Bool>(false)

    /// True for the first call only.
    func claim() -> Bool { !sent.exchange(true, ordering: .relaxed) }
}

extension SourceError.Code {
    /// A load of a source the plugin was never given (or was told to remove).
    static let notConfigured = Self("notConfigured")
}

/// The plugin's stdout, written by a thread of its own in batches.
///
/// Answers come one at a time from the dispatcher; written one `write` each, a thousand polling sources
/// cost the plugin a thousand system calls a round and the engine as many reads. Here a line is appended to
/// a buffer, and the writer takes everything appended while it was writing the last batch: one `write`,
/// and one read at the engine's end, for as many lines as came meanwhile. Lines keep their order.
///
/// While other loads are in flight, a line waits up to `linger` for their answers, so that the answers of
/// sources polled together (the engine starts them in the same turn) reach the engine in a few writes
/// rather than one each: every write wakes the engine's reader, its plugin host and its loop once. A line
/// sent with no load in flight (the last answer of a round, a push of a watched file) goes at once.
///
/// A lock and a condition rather than an actor: the writer blocks in `write`, which must not happen on the
/// concurrency pool's few threads, and `append` must not wait for it.
final class BatchedStandardOutput: Sendable {
    private struct State {
        var pending: [UInt8] = []
        var writing = false
        var writerWaits = false
        /// The dispatcher's loads in flight.
        var loadsInFlight = 0
        /// Until when the waiting lines may wait for the answers still to come.
        var lingersUntil: MonotonicDeadline?
    }

    /// How long a line waits at most for the answers of the loads still in flight.
    static let linger: Duration = .milliseconds(2)
    private let linger: Duration

    private let state = LockedCondition(State())
    /// Writes a batch: to stdout (a test's own records them).
    private let write: @Sendable ([UInt8]) -> Void

    init(
        linger: Duration = BatchedStandardOutput.linger,
        write: @escaping @Sendable ([UInt8]) -> Void = BatchedStandardOutput.writeToStandardOutput
    ) {
        self.linger = linger
        self.write = write
        // A thread of its own for the life of the plugin: it blocks in `write` while the engine does not read.
        OwnThread.start(named: "plugin.stdout") { [self] in run() }
    }

    func append(_ line: [UInt8]) {
        let wakes = state.withLock { state in
            if state.pending.isEmpty { state.lingersUntil = .after(linger) }
            state.pending.append(contentsOf: line)
            return state.writerWaits
        }
        // A wake-up only when the writer sleeps: one a batch, not one a line. A broadcast, since a `flush`
        // may wait on the same condition.
        if wakes { state.broadcast() }
    }

    func flush() {
        state.withLock(when: { $0.pending.isEmpty && !$0.writing }) { _ in }
    }

    /// The last load in flight was answered: what waits goes now.
    func loadsInFlight(_ count: Int) {
        let wakes = state.withLock { state in
            state.loadsInFlight = count
            return count == 0 && !state.pending.isEmpty
        }
        if wakes { state.broadcast() }
    }

    private func run() {
        var batch: [UInt8] = []
        while true {
            // Between these two holds of the lock `writerWaits` may say so early: an `append` then wakes
            // nobody in vain but a flush, which checks again.
            state.withLock { state in
                state.writing = false
                state.writerWaits = state.pending.isEmpty
            }
            state.broadcast()  // for `flush`
            state.withLock(when: { !$0.pending.isEmpty }) { state in state.writerWaits = false }
            // Then, while loads are in flight, until they are answered or the first waiting line's linger
            // is over; what came meanwhile goes in the same write.
            state.withLock(when: { $0.loadsInFlight == 0 }, before: { $0.lingersUntil }) { state, _ in
                swap(&batch, &state.pending)
                state.writing = true
            }
            write(batch)
            batch.removeAll(keepingCapacity: true)
        }
    }

    @Sendable static func writeToStandardOutput(_ bytes: [UInt8]) {
        do {
            try Descriptor.writeAll(bytes, to: STDOUT_FILENO)
        } catch {
            exit(0)  // the engine is gone: nobody is left to serve
        }
    }
}

/// `meta` if it is within the protocol's `maximumMetaLength` once encoded; else nil, said on stderr: the
/// answer goes on without it, as the engine would take it.
func boundedMeta(_ meta: JSONObject, of source: String) -> JSONObject? {
    let length = JSONValue.object(meta).jsonBytes.count
    guard length > maximumMetaLength else { return meta }
    pluginLog("source \"\(source)\": a meta of \(length) bytes is over the limit of \(maximumMetaLength); sent without it")
    return nil
}
