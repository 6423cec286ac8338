import FoundationEssentials
import Glibc
import HammockCore
import HammockLogging
import HammockRendering
import HammockSystem
import Logging
import Synchronization

/// `hammock serve`'s clients: the connections to its Unix socket, each a `Consumer` of the engine.
///
/// Threads, per the engine's one model (docs/architecture.md): one `hammock.accept` thread waits in `accept`;
/// one `hammock.clients.out` thread writes to every client (`SocketWriter`: non-blocking sends, so a client
/// that does not read blocks nobody); each connection has a reader thread (`hammock.client`, its control
/// lines, as stdin's reader does for `run`). The connection's task (a child of `run`'s group) owns its
/// descriptor and closes it once the reader and the writer are done with it.
///
/// Bounds: at most `maximumClients` at once (one more is told why and closed); a first line within
/// `subscribeWindow` or none; a control line of at most `ControlMailbox.maximumLineLength` bytes (a longer
/// one gets its client an `error` and a close: unlike stdin, a socket has no reason to send one, and skipping
/// it to its newline would keep a thread reading for as long as the client sends); a client that takes
/// nothing for `stallTimeout` while bytes wait for it is dropped (`SocketWriter`).
final class SocketClients: ClientListener {
    struct Limits: Sendable {
        var maximumClients = 256
        /// How long a new connection may take to send its `subscribe` line; one that says nothing in time
        /// reads everything.
        var subscribeWindow: Duration = .milliseconds(100)
        /// A client that reads nothing for this long, while a write to it waits, is dropped.
        var stallTimeout: Duration = .seconds(30)
        /// How long a dropped or refused client's last lines may take to go out.
        var drainTimeout: Duration = .seconds(2)
    }

    private let listener: UnixListener
    private let limits: Limits
    private let secrets: Secrets
    private let logger: Logger
    /// The configuration's views, as the last reload left them: what a bar client renders.
    private let views: Mutex<[ViewDefinition]>
    private let ownUser = geteuid()
    /// Connections from `accept` to their close, served or not.
    private let connected = Atomic<Int>(0)
    /// Writes to every served client.
    private let writer: SocketWriter
    /// Ends the accept thread: the stop, or `stopAccepting`.
    private let stopping = WakeupPipe()

    init(listener: UnixListener, limits: Limits = Limits(), views: [ViewDefinition], secrets: Secrets, logger: Logger) {
        self.listener = listener
        self.limits = limits
        self.views = Mutex(views)
        self.secrets = secrets
        self.logger = logger
        writer = SocketWriter(
            limits: SocketWriter.Limits(minimumWriteInterval: Self.minimumWriteInterval, stallTimeout: limits.stallTimeout),
            secrets: secrets)
    }

    var isIdle: Bool { connected.load(ordering: .relaxed) == 0 }

    func stopAccepting() { stopping.wake() }

    func interruptAll() {
        writer.interruptAll()
    }

    func viewsReloaded(_ views: [ViewDefinition]) {
        self.views.withLock { $0 = views }
    }

    func publish(_ lines: [OutputLine]) {
        writer.publish(lines)
    }

    /// The bar encoder for a client's format over the views it named, in the configuration in force.
    private func barEncoder(_ format: StdoutFormat, _ selected: [ViewID]) -> BarEncoder {
        let views = self.views.withLock { $0 }
        return BarEncoder(
            format: format,
            views: format == .i3bar && selected.isEmpty ? views : selected.compactMap { id in views.first { $0.id == id } })
    }

