import HammockCore
import HammockJSON
import HammockProtocol
import Synchronization
import Testing

@testable import HammockPluginKit

/// The kit's side of the protocol in-process: the dispatcher answers the engine's messages and its lines are
/// read back as the engine would read them, with no process and no pipe.
@Suite(.timeLimit(.minutes(1))) struct PluginDispatcherTests {
    /// The lines a dispatcher writes, in order.
    private struct Wire {
        let output: PluginOutput
        private var lines: AsyncStream<[UInt8]>.Iterator

        init() {
            let (stream, continuation) = AsyncStream.makeStream(of: [UInt8].self)
            output = PluginOutput { continuation.yield($0) }
            lines = stream.makeAsyncIterator()
        }

        mutating func next() async throws -> PluginMessage {
            let line = try #require(await lines.next())
            #expect(line.last == UInt8(ascii: "\n"))
            return try PluginMessage(line: line.dropLast())
        }
    }

    /// The sources the dispatcher made, by id, with the push channel each was given.
    private final class Made: Sendable {
        let setups = Mutex<[String: SourceSetup]>([:])
        subscript(id: String) -> SourceSetup? { setups.withLock { $0[id] } }
    }

    /// A dispatcher whose sources take one option, `answer`, and are made by `source`.
    private func dispatcher(
        _ wire: Wire, made: Made = Made(), source: @escaping @Sendable (SourceSetup) -> any PluginSource = { Answering($0) }
    ) -> PluginDispatcher {
        PluginDispatcher(PluginDescription(kinds: ["test"], version: "1.2.3") { (setup) throws(OptionProblems) in
            var reader = OptionReader(setup.options, known: ["answer"], kind: "test")
            _ = reader.string("answer")
            try reader.finish()
            made.setups.withLock { $0[setup.id] = setup }
            return source(setup)
        }, output: wire.output)
    }

    private func load(_ source: String, id: Int) -> EngineMessage {
        .load(source: source, id: id, etag: nil, lastModified: nil, timeout: nil)
    }

    @Test func helloConfigureAndLoad() async throws {
        var wire = Wire()
        let dispatcher = dispatcher(wire)
        await dispatcher.handle(.hello(protocol: 1))
        #expect(try await wire.next() == .hello(protocol: 1, kinds: ["test"], version: "1.2.3"))
        await dispatcher.handle(.configure(source: "s", options: ["answer": "x"]))
        #expect(try await wire.next() == .configured(source: "s"))
        await dispatcher.handle(load("s", id: 7))
        #expect(try await wire.next() == .newData(id: 7, source: "s", content: "x", etag: "e", lastModified: nil))
    }

    /// A source that says its load started, twice, then answers.
    private struct StartingTwice: PluginSource {
        func load(_ request: PluginLoadRequest) async -> PluginLoadResult {
            request.started()
            request.started()
            return .newData("done")
        }
    }

    @Test func aPluginThatQueuesLoadsSaysSoAndSendsStartedOncePerLoadBeforeItsAnswer() async throws {
        var wire = Wire()
        let dispatcher = PluginDispatcher(PluginDescription(kinds: ["test"], version: "1", queuesLoads: true) { _ in
            StartingTwice()
        }, output: wire.output)
        await dispatcher.handle(.hello(protocol: 1))
        #expect(try await wire.next() == .hello(protocol: 1, kinds: ["test"], version: "1", queuesLoads: true))
        await dispatcher.handle(.configure(source: "s", options: [:]))
        #expect(try await wire.next() == .configured(source: "s"))
        await dispatcher.handle(load("s", id: 3))
        #expect(try await wire.next() == .started(id: 3))
        #expect(try await wire.next() == .newData(id: 3, source: "s", content: "done", etag: nil, lastModified: nil))
    }

    @Test func aPluginThatDoesNotQueueLoadsNeverSendsStarted() async throws {
        var wire = Wire()
        let dispatcher = PluginDispatcher(PluginDescription(kinds: ["test"], version: "1") { _ in StartingTwice() }, output: wire.output)
        await dispatcher.handle(.configure(source: "s", options: [:]))
        #expect(try await wire.next() == .configured(source: "s"))
        await dispatcher.handle(load("s", id: 3))
        #expect(try await wire.next() == .newData(id: 3, source: "s", content: "done", etag: nil, lastModified: nil))
    }

    @Test func badOptionsAreInvalidWithTheirPointers() async throws {
        var wire = Wire()
        let dispatcher = dispatcher(wire)
        await dispatcher.handle(.configure(source: "s", options: ["answr": "x", "answer": 3]))
        guard case .invalid("s", let errors) = try await wire.next() else {
            Issue.record("not invalid")
            return
        }
        #expect(errors.map(\.pointer.description) == ["/answr", "/answer"])
        #expect(errors.first?.message == #"unknown key "answr" in a test source (did you mean "answer"?)"#)
        await dispatcher.handle(load("s", id: 1))
        #expect(
            try await wire.next()
                == .error(id: 1, source: "s", error: SourceError(message: #"source "s" is not configured in this plugin"#, code: .notConfigured)))
    }

    @Test func aPushWaitsForTheAnswerToALoadOfItsSourceInFlightOnly() async throws {
        var wire = Wire()
        let made = Made()
        let gate = Gate()
        let dispatcher = dispatcher(wire, made: made) { setup in setup.id == "slow" ? Gated(gate: gate) as any PluginSource : Answering(setup) }
        for id in ["slow", "other"] {
            await dispatcher.handle(.configure(source: id, options: [:]))
            #expect(try await wire.next() == .configured(source: id))
        }
        await dispatcher.handle(load("slow", id: 1))
        // Computed before this push, the answer must not land on top of it: the push waits.
        await made["slow"]?.push.newData("pushed")
        await made["other"]?.push.error(SourceError(message: "other's own"))
        #expect(try await wire.next() == .pushedError(source: "other", error: SourceError(message: "other's own")))
        await gate.open(.newData("answered"))
        #expect(try await wire.next() == .newData(id: 1, source: "slow", content: "answered", etag: nil, lastModified: nil))
        #expect(try await wire.next() == .pushedData(source: "slow", content: "pushed"))
    }

    @Test func aCancelIsAnsweredAtOnceTheLoadSeesItAndItsLateAnswerIsDropped() async throws {
        var wire = Wire()
        let made = Made()
        let gate = Gate()
        let dispatcher = dispatcher(wire, made: made) { _ in Gated(gate: gate) }
        await dispatcher.handle(.configure(source: "s", options: [:]))
        #expect(try await wire.next() == .configured(source: "s"))
        await dispatcher.handle(load("s", id: 4))
        await made["s"]?.push.newData("held")
        await dispatcher.handle(.cancel(id: 4))
        #expect(try await wire.next() == .cancelled(id: 4))
        #expect(try await wire.next() == .pushedData(source: "s", content: "held"))
        #expect(await gate.sawCancellation())
        // What load 4 returned once cancelled is dropped: the next line is the next load's answer.
        await dispatcher.handle(load("s", id: 5))
        await gate.open(.notModified)
        #expect(try await wire.next() == .notModified(id: 5))
    }

    @Test func removeAndReconfigureStopTheOldSource() async throws {
        var wire = Wire()
        let stops = Counter()
        let dispatcher = dispatcher(wire) { setup in Answering(setup, stopped: { stops.add() }) }
        await dispatcher.handle(.configure(source: "s", options: ["answer": "a"]))
        await dispatcher.handle(.configure(source: "s", options: ["answer": "b"]))
        #expect(stops.value == 1)
        await dispatcher.handle(load("s", id: 1))
        #expect(try await wire.next() == .configured(source: "s"))
        #expect(try await wire.next() == .configured(source: "s"))
        #expect(try await wire.next() == .newData(id: 1, source: "s", content: "b", etag: "e", lastModified: nil))
        await dispatcher.handle(.remove(source: "s"))
        #expect(stops.value == 2)
        await dispatcher.handle(load("s", id: 2))
        guard case .error(2, "s", let error) = try await wire.next() else {
            Issue.record("a removed source answered")
            return
        }
        #expect(error.code == .notConfigured)
    }

    @Test func contentTooLargeForALineIsItsSourcesErrorAlone() async throws {
        var wire = Wire()
        // 3 MiB of NUL bytes grow to 18 MiB as JSON (`\u0000` each): over the 16 MiB line limit.
        let huge = JSONValue.string(String(repeating: "\0", count: 3 << 20))
        let dispatcher = dispatcher(wire) { setup in setup.id == "huge" ? Fixed(result: .newData(huge)) as any PluginSource : Answering(setup) }
        await dispatcher.handle(.configure(source: "huge", options: [:]))
        await dispatcher.handle(.configure(source: "small", options: ["answer": "fine"]))
        await dispatcher.handle(load("huge", id: 1))
        #expect(try await wire.next() == .configured(source: "huge"))
        #expect(try await wire.next() == .configured(source: "small"))
        guard case .error(1, "huge", let error) = try await wire.next() else {
            Issue.record("the huge answer was not replaced by an error")
            return
        }
        #expect(error.code == .tooLarge)
        let length = try #require(Int(error.message.split(separator: " ")[3]), "\(error.message)")
        #expect(length > 6 * (3 << 20))
        #expect(error.message == "the content is \(length) bytes once encoded as JSON, over the protocol's limit of 16777216 bytes for a line")
        await dispatcher.handle(load("small", id: 2))
        #expect(try await wire.next() == .newData(id: 2, source: "small", content: "fine", etag: "e", lastModified: nil))
    }

    @Test func tooManyProblemsForALineAreSummed() {
        let problems = (0..<3).map { OptionProblem(pointer: JSONPointer(tokens: ["k\($0)"]), message: String(repeating: "m", count: 2000)) }
        let replaced = PluginOutput.replacement(for: .invalid(source: "s", errors: problems), length: 20_000_000)
        guard case .invalid("s", let errors) = replaced else {
            Issue.record("not invalid: \(replaced)")
            return
        }
        #expect(errors.map(\.pointer.description) == ["/k0", ""])
        #expect(errors.first?.message.count == 1000)
        #expect(errors.last?.message == "3 problems in all, too long to list (20000000 bytes, over the protocol's limit of 16777216 bytes for a line)")
    }
}

/// Answers every load at once with its `answer` option.
private struct Answering: PluginSource {
    let answer: JSONValue
    let stopped: @Sendable () -> Void

    init(_ setup: SourceSetup, stopped: @escaping @Sendable () -> Void = {}) {
        answer = setup.options["answer"] ?? .null
        self.stopped = stopped
    }

    func load(_ request: PluginLoadRequest) async -> PluginLoadResult { .newData(answer, etag: "e") }
    func stop() async { stopped() }
}

private final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
}

/// Answers every load with the same result.
private struct Fixed: PluginSource {
    let result: PluginLoadResult
    func load(_ request: PluginLoadRequest) async -> PluginLoadResult { result }
}

/// Answers each load when the test opens the gate, and tells whether a load saw its cancellation.
private struct Gated: PluginSource {
    let gate: Gate
    func load(_ request: PluginLoadRequest) async -> PluginLoadResult { await gate.pass() }
}

private actor Gate {
    private var opened: [PluginLoadResult] = []
    private var waiting: CheckedContinuation<PluginLoadResult, Never>?
    private var cancelled = false
    private var cancellationSeen: CheckedContinuation<Void, Never>?

    func pass() async -> PluginLoadResult {
        if !opened.isEmpty { return opened.removeFirst() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { waiting = $0 }
        } onCancel: {
            Task { await self.cancel() }
        }
    }

    func open(_ result: PluginLoadResult) {
        if let waiting {
            self.waiting = nil
            waiting.resume(returning: result)
        } else {
            opened.append(result)
        }
    }

    /// A cancelled load ends at once, with whatever it has.
    private func cancel() {
        cancelled = true
        cancellationSeen?.resume()
        cancellationSeen = nil
        if let waiting {
            self.waiting = nil
            waiting.resume(returning: .error(SourceError(message: "cancelled", code: .cancelled)))
        }
    }

    func sawCancellation() async -> Bool {
        if !cancelled { await withCheckedContinuation { cancellationSeen = $0 } }
        return cancelled
    }
}
