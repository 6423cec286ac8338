import ArgumentParser
import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockRendering
import HammockSystem
import Logging

/// Where the shared engine of a configuration listens: what `attach`, `ctl` and `get` are given.
struct EngineAddressArguments: ParsableArguments {
    @Argument(help: "The configuration file (YAML) whose engine to reach.", completion: .file(extensions: ["yaml", "yml"]))
    var config: String

    @Option(help: "The engine's socket (default: the configuration's own, under $XDG_RUNTIME_DIR/hammock/, or /tmp/hammock-UID/), as given to `hammock serve --socket`.")
    var socket: String?

    /// The configuration's canonical path, which the engine's `hello` must name, and its socket; a missing
    /// file is a usage error (exit 2).
    func resolve() throws -> (configuration: String, socket: String) {
        try Self.resolve(config: config, socket: socket)
    }

    /// `resolve()` for a command that takes these arguments its own way (`watch --attach`).
    static func resolve(config: String, socket: String?) throws -> (configuration: String, socket: String) {
        guard let canonical = SocketPath.canonical(config) else { throw usageError("\(config): no such file") }
        let environment = ProcessInfo.processInfo.environment
        guard let path = SocketPath.of(configuration: canonical, explicit: socket, environment: environment) else {
            throw usageError("\(config): no such file")
        }
        return (canonical, path)
    }
}

/// How `attach` and `get` start an engine when none serves the configuration.
struct EngineStartArguments: ParsableArguments {
    @Flag(help: "Never start an engine: when none serves the configuration, say so and exit 2.")
    var noStart = false

    @Option(help: "For an engine this command starts: it exits once no client has been connected for this long (e.g. 30s, 5m); 0: never.")
    var idleExit = "5m"

    @Option(help: "For an engine this command starts: how much it logs (to SOCKET.log, beside its socket).")
    var logLevel: Logger.Level = .notice

    func validate() throws {
        if case .failure(let problem) = OptionDuration.parse(idleExit) {
            throw ValidationError("--idle-exit: \(problem)")
        }
    }
}

/// A connection to a configuration's shared engine (`hammock serve`), from the client's side: connecting
/// (and starting the engine when none listens), the subscribe line, the `hello` checks, and reading lines
/// with a deadline.
///
/// Blocking calls on the calling thread: the client commands are short programs with nothing else to do
/// meanwhile, and `attach` copies on threads of its own (`OwnThread`) once the handshake is done.
final class EngineConnection {
    let descriptor: Int32
    /// The socket, for messages.
    let socket: String
    /// The configuration file as given on the command line, for messages.
    let config: String
    /// The beginning of a line that one read did not finish. Empty between lines: `next` reads up to a
    /// newline and no further, so whoever takes the descriptor over after a line misses nothing.
    private var unread: [UInt8] = []

    /// How long an engine may take to say `hello` (its plugins start first, and a freshly started one
    /// reads its configuration before that).
    static let helloTimeout: Duration = .seconds(30)
    /// How long a started engine may take to listen.
    static let startTimeout: Duration = .seconds(10)

    private init(descriptor: Int32, socket: String, config: String) {
        self.descriptor = descriptor
        self.socket = socket
        self.config = config
    }

    deinit { Glibc.close(descriptor) }

    /// Connects to `socket`. When nobody listens there (no socket file, or a stale one) and `start` is not
    /// nil, starts `hammock serve CONFIGURATION --socket SOCKET --idle-exit …` detached, then connects
    /// with a backoff for up to `startTimeout`. Two commands racing here each start a `serve`; the second
    /// finds the engine lock taken and exits 3, and both connect to the first.
    static func open(
        config: String, configuration: String, socket: String, start: EngineStart?
    ) throws -> EngineConnection {
        do throws(SocketError) {
            return EngineConnection(descriptor: try UnixSocket.connect(to: socket, timeout: .seconds(5)), socket: socket, config: config)
        } catch where error.nobodyListens {
            guard let start, !start.noStart else {
                throw clientError(
                    "no engine serves \(config) (at \(socket)); start one with `hammock serve \(config)` or `hammock attach \(config)`",
                    status: 2)
            }
            try startEngine(configuration: configuration, socket: socket, start: start)
            let deadline = ContinuousClock.now + startTimeout
            var delay: Duration = .milliseconds(10)
            while true {
                do throws(SocketError) {
                    return EngineConnection(descriptor: try UnixSocket.connect(to: socket, timeout: .seconds(5)), socket: socket, config: config)
                } catch where error.nobodyListens && ContinuousClock.now < deadline {
                    sleepBlocking(for: delay)
                    delay = min(delay * 2, .milliseconds(200))
                } catch where error.nobodyListens {
                    throw clientError(
                        "the engine started for \(config) did not listen at \(socket) within \(startTimeout); its log: \(socket).log",
                        status: 1)
                } catch {
                    throw clientError("\(error)", status: 1)
                }
            }
        } catch {
            throw clientError("\(error)", status: 1)
        }
    }

