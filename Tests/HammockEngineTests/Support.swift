import Foundation
@testable import HammockCore
import HammockJSON
import HammockProtocol
import HammockSystem
import Logging
import Synchronization
import Testing

@testable import HammockEngine
@testable import HammockPluginHost

/// A plugin the test plays, in memory, as swift-nio's `EmbeddedChannel` stands in for a socket: the test
/// reads the lines the host sent, writes whatever bytes it likes (answers, garbage, half lines, lines over the
/// limit), then ends it with an exit status. The bytes go through the same `LineSplitter` as a real
/// plugin's stdout, with the same limit.
final class EmbeddedPlugin: PluginTransport {
    private enum Output {
        case bytes([UInt8])
        case exit(PluginExit)
    }

    /// What the host sent, one line each; closed when the host closes the input or the plugin ends.
    let fromHost = Mailbox<[UInt8]>()
    private let output = AsyncStream.makeStream(of: Output.self)
    private let kills = Mutex(0)
    /// Whether `kill` ends it, as a real guard does; one that ignores it shows the host waiting it out.
    let diesWhenKilled: Bool
    /// Whether the end of its input ends it, as it ends a plugin made with HammockPluginKit.
    let exitsAtEndOfInput: Bool

    init(diesWhenKilled: Bool = true, exitsAtEndOfInput: Bool = true) {
        self.diesWhenKilled = diesWhenKilled
        self.exitsAtEndOfInput = exitsAtEndOfInput
    }

    // MARK: The host's side

    func run(receive: ([LineSplitter.Piece]) async -> Void) async -> PluginExit {
        var splitter = LineSplitter(maximumLineLength: PluginSupervisor.maximumLineLength, headLength: pluginLineHeadLength)
        for await event in output.stream {
            switch event {
            case .bytes(let bytes):
                var pieces: [LineSplitter.Piece] = []
                bytes.withUnsafeBytes { splitter.feed($0) { pieces.append($0) } }
                if !pieces.isEmpty { await receive(pieces) }
            case .exit(let exit):
                var last: [LineSplitter.Piece] = []
                splitter.finish { last.append($0) }
                if !last.isEmpty { await receive(last) }
                fromHost.close()
                return exit
            }
        }
        return .exited(0)
    }

    func send(line: [UInt8]) { fromHost.put(Array(line.dropLast())) }

    func closeInput() {
        fromHost.close()
        if exitsAtEndOfInput { exit(.exited(0)) }
    }

    func kill() {
        kills.withLock { $0 += 1 }
        if diesWhenKilled { exit(.killed(signal: SIGKILL)) }
    }

    // MARK: The test's side

    var killCount: Int { kills.withLock { $0 } }

    /// Writes bytes to the host as they are: a line wants its own "\n".
    func write(_ text: String) { output.continuation.yield(.bytes(Array(text.utf8))) }

    func write(bytes: [UInt8]) { output.continuation.yield(.bytes(bytes)) }

    /// Writes one JSON line.
    func say(_ json: String) { write(json + "\n") }

    func exit(_ status: PluginExit) { output.continuation.yield(.exit(status)) }

    /// The next line from the host, decoded; nil when none came in time or the input closed.
    func read(within timeout: Duration = .seconds(10)) async -> JSONObject? {
        guard let line = await fromHost.take(within: timeout) else { return nil }
        return (try? JSONValue(parsing: line))?.objectValue
    }

    /// Reads lines until one with `op`; fails the test and returns nil if none comes.
    func expect(_ op: String, sourceLocation: SourceLocation = #_sourceLocation) async -> JSONObject? {
        while let message = await read() {
            if message["op"]?.stringValue == op { return message }
        }
        Issue.record("the host sent no \"\(op)\"", sourceLocation: sourceLocation)
        return nil
    }

