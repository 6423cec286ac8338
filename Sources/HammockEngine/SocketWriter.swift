import Glibc
import HammockCore
import HammockLogging
import HammockRendering
import HammockSystem

/// Writes to every client of `hammock serve` from one thread (`hammock.clients.out`), over non-blocking
/// sends and one `poll`.
///
/// Each client has its own queue (`OutputQueue`: coalesced per id while it is slow) and its own encoding
/// (`LineEncoding`: its `seq`, or its bar), as `OutputWriter` gives stdout; what they share is the thread,
/// and the `ChangeLog`: the state lines every subscriber reads (`publish`) are handed over once a turn, and
/// each client takes its share (by its subscription) when the thread next passes, coalesced by then. A
/// line for one client alone (its `hello`, snapshot, answers) goes to its queue after its share of the log,
/// so an `ack` still follows the states its op caused.
/// A writer thread per client cost a timed wake-up and a context switch per client per write, and the
/// engine a futex wake per client per change: 100 clients of a fast source spent most of their CPU there
/// (perf, `benchmarks/run fanout`). Here a change that finds the thread asleep wakes it once for everyone;
/// it writes to every client whose lines wait and whose `minimumWriteInterval` has passed, in one pass, so
/// clients that join at any moment fall into step and a pass serves them all.
///
/// A client that does not read never blocks the thread: its bytes wait in its own buffer (the send is
/// `MSG_DONTWAIT`) while its newer lines coalesce in its queue, and once it has taken nothing for
/// `stallTimeout` with bytes waiting it is dropped. A client that hangs up (`POLLHUP`, `POLLERR`) or whose
/// send fails is gone; either way the engine is told (`onClosed`) once.
///
/// State the engine's tasks, the clients' reader threads and the thread share is a `Shared` in a
/// `LockedCondition` (the readers wait on it for room for answers); what only the thread touches (the
/// descriptor's bytes in flight, the encodings, the times) it keeps in locals. The thread is the only one
/// that ends a client, after its last use of the descriptor, so a `finish` that returns leaves the
/// descriptor to its owner to close.
final class SocketWriter: Sendable {
    struct Limits: Sendable {
        /// Lines that come sooner than this after a client's last write wait for the next pass, in one batch.
        var minimumWriteInterval: Duration
        /// A client that takes none of the bytes waiting for it for this long is dropped.
        var stallTimeout: Duration
    }

    /// How the thread ended a client.
    enum Ending: Sendable, Equatable {
        /// `finish`: every line was written.
        case complete
        /// `finish`'s deadline passed (or `interrupt`) with this many lines not written.
        case incomplete(unwritten: Int, interrupted: Bool)
        /// The client hung up, or a send failed.
        case gone
        /// The client took nothing for `stallTimeout`.
        case stalled
    }

    /// A class, reached only with the lock held: the engine's hot path updates its queue in place, where a
    /// struct in the dictionary would be copied, with all it holds, at each read.
    private final class Client {
        let descriptor: Int32
        var queue = OutputQueue()
        /// The bar the client reads, until the thread takes it into its encoding.
        var bar: BarEncoder?
        var reloadedViews: [ViewDefinition]?
        /// What the client reads of the log (`joined`); nil before it joined and after it left.
        var subscription: Subscription?
        /// How far into the log the client has read.
        var cursor = 0
        /// `run` has begun: the engine has been told of the client, so the thread may write to it and say it
        /// went. Lines queue before.
        var isStarted = false
        /// Lines that come now are dropped: `finish` has begun, or the client is gone.
        var isClosing = false
        /// `finish`'s deadline: after it, nothing more is begun.
        var stopAt: MonotonicInstant?
        var isInterrupted = false
        /// When this client may next be written to (its last write and the interval), as the thread last set it.
        var writableAt = MonotonicInstant(milliseconds: 0)
        var ending: Ending?
        var waiters: [CheckedContinuation<Ending, Never>] = []
        var onClosed: (@Sendable () -> Void)?
        let reportProblem: @Sendable (String) -> Void