    /// `hammock serve CONFIGURATION --socket SOCKET --idle-exit D --log-level L`, from this executable, in a
    /// session of its own, with this process's environment (so `${ENV}` secrets resolve as they would for
    /// `hammock run`), its stderr appended to `SOCKET.log` (0600, beside the socket, in the folder it makes
    /// private first).
    private static func startEngine(configuration: String, socket: String, start: EngineStart) throws {
        guard let executable = DetachedProcess.currentExecutable else {
            throw clientError("cannot find this hammock's executable (/proc/self/exe) to start an engine", status: 1)
        }
        do throws(SocketError) {
            try SocketPath.prepareFolder(of: socket)
        } catch {
            throw clientError("\(error)", status: 1)
        }
        let logPath = socket + ".log"
        let log = Glibc.open(logPath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard log >= 0 else {
            throw clientError("cannot open the engine's log \(logPath): \(String(cString: strerror(errno)))", status: 1)
        }
        defer { Glibc.close(log) }
        let arguments = [
            executable, "serve", configuration, "--socket", socket, "--idle-exit", start.idleExit,
            "--log-level", start.logLevel.rawValue,
        ]
        if case .failure(let error) = DetachedProcess.spawn(
            path: executable, arguments: arguments, environment: ProcessEnvironment.current(), standardError: log)
        {
            throw clientError("cannot start `hammock serve \(configuration)`: \(error)", status: 1)
        }
    }

    /// Sends `line` and its newline.
    func send(_ line: String) throws {
        do throws(SystemCallError) {
            try UnixSocket.sendAll(Array((line + "\n").utf8), to: descriptor)
        } catch {
            throw Self.clientError("cannot write to the engine at \(socket): \(error)", status: 1)
        }
    }

    /// Sends the subscribe line: `sources` and `views` (nil: every one), `format`, `id`.
    func subscribe(sources: [String]?, views: [String]?, format: StdoutFormat = .json, id: String?) throws {
        var object = JSONObject()
        object["op"] = "subscribe"
        if let sources { object["sources"] = .array(sources.map { .string($0) }) }
        if let views { object["views"] = .array(views.map { .string($0) }) }
        if format != .json { object["format"] = .string(format.rawValue) }
        if let id { object["id"] = .string(id) }
        try send(JSONValue.object(object).jsonString)
    }

    enum Read {
        case line([UInt8])
        /// The engine closed the connection (or it broke).
        case end
        case timedOut
    }

    /// The next whole line, waiting until `deadline` at most (nil: without limit).
    func next(before deadline: ContinuousClock.Instant?) -> Read {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            if let newline = unread.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(unread[..<newline])
                unread.removeSubrange(...newline)
                return .line(line)
            }
            var timeout: Int32 = -1
            if let deadline {
                let left = deadline - ContinuousClock.now
                guard left > .zero else { return .timedOut }
                timeout = Int32(clamping: max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            }
            var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&watched, 1, timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                return .end
            }
            if ready == 0 { continue }
            // Up to the first newline and no further: what follows a line stays in the socket, so that the
            // connection can be handed on after it (`attach` to `hammock-relay`) with nothing read ahead.
            let peeked = recv(descriptor, &chunk, chunk.count, Int32(MSG_PEEK))
            if peeked < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return .end
            }
            if peeked == 0 { return .end }
            let wanted = chunk[..<peeked].firstIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? peeked
            let count = read(descriptor, &chunk, wanted)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return .end
            }
            if count == 0 { return .end }
            unread += chunk[..<count]
        }
    }

    /// Reads the engine's `hello` and checks that it serves `configuration` (canonical) and speaks this
    /// hammock's protocol; returns the line (as received) and its fields. An engine that refuses the client
    /// (another user, too many clients, a subscribe naming what the configuration does not have) answers
    /// with an `error` line instead: its message, exit 2 for a subscribe the engine refused, 1 otherwise.
    func readHello(configuration: String) throws -> (line: [UInt8], hello: JSONValue) {
        let deadline = ContinuousClock.now + Self.helloTimeout
        switch next(before: deadline) {
        case .timedOut:
            throw Self.clientError("the engine at \(socket) said nothing within \(Self.helloTimeout)", status: 1)
        case .end:
            throw Self.clientError(
                "the engine at \(socket) closed the connection before its hello (if it was just started, its log says why: \(socket).log)",
                status: 1)
        case .line(let bytes):
            let line = (try? JSONValue(parsing: bytes)) ?? .null
            switch line["type"]?.stringValue {
            case "hello":
                let served = line["configuration"]?.stringValue ?? "an unnamed configuration"
                guard served == configuration else {
                    throw Self.clientError("the engine at \(socket) serves \(served), not \(config)", status: 2)
                }
                let speaks = line["protocol"]?.numberValue?.intValue
                guard speaks == OutputLine.protocolVersion else {
                    let version = speaks.map { "protocol \($0)" } ?? "an unknown protocol"
                    throw Self.clientError(
                        "the engine at \(socket) speaks \(version), this hammock protocol \(OutputLine.protocolVersion); stop it (it is an older or newer hammock) and attach again",
                        status: 2)
                }
                return (bytes, line)
            case "error":
                let message = line["message"]?.stringValue ?? "no reason given"
                throw Self.clientError(
                    message.hasPrefix("subscribe:") ? "\(config): \(message)" : "the engine at \(socket) refused: \(message)",
                    status: message.hasPrefix("subscribe:") ? 2 : 1)
            default:
                throw Self.clientError(
                    "the engine at \(socket) did not start with a hello: \(String(decoding: bytes.prefix(200), as: UTF8.self))",
                    status: 1)
            }
        }
    }

    /// A client command's failure: stderr says why, then the command exits with `status`.
    static func clientError(_ message: String, status: Int32) -> ExitCode {
        writeAll("hammock: error: \(message)\n", to: STDERR_FILENO)
        return ExitCode(status)
    }
}

