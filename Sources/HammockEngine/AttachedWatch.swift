import Glibc
import HammockCore
import HammockJSON
import HammockLogging
import HammockSystem

/// `hammock watch --attach`: the screen of `hammock watch` (`WatchTerminal`) over a connection to a
/// configuration's shared engine, instead of an engine of its own.
///
/// The engine's JSON lines are read back into `OutputLine`s (`OutputLine(json:)`) and go to the screen's
/// model as they would from an engine in this process; a key's command (`r`, `l`) goes to the engine as a
/// control line, so its effect is every client's. The view definitions (what a view row renders) are read
/// from the configuration file here, as the engine read them, and again after each `reloaded`.
///
/// Blocking, on the caller's thread, which reads the connection: the terminal draws and reads keys on
/// threads of its own, and a key's control line is written from the keys' thread. `q`, SIGINT, SIGTERM or
/// SIGHUP end the screen, not the engine, which goes on for its other clients; SIGUSR1 and SIGUSR2 go on to
/// the engine, as `attach` passes them.
public struct AttachedWatch: Sendable {
    /// The connection, once `attach`'s handshake is over: its `hello` read, and nothing after it.
    public struct Connection: Sendable {
        public var descriptor: Int32
        public var hello: JSONValue
        /// The engine's pid (SO_PEERCRED), for the signals passed on; nil when unknown.
        public var enginePID: Int32?

        public init(descriptor: Int32, hello: JSONValue, enginePID: Int32?) {
            self.descriptor = descriptor
            self.hello = hello
            self.enginePID = enginePID
        }
    }

    /// How the screen ended.
    public enum Ending: Sendable, Equatable {
        /// `q`, or a signal: the engine goes on.
        case quit
        /// The engine said `bye` (it stopped).
        case bye(StopReason)
        /// The connection ended without a `bye` (the engine was killed), or broke.
        case closed
    }

    /// Longer lines than this from the engine are dropped (a source's content is bounded well below it).
    static let maximumLineLength = 64 << 20

    let title: String
    let views: [ViewDefinition]
    let secrets: Secrets
    let rereadViews: @Sendable () -> [ViewDefinition]?

    /// - Parameter views: the configuration's view definitions, as read here.
    /// - Parameter rereadViews: the view definitions after a reload (the file read again); nil keeps the
    ///   ones there are, when the file does not read.
    public init(
        title: String, views: [ViewDefinition], secrets: Secrets, rereadViews: @escaping @Sendable () -> [ViewDefinition]?
    ) {
        self.title = title
        self.views = views
        self.secrets = secrets
        self.rereadViews = rereadViews
    }

    /// The definitions of the views the engine names, in its order; a view this file does not define (it
    /// changed since the engine read it) gets a row all the same.
    static func definitions(of ids: [ViewID], from views: [ViewDefinition]) -> [ViewDefinition] {
        ids.map { id in views.first { $0.id == id } ?? ViewDefinition(id: id, sources: []) }
    }

    /// Shows the engine's state until `q`, a stop signal, or the engine's end; `signals` are routed here
    /// from now on. The terminal is put back before this returns.
    public func run(_ connection: Connection, signals: SignalRouter) -> Ending {
        guard let hello = OutputLine(json: connection.hello), case .hello(let sources, let viewIDs, _, _) = hello else {
            return .closed
        }
        let quit = WakeupPipe()
        let descriptor = connection.descriptor
        let terminal = WatchTerminal(
            title: title, sources: sources, views: Self.definitions(of: viewIDs, from: views), secrets: secrets,
            act: { command in Self.send(command, to: descriptor) }, quit: { quit.wake() })
        guard signals.route({ number in
            switch number {
            case SIGINT, SIGTERM, SIGHUP: quit.wake()
            case SIGWINCH, SIGCONT: terminal.resized()
            case SIGUSR1, SIGUSR2: if let engine = connection.enginePID { kill(engine, number) }
            default: break
            }
        }) != nil else { return .quit }
        guard terminal.start() else { return .quit }
        let ending = read(connection, into: terminal, quit: quit)
        _ = terminal.close(timeout: .seconds(2))
        return ending
    }

    /// A key's command, as a control line without an id (nothing waits for its answer: the screen shows
    /// what it does).
    static func send(_ command: ControlCommand, to descriptor: Int32) {
        guard let line = try? JSONValueEncoder().encode(command) else { return }
        // A failed write means the engine is gone: the reader sees the connection end.
        try? UnixSocket.sendAll(Array((line.jsonString + "\n").utf8), to: descriptor)
    }

    /// Reads the engine's lines into the screen until `quit` or the connection's end.
    private func read(_ connection: Connection, into terminal: WatchTerminal, quit: WakeupPipe) -> Ending {
        var splitter = LineSplitter(maximumLineLength: Self.maximumLineLength)
        var ending: Ending?
        func take(_ piece: LineSplitter.Piece) {
            guard ending == nil, case .line(let bytes) = piece, let json = try? JSONValue(parsing: bytes),
                let line = OutputLine(json: json)
            else { return }
            switch line {
            case .reloaded(_, let views):
                terminal.viewsReloaded(Self.definitions(of: views, from: rereadViews() ?? self.views))
            case .bye(let reason, _):
                ending = .bye(reason)
            default:
                break
            }
            terminal.send(line)
        }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var watched = [
            pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: quit.readEnd, events: Int16(POLLIN), revents: 0),
        ]
        while ending == nil {
            let ready = poll(&watched, 2, -1)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 { return .closed }
            if watched[1].revents != 0 { return .quit }
            guard watched[0].revents != 0 else { continue }
            let count = Glibc.read(connection.descriptor, &chunk, chunk.count)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return .closed }
            chunk[..<count].withUnsafeBytes { splitter.feed($0, emit: take) }
        }
        return ending ?? .closed
    }
}