        init(
            descriptor: Int32, bar: BarEncoder?, onClosed: @escaping @Sendable () -> Void,
            reportProblem: @escaping @Sendable (String) -> Void
        ) {
            self.descriptor = descriptor
            self.bar = bar
            self.onClosed = onClosed
            self.reportProblem = reportProblem
        }

        /// Queues the client's share of what the log holds after its cursor.
        func catchUp(_ log: ChangeLog) {
            guard let subscription, !isClosing, cursor < log.head else { return }
            log.forEach(after: cursor) { if subscription.takes($0) { _ = queue.enqueue($0, metrics: nil) } }
            cursor = log.head
        }

        /// What waits, when it is due at `now` (`refresh`: a bar's render for `ago` is due): then the client
        /// may next be written to an `interval` later.
        func takeBatch(now: MonotonicInstant, refresh: Bool, interval: Duration) -> Batch? {
            if let stopAt, now >= stopAt { return nil }
            guard !queue.isEmpty || refresh else { return nil }
            guard isClosing || now + SocketWriter.step >= writableAt else { return nil }
            defer {
                reloadedViews = nil
                writableAt = now + interval
            }
            return Batch(
                lines: queue.takeAll(reader: "this connection"), reloaded: reloadedViews, refresh: refresh,
                reportProblem: reportProblem)
        }

        /// The thread is done with the client: who waits for it is told `ending`; returns them, and what to
        /// tell the engine when the client went.
        func end(_ ending: Ending) -> (waiters: [CheckedContinuation<Ending, Never>], onClosed: (@Sendable () -> Void)?) {
            self.ending = ending
            isClosing = true
            _ = queue.discard()
            defer {
                onClosed = nil
                waiters = []
            }
            return (waiters, ending == .gone || ending == .stalled ? onClosed : nil)
        }

        /// How the client ends now, if it does, given how its connection stands.
        func ending(_ connection: Connection, now: MonotonicInstant, stallTimeout: Duration) -> Ending? {
            if connection.isGone { return .gone }
            if let since = connection.blockedSince, now - since >= stallTimeout { return .stalled }
            let unwritten = queue.count + connection.lines
            if isInterrupted { return .incomplete(unwritten: unwritten, interrupted: true) }
            guard isClosing else { return nil }
            if queue.isEmpty && connection.isFlushed { return .complete }
            if let stopAt, now >= stopAt { return .incomplete(unwritten: unwritten, interrupted: false) }
            return nil
        }
    }

    private struct Shared {
        var clients: [ConsumerID: Client] = [:]
        var log = ChangeLog()
        /// Clients that read the log.
        var joinedCount = 0
        /// The soonest a joined client whose bytes are all out may be written to, as the thread last saw.
        var earliestWritable: MonotonicInstant?
        /// The thread waits in `poll` until `sleepsUntil` (nil: until woken): a client whose lines are due
        /// sooner must wake it.
        var isAsleep = false
        var sleepsUntil: MonotonicInstant?
        var isStopping = false

        /// Whether something due at `instant` must wake the thread: it sleeps, and would wake later. Clears
        /// `isAsleep`, so that what comes before the thread's next pass wakes it no more.
        mutating func takeWake(dueAt instant: MonotonicInstant) -> Bool {
            guard isAsleep, sleepsUntil.map({ instant < $0 }) ?? true else { return false }
            isAsleep = false
            return true
        }

        /// `client` reads no more of the log: it left, or is finishing, or ended.
        mutating func unsubscribe(_ client: Client) {
            guard client.subscription != nil else { return }
            client.subscription = nil
            joinedCount -= 1
        }
    }

    private let shared = LockedCondition(Shared())
    private let wakeup = WakeupPipe()
    private let limits: Limits
    private let secrets: Secrets