/// Blocks the calling thread for `duration` (the client commands' own threads, never a task's).
func sleepBlocking(for duration: Duration) {
    let (seconds, attoseconds) = duration.components
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}

/// The state of a line the engine wrote, as `--once` and `get` judge it: still loading, or settled (it has
/// content or an error), and whether it failed.
struct SettledStates {
    /// Each id's latest line's verdict: nil while loading.
    private(set) var states: [String: (settled: Bool, failed: Bool)] = [:]
    /// The ids to wait for (a hello's sources and views).
    let expected: [String]

    init(hello: JSONValue) {
        let names = { (key: String) in (hello[key]?.arrayValue ?? []).compactMap(\.stringValue) }
        expected = names("sources").map { "source:" + $0 } + names("views").map { "view:" + $0 }
    }

    /// Notes a `source` or `view` line.
    mutating func note(_ line: JSONValue) {
        guard let id = line["id"]?.stringValue else { return }
        switch line["type"]?.stringValue {
        case "source":
            let state = line["state"]
            let loading = state?["isLoading"]?.boolValue ?? false
            let hasError = state?["latestError"].map { $0 != .null } ?? false
            let hasContent = state?["content"].map { $0 != .null } ?? false
            // A source with neither content nor error has not loaded yet, though no load may be in flight
            // (a demand-driven engine starts its load on the subscribe).
            states["source:" + id] = (!loading && (hasError || hasContent), hasError)
        case "view":
            let status = line["status"]?.stringValue ?? "loading"
            states["view:" + id] = (status != "loading", status == "error")
        default:
            break
        }
    }

    var allSettled: Bool { expected.allSatisfy { states[$0]?.settled == true } }
    var anyFailed: Bool { expected.contains { states[$0]?.failed == true } }
    /// The sources whose latest state has an error, as `bye`'s `failed` names them.
    var failedSources: [String] {
        expected.filter { $0.hasPrefix("source:") && states[$0]?.failed == true }.map { String($0.dropFirst("source:".count)) }
    }
}
