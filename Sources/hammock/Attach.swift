import ArgumentParser
import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockPluginHost
import HammockRendering
import HammockSystem
import Logging
import Synchronization

struct Attach: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read a configuration's shared engine as `hammock run` would: the same stdout, the same stdin.",
        discussion: """
            What a bar, a tmux status line or a script runs instead of `hammock run`, so that every consumer \
            of one configuration shares one engine: one poll per refresh whatever the number of bars, the same \
            state everywhere, and a click or a control line seen by all. stdout carries what `hammock run` \
            writes (JSON lines, or a bar's lines with --format); stdin takes the same control lines (i3bar: \
            its clicks). --source and --view subscribe to just those, in JSON lines too.

            When no engine serves the configuration, attach starts one (`hammock serve CONFIG`, detached, in \
            a session of its own, with this environment so ${ENV} secrets resolve; its log goes to \
            SOCKET.log), unless --no-start. It exits once no client has been connected for --idle-exit. Two \
            attaches racing start one engine.

            Exits 0 when the engine said bye or stdout closed, 1 when the connection dropped without a bye (a \
            bar format carries no bye: 1 when the engine goes), 2 when the engine at the socket serves another \
            configuration or another protocol. SIGTERM and SIGINT end attach at once (0); the engine goes on \
            for its other clients. SIGUSR1 and SIGUSR2 (a bar's click, `kill -USR1 %pid%`) go on to the \
            engine, which retries its failing sources or loads every source, as `hammock run` does. With --once: waits until every subscribed source and view has content or \
            an error (or --deadline), writes them and exits 0, or 1 if one failed or the deadline passed. See \
            docs/protocol.md, "The shared engine".
            """)

    @OptionGroup var address: EngineAddressArguments
    @OptionGroup var start: EngineStartArguments

    @Option(help: "What stdout carries: the protocol's JSON lines (json), or a status bar's lines (waybar, polybar, text, tmux, i3bar), rendered by the engine. See docs/formats.md.")
    var format = Parsed(StdoutFormat.json)

    @Option(help: "A view to read. JSON lines: only the views and sources named (none named: everything). A bar format: as `hammock run --view` (waybar: exactly one; polybar, text, tmux: one or more; i3bar: every view when none is given).")
    var view: [String] = []

    @Option(help: "A source to read (JSON lines only): only the sources and views named.")
    var source: [String] = []

    @Flag(help: "Wait until every source and view read has content or an error, write them, then exit: 0 if none failed, 1 otherwise.")
    var once = false

    @Option(help: "With --once: a source or view still loading after this long counts as failed (e.g. 30s, 2m).")
    var deadline = Parsed(OptionDuration(.seconds(30)))

    func run() async throws {
        AttachSession.exitAtOnceOnStopSignals()
        let format = try format.value { usageError("--format \($0)") }
        let deadline = try deadline.value { ValidationError("--deadline: \($0)") }.duration
        if format == .tui { throw usageError("--format tui: the screen over a shared engine is `hammock watch --attach`") }
        if format != .json {
            if let problem = format.checkSelection(view.map { ViewID($0) }) { throw usageError(problem) }
            if !source.isEmpty { throw usageError("--source applies to --format json; a bar shows views (--view)") }
        }
        let (configuration, socket) = try address.resolve()
        let session = AttachSession(
            config: address.config, configuration: configuration, socket: socket, start: EngineStart(start),
            format: format, views: view, sources: source, once: once ? deadline : nil)
        let outcome = await OwnThread.run(named: "hammock.attach") { Result { try session.run() } }
        let status = try outcome.get()
        if status != 0 { throw ExitCode(status) }
    }
}

/// What `EngineConnection.open` needs of `EngineStartArguments`, as a value a thread may take.
struct EngineStart: Sendable {
    var noStart: Bool
    var idleExit: String
    var logLevel: Logger.Level

    init(noStart: Bool, idleExit: String, logLevel: Logger.Level) {
        self.noStart = noStart
        self.idleExit = idleExit
        self.logLevel = logLevel
    }

    init(_ arguments: EngineStartArguments) {
        noStart = arguments.noStart
        idleExit = arguments.idleExit
        logLevel = arguments.logLevel
    }
}

/// One `hammock attach`: the handshake, then the copying, on the thread it is run on.
///
/// JSON lines: one connection, subscribed to `sources` and `views` (none named: everything); its `hello`
/// is checked and written, then every line is copied to stdout as the engine wrote it (its `seq`, and the
/// `configuration` field a `run` has not: readers ignore fields they do not know).
///
/// A bar format: the engine renders the bar's lines, and a bar's lines carry no `hello`, no `error` and no
/// `bye`. So a first connection in JSON lines, subscribed to the bar's views (a probe), checks the
/// `hello` and the views' names (the engine's `error` says which it lacks); then a second one, in the bar's
/// format, is copied to stdout.
///
/// `--once` waits on the JSON connection (the probe, for a bar) until what it reads has settled: each
/// source has content or an error and no load in flight, each view is not `loading`. JSON lines: every
/// line read meanwhile is written, then a `bye` (`once`, or `deadline`). A bar: the bar's first rendering
/// on a new connection once the views have settled (its snapshot, so the settled states).
struct AttachSession: Sendable {
    let config: String
    let configuration: String
    let socket: String
    let start: EngineStart?
    let format: StdoutFormat
    let views: [String]
    let sources: [String]
    /// `--once`'s deadline; nil without `--once`.
    let once: Duration?