    /// Lines due this close to a pass go in it: clients stay in step instead of each waking the thread a
    /// millisecond apart.
    static let step: Duration = .milliseconds(2)
    /// A client's buffer of bytes in flight keeps at most this much room once drained (a bar's batch is well
    /// under it): a snapshot of a large configuration does not stay allocated for each idle client.
    static let keptBufferCapacity = 8 << 10

    init(limits: Limits, secrets: Secrets) {
        self.limits = limits
        self.secrets = secrets
    }

    // MARK: - The engine's side

    /// Adds a client on `descriptor` (a connected stream socket, left blocking for its reader): its lines
    /// are `bar`'s text, or the protocol's when nil. `onClosed` is told once if the client goes.
    func add(
        _ id: ConsumerID, descriptor: Int32, bar: BarEncoder?, reportProblem: @escaping @Sendable (String) -> Void,
        onClosed: @escaping @Sendable () -> Void
    ) -> SocketClientOutput {
        shared.withLock { state in
            state.clients[id] = Client(descriptor: descriptor, bar: bar, onClosed: onClosed, reportProblem: reportProblem)
        }
        return SocketClientOutput(id: id, writer: self)
    }

    /// The lines of one turn that every client whose subscription takes them reads (`OutputLine
    /// .isRoutedBySubscription`): kept once, taken by each client at the thread's next pass.
    func publish(_ lines: [OutputLine]) {
        let wake = shared.withLock { state -> Bool in
            guard state.joinedCount > 0 else { return false }  // nobody to read them
            let wasEmpty = state.log.isEmpty
            for line in lines { state.log.append(line) }
            // Only the turn that finds the thread asleep and a client due before it would wake wakes it.
            guard wasEmpty, let earliest = state.earliestWritable else { return false }
            return state.takeWake(dueAt: earliest)
        }
        if wake { wakeup.wake() }
    }

    /// The engine took the client in: from here on it reads its share of what is published (not what came
    /// before, which its snapshot holds).
    fileprivate func joined(_ id: ConsumerID, _ subscription: Subscription) {
        shared.withLock { state in
            guard let client = state.clients[id], client.subscription == nil, !client.isClosing else { return }
            client.subscription = subscription
            client.cursor = state.log.head
            state.joinedCount += 1
            // What is published next may be due for this client before the thread would wake.
            state.earliestWritable = min(state.earliestWritable ?? client.writableAt, client.writableAt)
        }
    }

    /// Takes what waits for a client, its share of the log included: for tests, with the thread not running.
    func takeWaiting(_ id: ConsumerID) -> [OutputLine] {
        shared.withLock { state in
            guard let client = state.clients[id] else { return [] }
            client.catchUp(state.log)
            return client.queue.takeAll(reader: "this connection")
        }
    }

    /// The engine let the client go: it reads nothing more of the log.
    fileprivate func left(_ id: ConsumerID) {
        shared.withLock { state in
            if let client = state.clients[id] { state.unsubscribe(client) }
        }
    }

    fileprivate func send(_ lines: [OutputLine], to id: ConsumerID) {
        let wake = shared.withLock { state -> Bool in
            guard let client = state.clients[id], !client.isClosing else { return false }
            // After the states published before: an answer follows what its op changed.
            client.catchUp(state.log)
            let wasEmpty = client.queue.isEmpty
            var queued = false
            for line in lines where client.queue.enqueue(line, metrics: nil) { queued = true }
            // Only lines that make the thread's sleep too long wake it: the first of a quiet client's, due
            // before the thread would wake anyway.
            guard queued, wasEmpty else { return false }
            return state.takeWake(dueAt: client.writableAt)
        }
        if wake { wakeup.wake() }
    }

    fileprivate func viewsReloaded(_ views: [ViewDefinition], for id: ConsumerID) {
        shared.withLock { $0.clients[id]?.reloadedViews = views }
    }

    fileprivate func waitForRoomForAnswers(_ id: ConsumerID) {
        shared.withLock(when: { state in
            guard let client = state.clients[id] else { return true }
            return client.queue.hasRoomForAnswers || client.isClosing
        }) { _ in }
    }

