import Foundation
import HammockCore
import HammockJSON
import HammockSystem
import Synchronization
import Testing

@testable import HammockEngine
@testable import HammockLogging

/// stdout's writer over an in-memory pipe: what a slow, absent or leaving consumer does to it, in
/// milliseconds rather than the seconds a real process and pipe take.
@Suite(.timeLimit(.minutes(1)))
struct OutputWriterTests {
    @Test("a consumer that does not read costs one waiting line per source, and gets each source's newest state")
    func slowConsumerKeepsBacklogBounded() async throws {
        let output = MemoryOutput(capacity: 2048)
        let writer = Harness(output)
        let sources = (0..<20).map { "s\($0)" }
        for round in 0..<5000 {
            for id in sources { writer.send(.source(id: SourceID(id), event: .newData(.number(.init(round)), origin: .load), state: state(round))) }
        }
        // The first lines fill the pipe and the writer blocks; what arrives meanwhile waits, one per source.
        #expect(writer.writer.waitingCount <= sources.count)
        let reading = output.readEverythingInBackground()
        #expect(await writer.finish(with: .bye(reason: .signal, failed: nil), deadline: nil) == .complete)
        output.stopReading()
        let lines = try await reading.value.lines()
        #expect(lines.count < 1000)
        var newest: [String: Int] = [:]
        for line in lines where line["type"] == .string("source") {
            guard case .string(let id) = line["id"], case .number(let content) = line["state"]?["content"] else { continue }
            newest[id] = Int(content.description)
        }
        #expect(newest == Dictionary(uniqueKeysWithValues: sources.map { ($0, 4999) }))
        #expect(lines.last?["type"] == .string("bye"))
        #expect(lines.map(\.seq) == Array(1...lines.count))
    }

    @Test("a wipe and the new request of the same turn both reach a reader that keeps up, the wipe first")
    func wipeReachesAPromptReader() async throws {
        let output = MemoryOutput(capacity: 4096)
        let writer = Harness(output)
        let reading = output.readEverythingInBackground()
        // As the engine sends a source whose request changed: one turn, one hand-over, so the lines wait
        // together before the writer wakes.
        writer.writer.send(contentsOf: [
            .source(id: "user", event: .newData(.null, origin: .wipe), state: SourceState()),
            .source(id: "user", event: .requested, state: SourceState(isLoading: true)),
        ])
        #expect(await writer.finish(with: nil, deadline: nil) == .complete)
        output.stopReading()
        let lines = try await reading.value.lines()
        #expect(lines.map { $0["event"] } == [.string("newData"), .string("requested")])
        #expect(lines.first?["origin"] == .string("wipe"))
    }

    @Test("a consumer that does not read holds at most a wipe and a state per source, and reads the newest wipe before the newest state")
    func wipesWaitBesideStates() async throws {
        let output = MemoryOutput(capacity: 512, atomicWrite: 512)
        let writer = Harness(output)
        writer.send(.error(message: String(repeating: "x", count: 400)))
        writer.send(.error(message: String(repeating: "y", count: 400)))
        try await output.waitUntilWriterBlocks()
        let sources = (0..<10).map { "s\($0)" }
        for round in 0..<500 {
            for id in sources {
                writer.writer.send(contentsOf: [
                    .source(id: SourceID(id), event: .newData(.number(.init(round)), origin: .load), state: state(round)),
                    .source(id: SourceID(id), event: .newData(.null, origin: .wipe), state: SourceState()),
                    .source(id: SourceID(id), event: .requested, state: SourceState(isLoading: true)),
                ])
            }
        }
        #expect(writer.writer.waitingCount <= 2 * sources.count)
        let reading = output.readEverythingInBackground()
        #expect(await writer.finish(with: nil, deadline: nil) == .complete)
        output.stopReading()
        let lines = try await reading.value.lines()
        for id in sources {
            let events = lines.filter { $0["id"] == .string(id) }.map { $0["origin"] ?? $0["event"] ?? .null }
            #expect(events == [.string("wipe"), .string("requested")], "\(id): \(events)")
        }
    }