    /// Reads the host's hello and answers it as a plugin of `kind`.
    func shakeHands(kind: String = "test", sourceLocation: SourceLocation = #_sourceLocation) async {
        _ = await expect("hello", sourceLocation: sourceLocation)
        say(#"{"type":"hello","protocol":1,"kinds":["\#(kind)"],"version":"0.1"}"#)
    }
}

/// Items handed from one task to another, taken with a deadline so that a test never hangs.
///
/// A `Mutex`: `put` is called from synchronous code (a transport's `send`), and each hold is a few loads.
final class Mailbox<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        var waiter: (take: Int, continuation: CheckedContinuation<Item?, Never>)?
        var takes = 0
        var expired: Set<Int> = []
        var isClosed = false
    }

    private let state = Mutex(State())

    func put(_ item: Item) {
        let waiter = state.withLock { state -> CheckedContinuation<Item?, Never>? in
            guard !state.isClosed else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter.continuation
            }
            state.items.append(item)
            return nil
        }
        waiter?.resume(returning: item)
    }

    /// What waits may still be taken; then `take` returns nil at once.
    func close() {
        let waiter = state.withLock { state in
            state.isClosed = true
            defer { state.waiter = nil }
            return state.waiter?.continuation
        }
        waiter?.resume(returning: nil)
    }

    /// The next item, or nil when none comes within `timeout` (or the mailbox is closed and empty).
    func take(within timeout: Duration = .seconds(10)) async -> Item? {
        let take = state.withLock { state in
            state.takes += 1
            return state.takes
        }
        return await withTaskGroup(of: Void.self) { group in
            group.addTask {
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                self.timeUp(take)
            }
            let item = await withCheckedContinuation { continuation in
                let ready: Item?? = state.withLock { state in
                    if !state.items.isEmpty { return .some(state.items.removeFirst()) }
                    if state.isClosed || state.expired.remove(take) != nil { return .some(nil) }
                    state.waiter = (take, continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
            group.cancelAll()
            return item
        }
    }

    /// Whether nothing arrives within `duration`: for "not before its deadline", a wait that only a bug ends.
    func staysEmpty(for duration: Duration) async -> Bool {
        try? await Task.sleep(for: duration)
        return state.withLock { $0.items.isEmpty }
    }

    private func timeUp(_ take: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Item?, Never>? in
            guard let waiter = state.waiter, waiter.take == take else {
                state.expired.insert(take)
                return nil
            }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume(returning: nil)
    }
}

/// A clock that moves only when the test says, so deadlines are stepped through exactly.
///
/// A `Mutex`: the clock is read and slept on from the host's tasks and moved from the test's.
final class ManualClock: Clock, Sendable {
    typealias Instant = SuspendingClock.Instant

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Instant
        var sleepers: [Int: Sleeper] = [:]
        var sleeps = 0
        var cancelledEarly: Set<Int> = []
    }

    private let state = Mutex(State(now: SuspendingClock().now))
    /// The deadline of every sleep begun, in order: a test waits here for the host to arm a timer before
    /// it moves the clock past it.
    let armed = Mailbox<Instant>()

    /// Waits until something sleeps until `deadline`; false if nothing does within 10 s.
    func waitUntilArmed(_ deadline: Instant) async -> Bool {
        while let next = await armed.take() {
            if next == deadline { return true }
        }
        return false
    }

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .nanoseconds(1) }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let sleep = state.withLock { state in
            state.sleeps += 1
            return state.sleeps
        }
        armed.put(deadline)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, any Error>? = state.withLock { state in
                    if state.cancelledEarly.remove(sleep) != nil { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[sleep] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let sleeper = state.withLock { state in
                guard let sleeper = state.sleepers.removeValue(forKey: sleep) else {
                    state.cancelledEarly.insert(sleep)
                    return Sleeper?.none
                }
                return sleeper
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock on and wakes every sleeper whose deadline has come.
    func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for key in due.keys { state.sleepers[key] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}

/// A plugin host of kind "test" over in-memory plugins, with what it tells the engine.
struct HostHarness {
    let host: PluginHost
    let clock = ManualClock()
    /// Each plugin the host starts, in order.
    let launches = Mailbox<EmbeddedPlugin>()
    /// What the host reported (what the engine would wrap into its inbox's `EngineInput.plugin`).
    let inbox = Mailbox<PluginHostEvent>()
    /// The kinds whose hello told the engine their template rules (`PluginHostEvent.templateRulesLearned`),
    /// kept apart so that tests read the loads' answers and pushes in order.
    let rulesLearned = Mailbox<Kind>()
    private let inboxContinuation: AsyncStream<PluginHostEvent>.Continuation
    private let pump: Task<Void, Never>

    /// - Parameter plugins: makes each plugin as the host starts it (`diesWhenKilled` and so on).
    init(plugins: @escaping @Sendable () -> EmbeddedPlugin = { EmbeddedPlugin() }) {
        let (stream, continuation) = AsyncStream.makeStream(of: PluginHostEvent.self)
        inboxContinuation = continuation
        let (inbox, launches, rulesLearned) = (inbox, launches, rulesLearned)
        pump = Task {
            for await input in stream {
                switch input {
                case .templateRulesLearned(let kind):
                    rulesLearned.put(kind)
                case .loadsFinished(let answers):
                    // The answers of one read, one by one: what a test expects does not hang on how the
                    // plugin's lines happened to be split into reads.
                    for answer in answers {
                        inbox.put(.loadFinished(source: answer.source, loadID: answer.loadID, outcome: answer.outcome))
                    }
                default:
                    inbox.put(input)
                }
            }
        }
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        host = PluginHost(
            kind: "test", origin: .command(["test-plugin"]), report: { event, _ in continuation.yield(event) }, logger: logger,
            clock: SupervisionClock(clock)
        ) {
            let plugin = plugins()
            launches.put(plugin)
            return plugin
        }
    }

    func request(_ source: SourceID, id: Int, options: JSONValue = ["key": "value"]) -> LoadRequest {
        LoadRequest(source: source, kind: "test", loadID: LoadID(id), options: options, etag: nil, lastModified: nil, timeout: .seconds(30))
    }

    /// The next plugin the host starts; fails the test when none comes.
    func nextPlugin(sourceLocation: SourceLocation = #_sourceLocation) async throws -> EmbeddedPlugin {
        try #require(await launches.take(), "the host started no plugin", sourceLocation: sourceLocation)
    }

    /// Starts a load of `source` and plays a plugin through the handshake and the source's `configure`.
    func startReady(
        _ source: SourceID = "a", id: Int = 1, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> EmbeddedPlugin {
        await host.start(request(source, id: id))
        let plugin = try await nextPlugin(sourceLocation: sourceLocation)
        await plugin.shakeHands(sourceLocation: sourceLocation)
        let configure = try #require(await plugin.expect("configure", sourceLocation: sourceLocation))
        #expect(configure["source"] == .string(source.rawValue), sourceLocation: sourceLocation)
        plugin.say(#"{"type":"configured","source":"\#(source)"}"#)
        let load = try #require(await plugin.expect("load", sourceLocation: sourceLocation))
        #expect(load["id"] == .number(JSONNumber(id)), sourceLocation: sourceLocation)
        return plugin
    }

    /// The next input the engine got; fails the test when none comes.
    func nextInput(sourceLocation: SourceLocation = #_sourceLocation) async throws -> PluginHostEvent {
        try #require(await inbox.take(), "nothing reached the engine", sourceLocation: sourceLocation)
    }

    /// The outcome of the next input, which must be the end of load `id` of `source`.
    func loadOutcome(
        _ source: SourceID, id: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> LoadOutcome {
        let input = try await nextInput(sourceLocation: sourceLocation)
        guard case .loadFinished(source, id, let outcome) = input else {
            Issue.record("expected the end of load \(id) of \(source), got \(input)", sourceLocation: sourceLocation)
            throw HarnessError.unexpected
        }
        return outcome
    }

    /// The message of the error `outcome` carries, or nil.
    static func errorMessage(_ outcome: LoadOutcome) -> String? {
        if case .error(let error) = outcome { error.message } else { nil }
    }

    func finish() async {
        await host.shutdown()
        inboxContinuation.finish()
        await pump.value
    }

    enum HarnessError: Error { case unexpected }
}