    /// The id of attach's own `subscribe` (answered once the snapshot is written), never written to stdout.
    static let subscribeID = "hammock-attach"

    func run() throws -> Int32 {
        let connection = try EngineConnection.open(config: config, configuration: configuration, socket: socket, start: start)
        Self.noteEngine(of: connection)
        if format == .json {
            let named = !sources.isEmpty || !views.isEmpty
            try connection.subscribe(
                sources: named ? sources : nil, views: named ? views : nil, id: once == nil ? nil : Self.subscribeID)
            let (line, hello) = try connection.readHello(configuration: configuration)
            guard writeLine(line) else { return 0 }
            if let once { return onceInJSON(connection, hello: hello, deadline: ContinuousClock.now + once) }
            return Self.relay(connection, json: true)
        }
        // The probe: every view for an i3bar that names none, else the bar's views.
        try connection.subscribe(sources: views.isEmpty ? nil : [], views: views.isEmpty ? nil : views, id: Self.subscribeID)
        let (_, hello) = try connection.readHello(configuration: configuration)
        var status: Int32 = 0
        if let once {
            let (outcome, _) = waitUntilSettled(connection, hello: hello, deadline: ContinuousClock.now + once)
            status = outcome == .settled ? 0 : 1
        }
        let bar = try EngineConnection.open(config: config, configuration: configuration, socket: socket, start: start)
        withExtendedLifetime(connection) {}
        try bar.subscribe(sources: [], views: views, format: format, id: nil)
        guard once != nil else { return Self.relay(bar, json: false) }
        // The first rendering: i3bar's starts with its header and `[`.
        for _ in 0..<(format == .i3bar ? 3 : 1) {
            guard case .line(let line) = bar.next(before: ContinuousClock.now + EngineConnection.helloTimeout) else {
                return 1
            }
            guard writeLine(line) else { return 0 }
        }
        return status
    }

    enum Settling: Equatable {
        case settled
        case failed
        case deadline
        case ended
    }

    /// Reads `connection` (subscribed with `subscribeID`) until the ack of the subscribe and every id of
    /// `hello` has settled; each line read meanwhile goes to `echo`.
    private func waitUntilSettled(
        _ connection: EngineConnection, hello: JSONValue, deadline: ContinuousClock.Instant,
        echo: ([UInt8], JSONValue) -> Bool = { _, _ in true }
    ) -> (Settling, SettledStates) {
        var states = SettledStates(hello: hello)
        var snapshotDone = false
        while true {
            switch connection.next(before: deadline) {
            case .timedOut:
                let waiting = states.expected.filter { states.states[$0]?.settled != true }
                writeAll("hammock: --deadline passed with \(waiting.joined(separator: ", ")) still loading\n", to: STDERR_FILENO)
                return (.deadline, states)
            case .end:
                writeAll("hammock: the engine at \(socket) closed the connection\n", to: STDERR_FILENO)
                return (.ended, states)
            case .line(let bytes):
                let line = (try? JSONValue(parsing: bytes)) ?? .null
                if line["type"]?.stringValue == "ack" && line["id"]?.stringValue == Self.subscribeID {
                    snapshotDone = true
                } else {
                    states.note(line)
                    guard echo(bytes, line) else { return (.ended, states) }
                }
                if snapshotDone && states.allSettled { return (states.anyFailed ? .failed : .settled, states) }
            }
        }
    }

    private func onceInJSON(_ connection: EngineConnection, hello: JSONValue, deadline: ContinuousClock.Instant) -> Int32 {
        var lastSeq = hello["seq"]?.numberValue?.intValue ?? 1
        let (outcome, states) = waitUntilSettled(connection, hello: hello, deadline: deadline) { bytes, line in
            lastSeq = line["seq"]?.numberValue?.intValue ?? lastSeq
            return writeLine(bytes)
        }
        if outcome == .ended { return 1 }
        let reason = outcome == .deadline ? StopReason.deadline : .once
        var bye: [UInt8] = []
        OutputLine.bye(reason: reason, failed: states.failedSources.map { SourceID($0) }).encode(seq: lastSeq + 1, into: &bye)
        _ = write(bye)
        return outcome == .settled ? 0 : 1
    }

