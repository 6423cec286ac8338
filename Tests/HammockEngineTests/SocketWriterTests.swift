import Foundation
import Glibc
import HammockCore
import HammockJSON
import HammockSystem
import Synchronization
import Testing

@testable import HammockEngine
@testable import HammockLogging

/// `hammock serve`'s one writer for every client, over real Unix socket pairs: the interval that batches a
/// flood, the pass that serves every client at once, a client that reads nothing, one that hangs up.
@Suite("SocketWriter: one thread writes to every client", .timeLimit(.minutes(1)))
struct SocketWriterTests {
    /// Broken on purpose (the interval ignored in `Client.takeBatch`), each client read a line per change
    /// (about 300) and this failed.
    @Test("a flood to two clients is written at most once per interval to each, the newest state last")
    func floodIsBatchedForEveryClient() async throws {
        try await Fixture.with(interval: .milliseconds(20)) { fixture in
            let clients = try (0..<2).map { _ in try fixture.connect() }
            let started = ContinuousClock.now
            for round in 0..<300 {
                for client in clients { client.output.send(.source(id: "s", event: .newData(.number(.init(round)), origin: .push), state: Self.state(round))) }
                try await Task.sleep(for: .milliseconds(1))
            }
            let took = ContinuousClock.now - started
            let bound = Int(took / .milliseconds(20)) + 2
            for client in clients {
                try await waitFor("the newest state") { client.peer.text.contains(#""content":299"#) }
                #expect(client.peer.lineCount <= bound, "\(client.peer.lineCount) lines in \(took), at most \(bound)")
                #expect(client.peer.lineCount >= 2)
            }
        }
    }

    @Test("a line after a quiet spell goes at once; one within the interval waits for it, or for finish")
    func quietLineGoesAtOnce() async throws {
        try await Fixture.with(interval: .seconds(3600)) { fixture in
            let client = try fixture.connect()
            // Within `waitFor`'s 10 s, not the hour: the interval holds back only lines that follow a write.
            client.output.send(.source(id: "a", event: .newData(1, origin: .push), state: Self.state(1)))
            try await waitFor("the first line, at once") { client.peer.lineCount == 1 }
            client.output.send(.source(id: "b", event: .newData(2, origin: .push), state: Self.state(2)))
            try await Task.sleep(for: .milliseconds(100))
            #expect(client.peer.lineCount == 1, "the second line waits out the interval")
            // The stop does not wait for the hour: what waits is written now, then the client is complete.
            #expect(await client.output.finish(with: .bye(reason: .signal, failed: nil), deadline: .seconds(5)) == .complete)
            // Sent is not yet read: the peer's thread takes it a moment later.
            try await waitFor("b, then bye, numbered per client") {
                client.peer.text.contains(#""id":"b""#) && client.peer.text.contains(#""type":"bye","seq":3"#)
            }
        }
    }

    /// A writer that waited for the stuck client (a blocking send) would hold every other client until the
    /// stall timeout, an hour here; `waitFor` gives each round 10 s.
    @Test("a client that reads nothing never holds the writer: another is served all along")
    func stuckClientHoldsNobody() async throws {
        try await Fixture.with(interval: .milliseconds(5), stallTimeout: .seconds(3600)) { fixture in
            let stuck = try fixture.connect(reading: false)
            let reader = try fixture.connect()
            // More than the socket's buffers hold: the send cannot finish, and the rest waits in its buffer.
            Self.sendBig(to: stuck)
            for round in 0..<20 {
                reader.output.send(.source(id: "s", event: .newData(.number(.init(round)), origin: .push), state: Self.state(round)))
                try await waitFor("round \(round)") { reader.peer.text.contains(#""content":\#(round),"#) }
                // The stuck client's newer states coalesce in its queue meanwhile.
                stuck.output.send(.source(id: "s", event: .newData(.number(.init(round)), origin: .push), state: Self.state(round)))
            }
            #expect(stuck.closedCount == 0 && reader.closedCount == 0)
        }
    }

    /// Broken on purpose (the stall check removed from `Client.ending`), the reader-less client was never
    /// dropped and this failed.
    @Test("a client that takes none of its waiting bytes for the stall timeout is dropped, and told once")
    func stalledClientIsDropped() async throws {
        try await Fixture.with(interval: .milliseconds(5), stallTimeout: .milliseconds(300)) { fixture in
            let stuck = try fixture.connect(reading: false)
            let reader = try fixture.connect()
            Self.sendBig(to: stuck)
            try await waitFor("the stuck client dropped") { stuck.closedCount == 1 }
            #expect(await stuck.output.ending() == .stalled)
            reader.output.send(.source(id: "s", event: .newData(1, origin: .push), state: Self.state(1)))
            try await waitFor("the reader's line") { reader.peer.lineCount == 1 }
            #expect(stuck.closedCount == 1 && reader.closedCount == 0)
        }
    }

    private static func sendBig(to client: Fixture.Client) {
        let big = String(repeating: "x", count: 4 << 20)
        client.output.send(.source(id: "big", event: .newData(.string(big), origin: .push), state: SourceState(content: .string(big))))
    }

    /// Found while building the writer: the thread noticed a client's hang-up before its owner had told the
    /// engine the client came, and the engine, told it left before it joined, kept it for ever (a descriptor
    /// leaked per such client). Broken on purpose (`isStarted` ignored), this failed.
    @Test("a client that hangs up is gone, told once, and never before its output runs")
    func hangUpIsToldOnceAfterStart() async throws {
        try await Fixture.with(interval: .milliseconds(5)) { fixture in
            let client = try fixture.connect(start: false)
            client.peer.hangUp()
            // Another client's line wakes the thread, which then looks at every client.
            let other = try fixture.connect()
            other.output.send(.source(id: "s", event: .newData(1, origin: .push), state: Self.state(1)))
            try await waitFor("the other client's line") { other.peer.lineCount == 1 }
            try await Task.sleep(for: .milliseconds(100))
            #expect(client.closedCount == 0, "told the client went before its output ran")
            client.start()
            try await waitFor("the hang-up told") { client.closedCount == 1 }
            #expect(await client.output.ending() == .gone)
            #expect(await client.output.finish(with: nil, deadline: .seconds(1)) == .incomplete(unwritten: 0))
            try await Task.sleep(for: .milliseconds(50))
            #expect(client.closedCount == 1)
        }
    }

    @Test("interruptAll ends a finish that waits for a client that does not read")
    func interruptEndsFinish() async throws {
        try await Fixture.with(interval: .milliseconds(5)) { fixture in
            let stuck = try fixture.connect(reading: false)
            Self.sendBig(to: stuck)
            let writer = fixture.writer
            Task {
                try await Task.sleep(for: .milliseconds(200))
                writer.interruptAll()
            }
            // Were the writer to block in a send to the stuck client, it would never see the interrupt: the
            // hang-up, later, ends that send, and the ending is then not `interrupted`.
            Task {
                try await Task.sleep(for: .seconds(10))
                stuck.peer.hangUp()
            }
            // Well before the 30 s deadline: the suite's minute would end first.
            #expect(await stuck.output.finish(with: .bye(reason: .signal, failed: nil), deadline: .seconds(30)) == .interrupted)
        }
    }

    /// The path of every change a shared engine fans out: one `publish` a turn for all clients. Broken on
    /// purpose (a joining client's cursor left at 0), the late client read a state older than its snapshot.
    @Test("published states reach each client by its subscription, a joiner none from before it joined, an ack after them")
    func publishedStatesReachSubscribers() async throws {
        try await Fixture.with(interval: .milliseconds(5)) { fixture in
            let everything = try fixture.connect()
            let onlyB = try fixture.connect()
            everything.output.joined(.everything)
            onlyB.output.joined(Subscription(sources: ["b"], views: []))
            for round in 0..<50 {
                fixture.writer.publish([
                    .source(id: "a", event: .newData(.number(.init(round)), origin: .push), state: Self.state(round)),
                    .source(id: "b", event: .newData(.number(.init(round)), origin: .push), state: Self.state(round)),
                ])
            }
            // An answer to one client follows the states published before it.
            everything.output.send(.ack(id: .string("x")))
            try await waitFor("the ack") { everything.peer.text.contains(#""type":"ack""#) }
            let lines = everything.peer.text.split(separator: "\n")
            let ack = try #require(lines.firstIndex { $0.contains(#""type":"ack""#) })
            #expect(lines[..<ack].contains { $0.contains(#""id":"a""#) && $0.contains(#""content":49,"#) }, "\(lines)")
            #expect(lines[..<ack].contains { $0.contains(#""id":"b""#) && $0.contains(#""content":49,"#) }, "\(lines)")
            try await waitFor("b's newest for its subscriber") { onlyB.peer.text.contains(#""content":49,"#) }
            #expect(!onlyB.peer.text.contains(#""id":"a""#), "a reached b's subscriber: \(onlyB.peer.text)")
            // Coalesced: 50 changes of each source are a handful of lines, not 100.
            #expect(everything.peer.lineCount < 30, "\(everything.peer.lineCount) lines")

        }
    }

    /// Without the thread, so that no pass hands the log out between the steps. Broken on purpose (a
    /// joining client's cursor left at 0), the late client was given a state older than its snapshot.
    @Test("a client that joins reads what is published after, none of what came before (its snapshot has it)")
    func joinerReadsOnlyWhatComesAfter() {
        let writer = SocketWriter(limits: .init(minimumWriteInterval: .zero, stallTimeout: .seconds(30)), secrets: Secrets())
        let early = writer.add(ConsumerID(rawValue: 1), descriptor: -1, bar: nil, reportProblem: { _ in }) {}
        let late = writer.add(ConsumerID(rawValue: 2), descriptor: -1, bar: nil, reportProblem: { _ in }) {}
        early.joined(.everything)
        writer.publish([.source(id: "a", event: .newData(100, origin: .push), state: Self.state(100))])
        late.joined(.everything)
        writer.publish([.source(id: "b", event: .newData(101, origin: .push), state: Self.state(101))])
        func ids(_ lines: [OutputLine]) -> [String] {
            lines.compactMap { if case .source(let id, _, _) = $0 { id.rawValue } else { nil } }
        }
        #expect(ids(writer.takeWaiting(late.id)) == ["b"])
        #expect(ids(writer.takeWaiting(early.id)) == ["a", "b"])
        late.left()
        writer.publish([.source(id: "a", event: .newData(102, origin: .push), state: Self.state(102))])
        #expect(writer.takeWaiting(late.id).isEmpty, "a client that left reads no more")
        #expect(ids(writer.takeWaiting(early.id)) == ["a"])
    }

    static func state(_ round: Int) -> SourceState {
        SourceState(content: .number(.init(round)), timestamp: Timestamp(millisecondsSince1970: 0))
    }
}

/// A running `SocketWriter` and the clients a test connects to it.
final class Fixture: Sendable {
    let writer: SocketWriter
    private let nextID = Atomic<Int>(0)
    private let clients = Mutex<[Client]>([])

    init(interval: Duration, stallTimeout: Duration) {
        writer = SocketWriter(limits: .init(minimumWriteInterval: interval, stallTimeout: stallTimeout), secrets: Secrets())
    }

    static func with(
        interval: Duration, stallTimeout: Duration = .seconds(30), _ body: (Fixture) async throws -> Void
    ) async throws {
        let fixture = Fixture(interval: interval, stallTimeout: stallTimeout)
        let running = Task { await fixture.writer.run() }
        do {
            try await body(fixture)
        } catch {
            await fixture.end()
            await running.value
            throw error
        }
        await fixture.end()
        await running.value
    }

    /// A socket pair: the writer's end as a client, the other end read (or not) by a `Peer`.
    func connect(reading: Bool = true, start: Bool = true) throws -> Client {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0 else { throw POSIXError(.EMFILE) }
        let id = ConsumerID(rawValue: nextID.add(1, ordering: .relaxed).newValue)
        let closed = Counter()
        let output = writer.add(id, descriptor: ends[0], bar: nil, reportProblem: { _ in }) { closed.add() }
        let client = Client(output: output, descriptor: ends[0], peer: Peer(descriptor: ends[1], reading: reading), closed: closed)
        clients.withLock { $0.append(client) }
        if start { client.start() }
        return client
    }

    /// Hangs every peer up (a send blocked on one, were the writer to block, fails then), finishes every
    /// client, stops the writer, closes every descriptor.
    func end() async {
        let clients = clients.withLock { $0 }
        for client in clients { client.peer.hangUp() }
        for client in clients {
            _ = await client.output.finish(with: nil, deadline: .milliseconds(100))
            client.output.remove()
            close(client.descriptor)
        }
        writer.stop()
    }

    final class Client: Sendable {
        let output: SocketClientOutput
        let descriptor: Int32
        let peer: Peer
        private let closed: Counter
        private let running = Mutex<Task<Void, Never>?>(nil)

        init(output: SocketClientOutput, descriptor: Int32, peer: Peer, closed: Counter) {
            self.output = output
            self.descriptor = descriptor
            self.peer = peer
            self.closed = closed
        }

        var closedCount: Int { closed.value }

        /// As `SocketClients` does once the engine has been told of the client.
        func start() {
            let output = output
            running.withLock { $0 = Task { await output.run() } }
        }
    }
}

/// The client's end of a socket pair, read on a thread of its own into memory (or left unread).
final class Peer: Sendable {
    private let descriptor: Int32
    private let received = Mutex<[UInt8]>([])
    private let isStopped = Atomic<Bool>(false)

    init(descriptor: Int32, reading: Bool) {
        self.descriptor = descriptor
        guard reading else { return }
        OwnThread.start(named: "test.peer") { [self] in
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while !isStopped.load(ordering: .relaxed) {
                var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&watched, 1, 50) > 0 else { continue }
                let count = read(descriptor, &chunk, chunk.count)
                guard count > 0 else { return }
                received.withLock { $0 += chunk[..<count] }
            }
        }
    }

    var text: String { String(decoding: received.withLock { $0 }, as: UTF8.self) }
    var lineCount: Int { received.withLock { $0.count { $0 == 0x0a } } }

    /// Closes this end: the writer's side sees the client hang up.
    func hangUp() {
        isStopped.store(true, ordering: .relaxed)
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

}
