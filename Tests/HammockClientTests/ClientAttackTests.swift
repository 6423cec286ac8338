import Foundation
import HammockCore
import HammockJSON
import HammockSystem
import HammockTestSupport
import Synchronization
import Testing

@testable import HammockClient

/// The client as a hostile or unlucky app (or engine) would use it: dead engines, floods of calls, readers
/// that never read, and an "engine" that writes what it likes.
@Suite("The client under attack")
struct ClientAttackTests {
    // MARK: SIGPIPE

    /// SIGPIPE's handler as the process has it now.
    static func brokenPipeHandler() -> Int {
        var current = sigaction()
        sigaction(SIGPIPE, nil, &current)
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self)
    }

    static let defaultHandler = unsafeBitCast(SIG_DFL, to: Int.self)

    /// Whether SIGPIPE's disposition is still the default, or was changed by someone other than the client.
    /// SwiftNIO ignores SIGPIPE for the whole process when it makes its first socket (`HammockRESTTests`' server
    /// runs in this process in a whole-suite run), always after its event-loop threads (`NIO-SGLTN-…`, `NIO-ELT-…`) exist: an
    /// ignored SIGPIPE with no such thread is the client's doing. (Run alone, these tests check it strictly.) With
    /// SIGPIPE ignored, a write that let the signal through goes unseen here: `ClientSignalTests` checks that in a
    /// process of its own (`hammock-client-probe`), where nothing else touches SIGPIPE.
    static func brokenPipeLeftAlone() -> Bool {
        if brokenPipeHandler() == defaultHandler { return true }
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return threads.contains { thread in
            let name = try? String(contentsOfFile: "/proc/self/task/\(thread)/comm", encoding: .utf8)
            return name?.hasPrefix("NIO-") == true
        }
    }

    @Test("a control call after the engine was SIGKILLed throws engineExited; SIGPIPE's disposition untouched")
    func callAfterKill() async throws {
        #expect(Self.brokenPipeLeftAlone(), "SIGPIPE was ignored before the test, and not by NIO")
        try await withClientEngine(config: fakeConfig) { hammock, _ in
            #expect(Self.brokenPipeLeftAlone(), "launching changed SIGPIPE's disposition")
            let greeting = await hammock.source("greeting", as: Greeting.self)
            _ = try await first("greeting's content", in: greeting.contents)
            kill(try #require(hammock.processIdentifier), SIGKILL)
            // Calls racing the engine's death: some are written to a pipe nobody reads any more.
            let errors = await withTaskGroup(of: (any Error)?.self) { group in
                for index in 0..<50 {
                    group.addTask {
                        do {
                            try await greeting.override(Greeting(text: "after the kill", count: index))
                            return nil
                        } catch { return error }
                    }
                }
                return await group.reduce(into: [(any Error)?]()) { $0.append($1) }
            }
            for case let error? in errors {
                guard case .engineExited(.signaled(SIGKILL), _)? = error as? HammockError else {
                    Issue.record("a racing call ended with \(error), not engineExited by SIGKILL")
                    continue
                }
            }
            let late = await #expect(throws: HammockError.self) { try await greeting.load() }
            guard case .engineExited(.signaled(SIGKILL), _)? = late else {
                Issue.record("a call after the end threw \(String(describing: late))")
                return
            }
        }
        #expect(Self.brokenPipeLeftAlone())
    }

    @Test("attached: a control line written to a closed stdin neither kills the app nor hangs the call")
    func writeToClosedStdin() async throws {
        let engine = try FakeEngine()
        let hammock = try Hammock(attachingTo: engine.clientInput, output: engine.clientOutput)
        engine.closeStdin()
        let call = Task { try await hammock.snapshot() }
        // Whenever the write runs, it runs before the pipe's close at the end: it always meets EPIPE.
        try await Task.sleep(for: .milliseconds(200))
        engine.closeStdout()
        let error = await #expect(throws: HammockError.self) { try await call.value }
        #expect(error == .engineExited(status: .unknown, stderrTail: ""))
        #expect(Self.brokenPipeLeftAlone())
    }

    @Test("attached without a process id: stop() after the output ended does not raise SIGPIPE")
    func stopAfterOutputEnded() async throws {
        let engine = try FakeEngine()
        let hammock = try Hammock(attachingTo: engine.clientInput, output: engine.clientOutput)
        engine.closeStdout()
        #expect(try await hammock.waitUntilEnded(timeout: .seconds(30)) == .engineExited(status: .unknown, stderrTail: ""))
        // The reading has ended and closed its end of the pipe `stop()` writes to.
        await hammock.stop()
        await hammock.stop()
        #expect(Self.brokenPipeLeftAlone())
    }

    // MARK: Floods of calls

    @Test("500 concurrent loads and overrides each return on their own ack")
    func concurrentCalls() async throws {
        try await withClientEngine(config: fakeConfig) { hammock, _ in
            let greeting = await hammock.source("greeting", as: Greeting.self)
            let numbers = await hammock.source("numbers")
            _ = try await first("greeting's content", in: greeting.contents)
            let done = try await withDeadline(.seconds(60), "500 concurrent calls") {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<500 {
                        group.addTask {
                            switch index % 3 {
                            case 0: try await greeting.override(Greeting(text: "flood", count: index))
                            case 1: try await numbers.load()
                            default: try await greeting.loadIfNeeded()
                            }
                            return 1
                        }
                    }
                    return try await group.reduce(0, +)
                }
            }
            #expect(done == 500)
            // The client still works after the flood.
            try await greeting.override(Greeting(text: "after", count: -1))
            #expect(greeting.state.content == Greeting(text: "after", count: -1))
        }
    }

    @Test("calls racing stop() all end: acknowledged, stopped or engineExited; later calls throw stopped")
    func callsRacingStop() async throws {
        try await withClientEngine(config: fakeConfig) { hammock, _ in
            let greeting = await hammock.source("greeting", as: Greeting.self)
            _ = try await first("greeting's content", in: greeting.contents)
            let outcomes = try await withDeadline(.seconds(60), "calls racing stop()") {
                await withTaskGroup(of: String.self) { group in
                    for index in 0..<300 {
                        group.addTask {
                            do {
                                try await greeting.override(Greeting(text: "race", count: index))
                                return "ack"
                            } catch HammockError.stopped {
                                return "stopped"
                            } catch HammockError.engineExited {
                                return "engineExited"
                            } catch {
                                return "unexpected: \(error)"
                            }
                        }
                        if index == 150 { group.addTask { await hammock.stop(); return "stop" } }
                    }
                    return await group.reduce(into: [String]()) { $0.append($1) }
                }
            }
            #expect(outcomes.count == 301)
            #expect(outcomes.filter { $0.hasPrefix("unexpected") } == [])
            await #expect(throws: HammockError.stopped) { try await greeting.load() }
        }
    }

    // MARK: Readers

    @Test("a states stream nobody reads keeps only the newest state; readers who leave are let go")
    func unreadStreamAndComingAndGoing() async throws {
        try await withClientEngine(config: fakeConfig) { hammock, _ in
            let greeting = await hammock.source("greeting", as: Greeting.self)
            _ = try await first("greeting's content", in: greeting.contents)
            let unread = greeting.states
            for count in 0..<300 { try await greeting.override(Greeting(text: "unread", count: count)) }
            // No backlog: the first read is the newest state, and nothing older follows it.
            var iterator = unread.makeAsyncIterator()
            #expect(try await iterator.next()?.content?.count == 299)
            try await greeting.override(Greeting(text: "next", count: 300))
            #expect(try await iterator.next()?.content?.count == 300)

            let baseline = greeting.output.readerCount
            for _ in 0..<500 {
                for try await _ in greeting.states { break }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<200 { group.addTask { for try await _ in greeting.states { break } } }
                try await group.waitForAll()
            }
            // A stream made and dropped unread goes too.
            for _ in 0..<200 { _ = greeting.states }
            #expect(greeting.output.readerCount == baseline)
            withExtendedLifetime(iterator) {}
        }
    }

    // MARK: A hostile engine

    @Test(
        "attached: a line that is not hammock's ends everything with protocolViolation saying what",
        arguments: [
            ("this is not json", "not JSON"),
            ("[1, 2, 3]", "not a JSON object"),
            (#"{"seq": 1}"#, "without a \"type\""),
            (#"{"type": "source", "state": {}}"#, "\"source\" line without the fields"),
            (#"{"type": "ack"}"#, "\"ack\" line without the fields"),
            (String(repeating: "[", count: 100_000), "not JSON"),
        ])
    func garbageLine(line: String, problem: String) async throws {
        let engine = try FakeEngine()
        let hammock = try Hammock(attachingTo: engine.clientInput, output: engine.clientOutput)
        let source = await hammock.source("a")
        let call = Task { try await hammock.snapshot() }
        try engine.write(#"{"type":"hello","sources":["a"],"views":[]}"# + "\n" + line + "\n")
        let error = try await withDeadline(.seconds(10), "the end of the states") { await drain(source.states) }
        guard case .protocolViolation(let message)? = error as? HammockError else {
            Issue.record("the stream ended with \(String(describing: error)), not protocolViolation")
            return
        }
        #expect(message.contains(problem), "\(message)")
        // The pending call is not left waiting for an ack that will never be read.
        await #expect(throws: HammockError.protocolViolation(message)) { try await call.value }
        await hammock.stop()
        engine.closeStdout()
    }

    @Test("attached: unknown line types and fields, and acks for ids never sent, are passed over; a 20 MB line is read")
    func toleratedLines() async throws {
        let engine = try FakeEngine()
        let hammock = try Hammock(attachingTo: engine.clientInput, output: engine.clientOutput)
        let source = await hammock.source("a", as: String.self)
        let big = String(repeating: "x", count: 20 << 20)
        let writer = Thread {
            try? engine.write(
                #"{"type":"hello","sources":["a"],"views":[]}"# + "\n"
                    + #"{"type":"fromTheFuture","id":"a","state":42}"# + "\n"
                    + #"{"type":"ack","id":987654}"# + "\n" + #"{"type":"ack","id":"not ours"}"# + "\n"
                    + #"{"type":"error","message":"not ours","id":123456}"# + "\n"
                    + #"{"type":"source","id":"a","fromTheFuture":{"x":1},"state":{"content":"\#(big)","failures":1e400,"alsoNew":[1]}}"#
                    + "\n")
        }
        writer.start()
        let state = try await first("the 20 MB content", in: source.states, timeout: .seconds(60)) {
            $0.content != nil
        }
        #expect(state.content?.utf8.count == 20 << 20)
        #expect(state.failures == 0)
        // A real call is answered by its own id.
        let call = Task { try await hammock.snapshot() }
        let id = try await engine.readControlID()
        try engine.write(#"{"type":"ack","id":\#(id)}"# + "\n")
        try await withDeadline(.seconds(10), "the acknowledged snapshot") { try await call.value }
        await hammock.stop()
        engine.closeStdout()
    }

    @Test("launching a binary that is not hammock fails with protocolViolation, not a wait for a hello")
    func launchNotHammock() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let script = directory + "/hammock"
        try "#!/bin/sh\necho $$ > pid\necho \"usage: something else\"\nexec sleep 297\n".write(
            toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        let error = try await withDeadline(.seconds(20), "the launch") { () async -> (any Error)? in
            do {
                _ = try await Hammock.launch(configuration: "nothing.yaml", binary: script, workingDirectory: directory)
                return nil
            } catch { return error }
        }
        guard case .protocolViolation(let message)? = error as? HammockError else {
            Issue.record("the launch ended with \(String(describing: error)), not protocolViolation")
            return
        }
        #expect(message.contains("usage: something else"), "\(message)")
        // And it does not run on, unseen.
        let written = try String(contentsOfFile: directory + "/pid", encoding: .utf8)
        let pid = try #require(Int32(written.trimmingCharacters(in: .whitespacesAndNewlines)))
        let deadline = ContinuousClock.now + .seconds(10)
        while kill(pid, 0) == 0, ProcessTable.entry(pid)?.state != "Z", ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(kill(pid, 0) != 0 || ProcessTable.entry(pid)?.state == "Z", "the launched binary still runs")
    }

    @Test("attached: a call the engine never answers ends when its task is cancelled")
    func unansweredCallCancelled() async throws {
        let engine = try FakeEngine()
        let hammock = try Hammock(attachingTo: engine.clientInput, output: engine.clientOutput)
        let call = Task { try await hammock.snapshot() }
        _ = try await engine.readControlID()
        call.cancel()
        await #expect(throws: CancellationError.self) {
            try await withDeadline(.seconds(10), "the cancelled call") { try await call.value }
        }
        await hammock.stop()
        engine.closeStdout()
    }

    @Test("attached: an engine cut off in the middle of a line ends with engineExited, not a protocol error")
    func cutOffMidLine() async throws {
        let engine = try FakeEngine(errors: true)
        let hammock = try Hammock(
            attachingTo: engine.clientInput, output: engine.clientOutput, errors: engine.clientErrors)
        let source = await hammock.source("a")
        try engine.write(#"{"type":"hello","sources":["a"],"views":[]}"# + "\n" + #"{"type":"source","id":"a","sta"#)
        engine.writeErrors("killed while writing\n")
        engine.closeStdout()
        let error = try await withDeadline(.seconds(10), "the end of the states") { await drain(source.states) }
        #expect(error as? HammockError == .engineExited(status: .unknown, stderrTail: "killed while writing"))
    }

    // MARK: Decoding

    @Test("content of the wrong shape is decodingFailed naming the path, never a trap")
    func hostileContent() async throws {
        struct Outer: Decodable, Sendable { var inner: Greeting }
        try await withClientEngine(config: fakeConfig) { hammock, _ in
            let greeting = await hammock.source("greeting", as: Greeting.self)
            let outer = await hammock.source("greeting", as: Outer.self)
            let raw = await hammock.source("greeting")
            _ = try await first("greeting's content", in: greeting.contents)

            let cases: [(JSONValue, String, String)] = [
                (try JSONValue(parsing: Array(#"{"text":"big","count":1e30}"#.utf8)), "count", "greeting"),
                (try JSONValue(parsing: Array(#"{"text":"big","count":123456789012345678901234567890}"#.utf8)),
                 "count", "greeting"),
                (try JSONValue(parsing: Array(#"{"text":5,"count":"three"}"#.utf8)), "text", "greeting"),
                (try JSONValue(parsing: Array(#"{"inner":{"text":"x","count":1.5}}"#.utf8)), "\"inner/count\"", "outer"),
                (.array([]), "the content", "greeting"),
            ]
            for (content, path, which) in cases {
                try await greeting.override(json: content)
                let state = which == "outer" ? outer.state.latestError : greeting.state.latestError
                #expect(state?.code == LoadError.decodingFailed, "\(content)")
                #expect(state?.message.contains(path) == true, "\(state?.message ?? "no error") for \(content)")
                #expect(raw.state.content != nil)
            }

            // Nesting as deep as the engine passes on, decoded into a type that does not expect it.
            var deep = JSONValue.array([])
            for _ in 0..<500 { deep = .array([deep]) }
            try await greeting.override(json: deep)
            #expect(greeting.state.latestError?.code == LoadError.decodingFailed)
            #expect(raw.state.content == deep)
        }
    }
}

// MARK: - Helpers

/// Runs `body`, failing with `what` if it has not returned within `timeout` (a hang is a failure, not a
/// stuck test run).
func withDeadline<Result: Sendable>(
    _ timeout: Duration, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Result?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next() ?? nil else {
            throw ClientTestFailure("\(what) did not end within \(timeout)", sourceLocation)
        }
        return result
    }
}

/// The other ends of the pipes an attached client reads and writes: the test is the engine.
final class FakeEngine: Sendable {
    /// The client's ends, handed to `Hammock(attachingTo:…)`, which owns them.
    let clientInput: Int32
    let clientOutput: Int32
    let clientErrors: Int32?
    /// The test's ends.
    private let stdin: Mutex<Int32?>
    private let stdout: Mutex<Int32?>
    private let stderr: Int32?

    init(errors: Bool = false) throws {
        func makePipe() throws -> (read: Int32, write: Int32) {
            var descriptors: [Int32] = [-1, -1]
            guard pipe(&descriptors) == 0 else { throw ClientTestFailure("no pipe", #_sourceLocation) }
            for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
            return (descriptors[0], descriptors[1])
        }
        let input = try makePipe()
        let output = try makePipe()
        let errorPipe = try errors ? makePipe() : nil
        clientInput = input.write
        clientOutput = output.read
        clientErrors = errorPipe?.read
        stdin = Mutex(input.read)
        stdout = Mutex(output.write)
        stderr = errorPipe?.write
    }

    /// Writes `text` on the client's stdout, blocking while the pipe is full.
    func write(_ text: String) throws {
        try stdout.withLock { descriptor in
            guard let descriptor else { throw ClientTestFailure("stdout is closed", #_sourceLocation) }
            do {
                try Descriptor.writeAllWithoutBrokenPipeSignal(Array(text.utf8), to: descriptor)
            } catch {
                throw ClientTestFailure("write failed: \(error)", #_sourceLocation)
            }
        }
    }

    func writeErrors(_ text: String) {
        guard let stderr else { return }
        try? Descriptor.writeAllWithoutBrokenPipeSignal(Array(text.utf8), to: stderr)
        close(stderr)
    }

    /// Reads the next control line the client wrote and returns its `id`; throws after `timeout`.
    ///
    /// On a thread of its own: the client writes the line from a task, and a `read` blocking one of the
    /// cooperative pool's two threads here (with the other one blocked elsewhere by another test) left no
    /// thread to run that task: a whole-suite run hung for good in this read.
    func readControlID(timeout: Duration = .seconds(60)) async throws -> Int {
        let line = await OwnThread.run(named: "test.control") { [self] () -> [UInt8]? in
            stdin.withLock { descriptor -> [UInt8]? in
                guard let descriptor else { return nil }
                let deadline = ContinuousClock.now + timeout
                var line: [UInt8] = []
                var byte: UInt8 = 0
                while true {
                    var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                    let left = deadline - ContinuousClock.now
                    guard left > .zero else { return nil }
                    guard poll(&ready, 1, Int32(left / .milliseconds(1)) + 1) > 0 else { continue }
                    guard Glibc.read(descriptor, &byte, 1) == 1 else { return nil }
                    if byte == UInt8(ascii: "\n") { return line }
                    line.append(byte)
                }
            }
        }
        guard let line else {
            throw ClientTestFailure("no control line from the client within \(timeout) (or its stdin is closed)", #_sourceLocation)
        }
        guard let id = try JSONValue(parsing: line)["id"]?.numberValue?.intValue else {
            throw ClientTestFailure("a control line without an id: \(String(decoding: line, as: UTF8.self))", #_sourceLocation)
        }
        return id
    }

    /// Closes the end the client writes control lines to: its next write fails (EPIPE).
    func closeStdin() {
        stdin.withLock { descriptor in
            if let open = descriptor { close(open) }
            descriptor = nil
        }
    }

    /// Closes the client's stdout: the end of the engine's output.
    func closeStdout() {
        stdout.withLock { descriptor in
            if let open = descriptor { close(open) }
            descriptor = nil
        }
    }

    deinit {
        closeStdin()
        closeStdout()
    }
}