    /// Queues `last`, then waits until the thread has written what waits, the deadline passed, `interrupt`
    /// came or the client went; the thread is then done with the descriptor.
    fileprivate func finish(_ id: ConsumerID, with last: OutputLine?, deadline: Duration?) async -> Ending {
        if let last { send([last], to: id) }
        let stopAt = deadline.map { MonotonicInstant.current + $0 }
        shared.withLock { state in
            guard let client = state.clients[id] else { return }
            // What was published before the stop (its `bye`) is the client's last.
            client.catchUp(state.log)
            state.unsubscribe(client)
            client.isClosing = true
            client.stopAt = stopAt
        }
        wakeup.wake()
        return await ending(of: id)
    }

    /// The engine has been told of the client: the thread writes to it from now on, and tells `onClosed`
    /// when it goes (never before the engine knows it came).
    fileprivate func start(_ id: ConsumerID) {
        shared.withLock { $0.clients[id]?.isStarted = true }
        wakeup.wake()
    }

    /// Waits until the thread has ended the client.
    fileprivate func ending(of id: ConsumerID) async -> Ending {
        await withCheckedContinuation { continuation in
            let ending = shared.withLock { state -> Ending? in
                guard let client = state.clients[id] else { return .gone }
                if let ending = client.ending { return ending }
                client.waiters.append(continuation)
                return nil
            }
            if let ending { continuation.resume(returning: ending) }
        }
    }

    /// Forgets a client the thread has ended (its owner is done with it).
    fileprivate func remove(_ id: ConsumerID) {
        shared.withLock { state in
            if state.clients[id]?.ending != nil { state.clients[id] = nil }
        }
    }

    fileprivate func interrupt(_ id: ConsumerID) {
        shared.withLock { $0.clients[id]?.isInterrupted = true }
        wakeup.wake()
    }

    /// Ends every client's `finish` at once (a second stop signal).
    func interruptAll() {
        shared.withLock { state in
            for id in state.clients.keys { state.clients[id]?.isInterrupted = true }
        }
        wakeup.wake()
    }

    // MARK: - The thread

    /// Writes until `stop()` and every client is ended.
    func run() async {
        // The wake-up pipe stays open: a late `interruptAll` must never write to a number a close freed.
        await OwnThread.run(named: "hammock.clients.out") { [self] in writeLoop() }
    }

    /// Once every client has been ended, the thread returns.
    func stop() {
        shared.withLock { $0.isStopping = true }
        wakeup.wake()
    }

    /// What only the thread touches, per client.
    private struct Connection {
        let descriptor: Int32
        var encoding: LineEncoding
        /// Encoded bytes not yet taken by the client, from `sent` on, holding `lines` lines.
        var bytes: [UInt8] = []
        var sent = 0
        var lines = 0
        /// Since when the client has taken none of `bytes`.
        var blockedSince: MonotonicInstant?
        var isGone = false

        var isFlushed: Bool { sent == bytes.count }
    }

    private struct Batch {
        let lines: [OutputLine]
        let reloaded: [ViewDefinition]?
        let refresh: Bool
        let reportProblem: @Sendable (String) -> Void
    }