    @Test("error lines beyond the limit are dropped while stdout is not read, and one line says how many")
    func errorLinesAreCapped() async throws {
        let output = MemoryOutput(capacity: 512, atomicWrite: 512)
        let writer = Harness(output)
        writer.send(.error(message: String(repeating: "x", count: 400)))
        writer.send(.error(message: String(repeating: "y", count: 400)))
        try await output.waitUntilWriterBlocks()
        for index in 0..<5000 { writer.send(.error(message: "bad line \(index)")) }
        #expect(writer.writer.waitingCount == OutputWriter.maximumWaitingUncoalescedLines)
        let reading = output.readEverythingInBackground()
        #expect(await writer.finish(with: nil, deadline: nil) == .complete)
        output.stopReading()
        let messages = try await reading.value.lines().compactMap { line -> String? in
            if case .string(let message) = line["message"] { message } else { nil }
        }
        #expect(messages.filter { $0.hasPrefix("bad line") }.count == OutputWriter.maximumWaitingUncoalescedLines)
        #expect(messages.contains("4000 error lines were dropped because stdout was not read"))
    }

    @Test("answers to control lines with an id are never dropped; past the limit stdin's reader waits until the writer has taken them")
    func answersAreKeptAndTheReaderWaitsForRoom() async throws {
        let output = MemoryOutput(capacity: 512, atomicWrite: 512)
        let writer = Harness(output)
        writer.send(.error(message: String(repeating: "x", count: 400)))
        writer.send(.error(message: String(repeating: "y", count: 400)))
        try await output.waitUntilWriterBlocks()
        writer.writer.waitForRoomForAnswers()  // room: returns at once
        for index in 0..<1500 { writer.send(index.isMultiple(of: 2) ? .ack(id: .number(.init(index))) : .error(message: "no", id: .number(.init(index)))) }
        #expect(writer.writer.waitingCount == 1500)
        let waited = Mutex(false)
        let reader = Task {
            await OwnThread.run(named: "test.stdin") { [writer] in
                writer.writer.waitForRoomForAnswers()
                waited.withLock { $0 = true }
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(!waited.withLock { $0 }, "no room while 1,500 answers wait")
        let reading = output.readEverythingInBackground()
        await reader.value
        #expect(await writer.finish(with: nil, deadline: nil) == .complete)
        output.stopReading()
        let ids = try await reading.value.lines().compactMap { line -> Int? in
            if case .number(let id) = line["id"] { Int(id.description) } else { nil }
        }
        #expect(ids == Array(0..<1500))
    }

    @Test("a consumer that closes its end while nothing is written is noticed at once, and only once")
    func idleConsumerThatLeavesIsNoticed() async throws {
        let output = MemoryOutput(capacity: 4096)
        let writer = Harness(output)
        writer.send(.hello(sources: ["a"], views: [], version: "test"))
        output.close()
        try await writer.waitUntilClosedIsReported()
        writer.send(.error(message: "after the consumer left"))
        #expect(await writer.finish(with: .bye(reason: .stdoutClosed, failed: nil), deadline: .seconds(2)) != .complete)
        #expect(writer.closedReports == 1)
    }

    @Test("a consumer that closes in the middle of a long line: the writer stops, counts it unwritten and tells once")
    func consumerLeavesMidLine() async throws {
        let output = MemoryOutput(capacity: 1024, maximumCapacity: 1024, atomicWrite: 256)
        let writer = Harness(output)
        writer.send(.error(message: String(repeating: "z", count: 5000)))
        let part = try await output.read(atLeast: 512)
        #expect(!part.contains(UInt8(ascii: "\n")))
        output.close()
        try await writer.waitUntilClosedIsReported()
        #expect(await writer.finish(with: nil, deadline: nil) == .incomplete(unwritten: 1))
        #expect(writer.closedReports == 1)
    }

    @Test("stopped while the consumer does not read, what was written ends at a line's end, long lines included")
    func linesAreNeverCut() async throws {
        let output = MemoryOutput(capacity: 1024, maximumCapacity: 1 << 16, atomicWrite: 256)
        let writer = Harness(output)
        var sizes = [10, 300, 3000, 50, 200, 9000, 20, 255, 256, 257, 1000]
        sizes += sizes.reversed()
        for (index, size) in sizes.enumerated() {
            writer.send(.error(message: "\(index):" + String(repeating: "m", count: size)))
        }
        // The consumer reads a little, in odd pieces, then stops.
        var read: [UInt8] = []
        for piece in [7, 100, 333, 1500] { read += try await output.read(atLeast: piece) }
        let completion = await writer.finish(with: .bye(reason: .signal, failed: nil), deadline: .milliseconds(100))
        guard case .incomplete(let unwritten) = completion else {
            Issue.record("the consumer stopped reading, yet \(completion)")
            return
        }
        read += output.takeUnread()
        #expect(read.last == UInt8(ascii: "\n"))
        let lines = try read.lines()
        // The writer counts the lines it had not begun; those of its batch behind the one it was writing
        // are not all counted, so this is a lower bound.
        #expect(unwritten > 0)
        #expect(lines.count < sizes.count + 1)
        #expect(lines.map(\.seq) == Array(1...lines.count))
    }

    @Test("continuous mode gives up on a consumer that does not read after the drain time")
    func drainTimeout() async {
        let output = MemoryOutput(capacity: 256)
        let writer = Harness(output)
        for index in 0..<50 { writer.send(.error(message: "line \(index) " + String(repeating: "w", count: 100))) }
        let started = ContinuousClock.now
        let completion = await writer.finish(with: .bye(reason: .signal, failed: nil), deadline: .milliseconds(200))
        #expect(ContinuousClock.now - started >= .milliseconds(200))
        #expect(ContinuousClock.now - started < .seconds(20))
        guard case .incomplete(let unwritten) = completion else {
            Issue.record("nobody read, yet \(completion)")
            return
        }
        #expect(unwritten > 0)
    }

    @Test("--once: complete when the consumer reads it all, bye last")
    func onceComplete() async throws {
        let output = MemoryOutput(capacity: 300)
        let writer = Harness(output)
        for index in 0..<200 { writer.send(.error(message: "line \(index)")) }
        let reading = output.readEverythingInBackground(pausingFirst: .milliseconds(50))
        #expect(await writer.finish(with: .bye(reason: .once, failed: []), deadline: nil) == .complete)
        output.stopReading()
        let lines = try await reading.value.lines()
        #expect(lines.count == 201)
        #expect(lines.last?["type"] == .string("bye"))
    }

    @Test("--once: incomplete when the consumer leaves before bye")
    func onceIncomplete() async throws {
        let output = MemoryOutput(capacity: 300)
        let writer = Harness(output)
        for index in 0..<200 { writer.send(.error(message: "line \(index)")) }
        async let completion = writer.finish(with: .bye(reason: .once, failed: []), deadline: nil)
        _ = try await output.read(atLeast: 100)
        output.close()
        guard case .incomplete(let unwritten) = await completion else {
            Issue.record("the consumer left early, yet the writer says it wrote everything")
            return
        }
        #expect(unwritten > 0)
    }

    @Test("--once: interrupt() ends the wait for a consumer that does not read")
    func onceInterrupted() async throws {
        let output = MemoryOutput(capacity: 300)
        let writer = Harness(output)
        for index in 0..<200 { writer.send(.error(message: "line \(index)")) }
        try await output.waitUntilWriterBlocks()
        async let completion = writer.finish(with: .bye(reason: .once, failed: []), deadline: nil)
        writer.writer.interrupt()
        #expect(await completion == .interrupted)
    }

    private func state(_ round: Int) -> SourceState {
        var state = SourceState()
        state.apply(.newData(.number(.init(round)), origin: .load), at: Timestamp(millisecondsSince1970: 0), otherLoadsInFlight: false)
        return state
    }
}

/// An `OutputWriter` over a `MemoryOutput`, with `run()` going and the closed-consumer reports counted.
private final class Harness: Sendable {
    let writer: OutputWriter
    private let reports = Counter()
    private let running: Task<Void, Never>

    init(_ output: MemoryOutput) {
        let reports = reports
        writer = OutputWriter(transport: output, secrets: Secrets()) { reports.add() }
        running = Task { [writer] in await writer.run() }
    }

    var closedReports: Int { reports.value }

    func send(_ line: OutputLine) { writer.send(line) }

    /// Finishes, and checks that `run()` returns after it.
    func finish(with last: OutputLine?, deadline: Duration?) async -> OutputWriter.Completion {
        let completion = await writer.finish(with: last, deadline: deadline)
        await running.value
        return completion
    }

    func waitUntilClosedIsReported() async throws {
        try await waitFor("the writer to report the closed consumer") { closedReports > 0 }
    }
}

final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// Waits for `condition`, checking every 2 ms, until 10 s have passed and it has been checked 2,000 times.
///
/// Both, not the time alone: at the start of a whole-suite run the cooperative pool (two threads here) has
/// a long queue, and what the condition waits for (a writer's `run()` started from a task) may not have
/// had its turn in 10 s of wall time. A clean-clone CI run failed that way, every such wait at 26 s. The
/// checks count only the turns this wait had; a real hang still ends here, or at the suite's time limit.
func waitFor(_ what: String, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    var checks = 0
    while !condition() {
        checks += 1
        guard ContinuousClock.now < deadline || checks < 2000 else { throw Timeout(what: what) }
        try await Task.sleep(for: .milliseconds(2))
    }
}

struct Timeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// An in-memory pipe with the semantics the writer relies on: writes of at most `atomicWrite` bytes go in
/// whole or wait, longer ones go in as room frees up, `waitForRoom` can grow the room up to a maximum
/// (as `F_SETPIPE_SZ` can), and a write after the consumer closed fails.
///
/// `@unchecked Sendable`: a test double of a blocking pipe, its state guarded by `condition`, on which the
/// writer's thread blocks as it would in `write(2)`.
final class MemoryOutput: OutputTransport, @unchecked Sendable {
    let atomicWrite: Int
    let knowsUnreadBytes = true
    private let maximumCapacity: Int
    private let condition = NSCondition()
    private var capacity: Int
    private var unread: [UInt8] = []
    private var isClosed = false
    private var isWatchStopped = false
    /// The writer is blocked in a write that does not fit.
    private var isWriterBlocked = false
    private var isReaderStopped = false

    init(capacity: Int, maximumCapacity: Int? = nil, atomicWrite: Int = 128) {
        // As on a pipe, an atomic write always fits an empty one.
        precondition(capacity >= atomicWrite)
        self.capacity = capacity
        self.maximumCapacity = maximumCapacity ?? capacity
        self.atomicWrite = atomicWrite
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Int? {
        condition.lock()
        defer { condition.unlock() }
        while !isClosed {
            let room = capacity - unread.count
            let count = bytes.count <= atomicWrite ? (room >= bytes.count ? bytes.count : 0) : min(room, bytes.count)
            if count > 0 {
                isWriterBlocked = false
                unread += bytes[0..<count]
                condition.broadcast()
                return count
            }
            isWriterBlocked = true
            condition.broadcast()
            condition.wait()
        }
        isWriterBlocked = false
        return nil
    }

    func waitForRoom(_ count: Int, stop: () -> Bool) -> Bool {
        condition.lock()
        capacity = max(capacity, min(count, maximumCapacity))
        condition.unlock()
        while true {
            condition.lock()
            let (fits, closed) = (unread.isEmpty || capacity - unread.count >= count, isClosed)
            if !fits && !closed { _ = condition.wait(until: Date().addingTimeInterval(0.002)) }
            condition.unlock()
            if closed { return false }
            if fits { return true }
            if stop() { return false }
        }
    }

    func waitForClosedConsumer() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !isClosed && !isWatchStopped { condition.wait() }
        return isClosed
    }

    func stopWatching() {
        condition.lock()
        isWatchStopped = true
        condition.broadcast()
        condition.unlock()
    }

    // MARK: The consumer's end

    func close() {
        condition.lock()
        isClosed = true
        condition.broadcast()
        condition.unlock()
    }

    /// What the consumer has not read yet; the pipe is empty after.
    func takeUnread() -> [UInt8] {
        condition.lock()
        defer { condition.unlock() }
        defer {
            unread.removeAll()
            condition.broadcast()
        }
        return unread
    }

    /// Reads at least `count` bytes (and whatever else waits), as a consumer's `read` in a loop would.
    func read(atLeast count: Int) async throws -> [UInt8] {
        var read: [UInt8] = []
        try await waitFor("\(count) bytes of output") {
            read += takeUnread()
            return read.count >= count
        }
        return read
    }

    func waitUntilWriterBlocks() async throws {
        try await waitFor("the writer to block on a full pipe") {
            condition.lock()
            defer { condition.unlock() }
            return isWriterBlocked
        }
    }

    /// Reads everything, in the background, until `stopReading()`.
    func readEverythingInBackground(pausingFirst pause: Duration = .zero) -> Task<[UInt8], any Error> {
        Task { [self] in
            try await Task.sleep(for: pause)
            // It blocks as a consumer's read does: on a thread of its own, not the cooperative pool's.
            return await OwnThread.run(named: "test.consumer") { [self] in readUntilStopped() }
        }
    }

    private func readUntilStopped() -> [UInt8] {
            var read: [UInt8] = []
            while true {
                condition.lock()
                while unread.isEmpty && !isReaderStopped { condition.wait() }
                let stopped = isReaderStopped
                condition.unlock()
                read += takeUnread()
                if stopped { return read }
            }
    }

    /// Ends `readEverythingInBackground` once it has taken what is left.
    func stopReading() {
        condition.lock()
        isReaderStopped = true
        condition.broadcast()
        condition.unlock()
    }
}

extension [UInt8] {
    /// Each line as JSON; throws on a line that is not whole JSON.
    func lines() throws -> [JSONValue] {
        try split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).map { try JSONValue(parsing: $0) }
    }
}

extension JSONValue {
    var seq: Int {
        if case .number(let number) = self["seq"] { Int(number.description) ?? -1 } else { -1 }
    }
}