    /// Goes on as `hammock-relay` (Sources/hammock-relay/main.c), which copies as `copy` does for as long as
    /// the bar runs, in a process of a few hundred KiB instead of this one's megabytes; `copy` here when the
    /// relay is not installed or does not start. Nothing past the handshake's lines has been read
    /// (`EngineConnection.next`), so the relay takes the connection whole.
    static func relay(_ connection: EngineConnection, json: Bool) -> Int32 {
        if let relay = Relay.location {
            // The configuration as given, last: for `ps` and `pgrep -f CONFIG`.
            let engine = attachedEnginePID.load(ordering: .relaxed)
            let failure = ProcessImage.replace(
                with: relay,
                arguments: [relay, String(connection.descriptor), String(engine), json ? "json" : "bar", connection.config],
                keeping: [connection.descriptor])
            writeAll("hammock: cannot start \(relay): \(failure); copying here instead\n", to: STDERR_FILENO)
        }
        return copy(connection, json: json)
    }

    /// Copies the connection to stdout, whole lines at a time, and stdin to the connection (control lines,
    /// or i3bar's clicks; stdin's end is not a reason to stop, as for `run`), until the engine closes the
    /// connection or stdout closes. The exit status: 0 after a `bye` or when stdout closed, else 1.
    static func copy(_ connection: EngineConnection, json: Bool) -> Int32 {
        let descriptor = connection.descriptor
        OwnThread.start(named: "hammock.stdin") {
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let count = read(STDIN_FILENO, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return }
                do throws(SystemCallError) { try UnixSocket.sendAll(Array(chunk[..<count]), to: descriptor) } catch { return }
            }
        }
        var pending: [UInt8] = []  // `next` left nothing read past the handshake's lines
        var sawBye = false
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        let bye = Array(#"{"type":"bye""#.utf8)
        while true {
            if let last = pending.lastIndex(of: UInt8(ascii: "\n")) {
                let whole = Array(pending[...last])
                pending.removeSubrange(...last)
                if json && !sawBye {
                    sawBye = whole.split(separator: UInt8(ascii: "\n")).contains { $0.starts(with: bye) }
                }
                guard write(whole) else { return 0 }
            }
            // stdout's reader gone (POLLERR on a pipe's write end) ends attach as it ends `run`.
            var watched = [
                pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: STDOUT_FILENO, events: 0, revents: 0),
            ]
            if poll(&watched, 2, -1) < 0 {
                if errno == EINTR { continue }
                return 1
            }
            if watched[1].revents & Int16(POLLERR | POLLHUP) != 0 { return 0 }
            guard watched[0].revents != 0 else { continue }
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return sawBye ? 0 : 1 }
            pending += chunk[..<count]
        }
    }

    /// SIGTERM and SIGINT end attach at once, with 0: there is nothing of its own to stop (the engine
    /// serves on, for its other clients). `_exit` is safe in a signal handler; lines go out whole, each in
    /// one `write`. SIGPIPE is ignored: a closed stdout is seen as `EPIPE`.
    ///
    /// SIGUSR1 and SIGUSR2 (a bar's click: `kill -USR1 %pid%`, as for `hammock run`) go on to the engine,
    /// which retries its failing sources or loads every source; until attach knows the engine, they are
    /// dropped rather than end it.
    static func exitAtOnceOnStopSignals() {
        signal(SIGPIPE, SIG_IGN)
        signal(SIGTERM) { _ in _exit(0) }
        signal(SIGINT) { _ in _exit(0) }
        let forward: @convention(c) (Int32) -> Void = { number in
            let engine = attachedEnginePID.load(ordering: .relaxed)
            if engine > 0 { kill(engine, number) }
        }
        signal(SIGUSR1, forward)
        signal(SIGUSR2, forward)
    }

    /// Notes the engine at the other end of `connection` (SO_PEERCRED) for the signals attach passes on.
    static func noteEngine(of connection: EngineConnection) {
        if let peer = UnixSocket.peerCredentials(of: connection.descriptor) {
            attachedEnginePID.store(peer.pid, ordering: .relaxed)
        }
    }
}

/// The engine `attach` reads (its pid, from the connection's SO_PEERCRED), for the signal handlers; 0 until
/// known.
let attachedEnginePID = Atomic<Int32>(0)

/// Writes `bytes` to stdout; false once stdout is closed.
private func write(_ bytes: [UInt8]) -> Bool {
    do throws(SystemCallError) {
        try Descriptor.writeAll(bytes, to: STDOUT_FILENO)
        return true
    } catch {
        return false
    }
}

/// Writes `line` and a newline to stdout; false once stdout is closed.
func writeLine(_ line: [UInt8]) -> Bool {
    write(line + [UInt8(ascii: "\n")])
}

/// `hammock-relay`, looked for as the plugins' guard is: beside hammock's executable (as `swift build` leaves
/// it), then in its `../libexec/hammock` (as scripts/install puts it); nil when neither holds it.
enum Relay {
    static let programName = "hammock-relay"

    static let location: String? = {
        guard let directory = PluginResolver.currentExecutableDirectory else { return nil }
        return PluginResolver.companionPaths(programName, executableDirectory: directory).first { access($0, X_OK) == 0 }
    }()
}