    /// Accepts until cancelled; every connection's task is a child of this one, and this returns once they
    /// have all ended (cancelling ends each: its reader stops and its writer is finished).
    func run(inbox: EngineInbox) async {
        let (stopping, listener) = (stopping, listener)
        let (accepted, arrivals) = AsyncStream.makeStream(of: AcceptedConnection.self)
        async let writing: Void = writer.run()
        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                group.addTask {
                    await OwnThread.run(named: "hammock.accept") {
                        while let connection = listener.accept(stopDescriptor: stopping.readEnd) { arrivals.yield(connection) }
                    }
                    arrivals.finish()
                }
                for await connection in accepted {
                    group.addTask { await self.serve(connection, inbox: inbox) }
                }
            }
        } onCancel: {
            stopping.wake()
        }
        writer.stop()
        await writing
    }

    /// How a connection's first moments ended: served with what it asked for, or let go.
    private enum Greeting {
        case serve(SubscribeRequest)
        case letGo
    }

    /// One connection, from its first line to its close. The descriptor is closed here, once the writer has
    /// ended the client (its thread's last use of it) and the reader has returned, so its number cannot go
    /// to another client while either still uses it.
    private func serve(_ connection: AcceptedConnection, inbox: EngineInbox) async {
        let descriptor = connection.descriptor
        connected.add(1, ordering: .relaxed)
        defer { connected.subtract(1, ordering: .relaxed) }
        // Waiting for the first line, and telling a refused client why, block: on a thread of the connection's
        // own, never on the pool the loop runs on.
        let greeting = await OwnThread.run(named: "hammock.client") { self.greet(connection) }
        guard case .serve(let request) = greeting else {
            Glibc.close(descriptor)
            return
        }
        let id = ConsumerID.next()
        let writer = self.writer.add(
            id, descriptor: descriptor, bar: request.format == .json ? nil : barEncoder(request.format, request.views),
            reportProblem: { [logger] in logger.warning("\($0)") }
        ) {
            inbox.yield(.left(id))
        }
        defer { writer.remove() }
        let controls = ControlMailbox(waitForRoomForAnswers: { writer.waitForRoomForAnswers() })
        let stopReading = WakeupPipe()
        defer { stopReading.close() }
        let (closing, close) = AsyncStream.makeStream(of: Void.self)
        inbox.yield(
            .joined(
                Consumer(
                    id: id, subscription: request.subscription, subscriptionID: request.id, output: writer,
                    controls: controls, format: request.format, close: { close.finish() }, readsPublishedLines: true)))
        let clicks = request.format == .i3bar
        async let writing: Void = writer.run()
        async let reading: Void = OwnThread.run(named: "hammock.client") { [logger] in
            let cutOff = Self.readControlLines(of: descriptor, stopDescriptor: stopReading.readEnd) { event in
                if clicks ? controls.receiveClick(event) : controls.receive(event) { inbox.yield(.controls(id)) }
            }
            guard cutOff else { return }
            // Told in its own stream of lines (the error goes out before the close), then let go.
            let limit = ControlMailbox.maximumLineLength
            logger.warning("dropped client \(id): it sent a line longer than \(limit) bytes")
            let message = "a line longer than the limit of \(limit) bytes: this connection is closed"
            if controls.put(.invalid(message, id: nil), key: nil, cost: 0) { inbox.yield(.controls(id)) }
            inbox.yield(.left(id))
        }
        // Until the loop lets the client go (it left, was refused, or the engine stops); a cancelled run is
        // the engine's end, when the loop has already finished every client.
        await withTaskCancellationHandler {
            for await _ in closing {}
        } onCancel: {
            close.finish()
        }
        _ = await writer.finish(with: nil, deadline: limits.drainTimeout)
        if await writer.ending() == .stalled {
            logger.warning("\(id) read nothing for \(limits.stallTimeout): disconnected (hammock serve --client-timeout)")
        }
        // Ends the read; the writer is done with the descriptor.
        shutdown(descriptor, Int32(SHUT_RDWR))
        stopReading.wake()
        controls.close()
        await reading
        await writing
        Glibc.close(descriptor)
    }

    /// A client's control lines, as `LineReader.read` reads stdin's, until the client's end or `stopDescriptor`
    /// is readable; but a line that passes `ControlMailbox.maximumLineLength` ends the reading at once
    /// (returns true), where stdin's reader skips it to its newline. Delivers `.end` either way.
    private static func readControlLines(
        of descriptor: Int32, stopDescriptor: Int32, deliver: (LineReader.Event) -> Void
    ) -> Bool {
        var splitter = LineSplitter(maximumLineLength: ControlMailbox.maximumLineLength)
        func forward(_ piece: LineSplitter.Piece) {
            switch piece {
            case .line(let bytes): deliver(.line(bytes))
            case .tooLong(let length, _): deliver(.tooLong(length))
            }
        }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            var watched = [
                pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: stopDescriptor, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&watched, 2, -1)
            if ready < 0 && errno == EINTR { continue }
            if watched[1].revents != 0 { break }
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            chunk.withUnsafeBytes { splitter.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count]), emit: forward) }
            if splitter.isDroppingLine {
                deliver(.end)
                return true
            }
        }
        splitter.finish(emit: forward)
        deliver(.end)
        return false
    }

    /// Checks who connected and reads its first line (on the connection's thread).
    private func greet(_ connection: AcceptedConnection) -> Greeting {
        let descriptor = connection.descriptor
        guard connection.peer?.uid == ownUser else {
            let who = connection.peer.map { "user \($0.uid)" } ?? "an unknown user"
            logger.warning("refused a connection from \(who): the socket serves its own user only")
            refuse(descriptor, "this engine serves user \(ownUser) only; connect as that user")
            return .letGo
        }
        guard connected.load(ordering: .relaxed) <= limits.maximumClients else {
            logger.warning("refused a client: \(limits.maximumClients) are connected, the most there may be")
            refuse(descriptor, "too many clients: \(limits.maximumClients) are connected, the most this engine serves (hammock serve --max-clients)")
            return .letGo
        }
        switch firstLine(of: descriptor) {
        case .closed:
            return .letGo  // a probe (attach's "is an engine there?"), or a client gone at once: no load for it
        case .none:
            return .serve(.everything)
        case .line(let line):
            do throws(ControlLineError) {
                return .serve(try SubscribeRequest(line: line))
            } catch {
                refuse(descriptor, error.message, id: error.id)
                return .letGo
            }
        }
    }

    private enum FirstLine {
        case line([UInt8])
        /// No `subscribe` line within the window: the client reads everything.
        case none
        /// The client closed its end (or the connection failed) before saying anything.
        case closed
    }

    /// A first line longer than this is not taken for a `subscribe` line (the reader refuses it, or carries
    /// it out, as any control line).
    static let longestSubscribeLine = 64 << 10

    /// A client's lines that come sooner than this after its last write wait for the next, in one batch
    /// (`SocketWriter`): at most 40 writes a second to a client, however fast its sources change, and no
    /// delay for a change after a quiet spell. Measured (`benchmarks/run fanout`): without it each change
    /// woke each client's writer, and 100 clients of a source changing 1,000 times a second cost the engine
    /// 5.7 times what one did; most of it was thread wake-ups (perf: 60% in futex waits and wakes).
    /// docs/protocol.md, "The shared engine".
    static let minimumWriteInterval: Duration = .milliseconds(25)

    /// The connection's first line, if it comes within `subscribeWindow` and is a `subscribe` line; any other
    /// line stays unread, for the control lines' reader.
    private func firstLine(of descriptor: Int32) -> FirstLine {
        let deadline = MonotonicInstant.current + limits.subscribeWindow
        var peeked = [UInt8](repeating: 0, count: Self.longestSubscribeLine)
        while true {
            let left = deadline - MonotonicInstant.current
            guard left > .zero else { return .none }
            var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&watched, 1, Int32(max(1, left.milliseconds)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return .none }
            let count = recv(descriptor, &peeked, peeked.count, Int32(MSG_PEEK))
            guard count > 0 else { return .closed }
            guard let end = peeked[..<count].firstIndex(of: UInt8(ascii: "\n")) else {
                if count == peeked.count { return .none }  // too long for a subscribe line: the reader refuses it
                usleep(1000)  // a line in pieces: wait for its end
                continue
            }
            let line = Array(peeked[..<end])
            guard SubscribeRequest.isSubscribe(line) else { return .none }
            _ = recv(descriptor, &peeked, end + 1, 0)
            return .line(line)
        }
    }

    /// Tells a client why it is not served, in an `error` line, and lets it go.
    private func refuse(_ descriptor: Int32, _ message: String, id: ControlID? = nil) {
        UnixSocket.setSendTimeout(descriptor, limits.drainTimeout)
        var bytes: [UInt8] = []
        OutputLine.error(message: message, id: id).encode(seq: 1, into: &bytes, redactor: secrets.redactor)
        try? UnixSocket.sendAll(bytes, to: descriptor)
    }
}