    private func writeLoop() {
        var connections: [ConsumerID: Connection] = [:]
        var ends: [Int] = []
        var watched: [pollfd] = []
        var watchedIDs: [ConsumerID] = []
        while true {
            let now = MonotonicInstant.current
            // Take what is due, for every client whose bytes are all out.
            var batches: [(id: ConsumerID, batch: Batch)] = []
            let isStopping = shared.withLock { state -> Bool in
                state.isAsleep = false
                if !state.log.isEmpty {
                    for client in state.clients.values { client.catchUp(state.log) }
                    state.log.removeAll()
                }
                for (id, client) in state.clients where client.ending == nil && client.isStarted {
                    if connections[id] == nil {
                        connections[id] = Connection(descriptor: client.descriptor, encoding: LineEncoding(bar: client.bar))
                        client.bar = nil
                    }
                    guard let connection = connections[id], connection.isFlushed, !connection.isGone else { continue }
                    let refresh = connection.encoding.isRefreshDue
                    if let batch = client.takeBatch(now: now, refresh: refresh, interval: limits.minimumWriteInterval) {
                        batches.append((id, batch))
                    }
                }
                return state.isStopping
            }
            // Readers waiting for room for answers may go on.
            if !batches.isEmpty { shared.broadcast() }

            let redactor = secrets.redactor
            for (id, batch) in batches {
                guard var connection = connections[id] else { continue }
                connection.bytes.removeAll(keepingCapacity: true)
                connection.sent = 0
                ends.removeAll(keepingCapacity: true)
                connection.encoding.encode(
                    batch.lines, reloaded: batch.reloaded, refresh: batch.refresh, redactor: redactor,
                    into: &connection.bytes, ends: &ends, report: batch.reportProblem)
                connection.lines = ends.count
                connections[id] = connection
            }

            // Send what each client will take now.
            for id in connections.keys {
                guard !connections[id]!.isFlushed, !connections[id]!.isGone else { continue }
                Self.sendSome(&connections[id]!, now: now)
            }

            // End who is done, gone or out of time; then sleep until the next thing due.
            let later = MonotonicInstant.current
            var resumes: [(CheckedContinuation<Ending, Never>, Ending)] = []
            var closed: [@Sendable () -> Void] = []
            let sleep = shared.withLock { state -> (until: MonotonicInstant?, isDone: Bool) in
                var until: MonotonicInstant?
                func due(_ instant: MonotonicInstant) { until = min(until ?? instant, instant) }
                var ended: [ConsumerID] = []
                for (id, connection) in connections {
                    guard let client = state.clients[id] else {
                        ended.append(id)
                        continue
                    }
                    if let ending = client.ending(connection, now: later, stallTimeout: limits.stallTimeout) {
                        // The thread's last use of the descriptor was above.
                        ended.append(id)
                        let (waiters, onClosed) = client.end(ending)
                        state.unsubscribe(client)
                        resumes += waiters.map { ($0, ending) }
                        if let onClosed { closed.append(onClosed) }
                        continue
                    }
                    if !connection.isFlushed {
                        due((connection.blockedSince ?? later) + limits.stallTimeout)
                    } else if !client.queue.isEmpty {
                        due(max(later, client.writableAt))
                    }
                    if let refresh = connection.encoding.nextRefresh { due(refresh) }
                    if client.isClosing, let stopAt = client.stopAt { due(stopAt) }
                }
                for id in ended { connections[id] = nil }
                // New clients, and those ended but not yet removed by their owners.
                for (id, client) in state.clients where client.ending == nil && client.isStarted && connections[id] == nil {
                    due(later)
                }
                // Who may take what is published next: the joined clients, but those whose bytes wait (their
                // `POLLOUT` wakes the thread).
                var earliestWritable: MonotonicInstant?
                for (id, client) in state.clients where client.subscription != nil && client.ending == nil {
                    if let connection = connections[id], !connection.isFlushed { continue }
                    earliestWritable = min(earliestWritable ?? client.writableAt, client.writableAt)
                }
                state.earliestWritable = earliestWritable
                // Published during this pass, after its share was taken: the next pass hands it out. (Once
                // `isAsleep` is set, `publish` wakes the thread itself.)
                if !state.log.isEmpty, let earliestWritable { due(max(later, earliestWritable)) }
                state.isAsleep = true
                state.sleepsUntil = until
                return (until, state.isStopping && state.clients.values.allSatisfy { $0.ending != nil })
            }
            for (continuation, ending) in resumes { continuation.resume(returning: ending) }
            for onClosed in closed { onClosed() }
            if !resumes.isEmpty { shared.broadcast() }  // readers waiting for room: their client is closing
            if sleep.isDone && isStopping { return }

            watched.removeAll(keepingCapacity: true)
            watchedIDs.removeAll(keepingCapacity: true)
            watched.append(pollfd(fd: wakeup.readEnd, events: Int16(POLLIN), revents: 0))
            for (id, connection) in connections {
                // No events asked: poll still says POLLHUP (the client closed its end) and POLLERR.
                let events = connection.isFlushed ? 0 : Int16(POLLOUT)
                watched.append(pollfd(fd: connection.descriptor, events: events, revents: 0))
                watchedIDs.append(id)
            }
            let timeout = sleep.until.map { Int32(clamping: max(0, ($0 - MonotonicInstant.current).milliseconds)) } ?? -1
            let ready = poll(&watched, nfds_t(watched.count), timeout)
            if ready <= 0 { continue }
            if watched[0].revents != 0 { wakeup.drain() }
            for (index, id) in watchedIDs.enumerated() {
                let revents = watched[index + 1].revents
                // A socket whose client shut both ways: gone, though bytes may wait to be sent (they cannot be).
                if revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { connections[id]?.isGone = true }
            }
        }
    }

    /// Sends as much of the connection's bytes as the client takes without blocking.
    private static func sendSome(_ connection: inout Connection, now: MonotonicInstant) {
        let progressed = connection.bytes.withUnsafeBytes { bytes -> Bool? in
            var progressed = false
            while connection.sent < bytes.count {
                let sent = Glibc.send(
                    connection.descriptor, bytes.baseAddress! + connection.sent, bytes.count - connection.sent,
                    Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
                if sent > 0 {
                    connection.sent += sent
                    progressed = true
                    continue
                }
                if sent < 0 && errno == EINTR { continue }
                if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return progressed }
                return nil  // EPIPE, ECONNRESET: gone
            }
            return progressed
        }
        guard let progressed else {
            connection.isGone = true
            return
        }
        if connection.isFlushed {
            connection.lines = 0
            connection.bytes.removeAll(keepingCapacity: connection.bytes.capacity <= keptBufferCapacity)
            connection.sent = 0
            connection.blockedSince = nil
        } else if progressed || connection.blockedSince == nil {
            connection.blockedSince = now
        }
    }
}

/// One client's side of `SocketWriter`, as the engine sees its output.
final class SocketClientOutput: EngineOutput {
    let id: ConsumerID
    private let writer: SocketWriter

    fileprivate init(id: ConsumerID, writer: SocketWriter) {
        self.id = id
        self.writer = writer
    }

    func send(_ line: OutputLine) { writer.send([line], to: id) }
    func send(contentsOf lines: [OutputLine]) {
        guard !lines.isEmpty else { return }
        writer.send(lines, to: id)
    }

    /// Writes to the client until the writer has ended it (it finished, went, or stalled). Called once the
    /// engine has been told of the client.
    func run() async {
        writer.start(id)
        _ = await writer.ending(of: id)
    }

    func finish(with last: OutputLine?, deadline: Duration?) async -> OutputWriter.Completion {
        switch await writer.finish(id, with: last, deadline: deadline) {
        case .complete: .complete
        case .incomplete(_, interrupted: true): .interrupted
        case .incomplete(let unwritten, interrupted: false): .incomplete(unwritten: unwritten)
        case .gone, .stalled: .incomplete(unwritten: 0)
        }
    }

    /// How the writer ended this client; only once `run` has returned.
    func ending() async -> SocketWriter.Ending { await writer.ending(of: id) }

    /// The owner is done with the client: the writer forgets it.
    func remove() { writer.remove(id) }

    func interrupt() { writer.interrupt(id) }
    func joined(_ subscription: Subscription) { writer.joined(id, subscription) }
    func left() { writer.left(id) }
    func pause() {}  // a client that wants fewer lines subscribes to fewer
    func resume() {}
    func viewsReloaded(_ views: [ViewDefinition]) { writer.viewsReloaded(views, for: id) }
    func waitForRoomForAnswers() { writer.waitForRoomForAnswers(id) }
    func resized() {}
}
