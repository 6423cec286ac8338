import ArgumentParser
import FoundationEssentials
import Glibc
import HammockConfig
import HammockCore
import HammockEngine
import HammockHTTP
import HammockMetrics
import HammockSystem
import Logging

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run one engine for a configuration and serve it to every consumer on a Unix socket.",
        discussion: """
            Consumers connect with `hammock attach` (the same output as `hammock run`), `hammock ctl` (one \
            control line) and `hammock get` (the current state), or any program that speaks the socket \
            protocol (docs/protocol.md, "The shared engine"). A source loads and polls while a client watches \
            it (or with `keep: true`). SIGHUP and --watch-config reload; SIGTERM tells every client `bye` and \
            exits. `hammock attach` starts one when none serves the configuration. See docs/service.md.
            """)

    @OptionGroup var arguments: ConfigurationArguments

    @Option(help: "The socket to listen on (default: one per configuration under $XDG_RUNTIME_DIR/hammock/, or /tmp/hammock-UID/).")
    var socket: String?

    @Option(help: "Exit once no client has been connected for this long (e.g. 5m); 0: never.")
    var idleExit = Parsed(OptionDuration(.zero))

    @Option(help: "The most clients served at once; one more is told why and closed.")
    var maxClients = 256

    @Option(help: "A client that reads nothing for this long while a line waits for it is disconnected.")
    var clientTimeout = Parsed(OptionDuration(.seconds(30)))

    @Flag(help: "Reload the configuration, as SIGHUP does, whenever a file it was read from changes.")
    var watchConfig = false

    @OptionGroup var http: HTTPArguments

    func run() async throws {
        let signals = SignalRouter(exitStatusDuringStartUp: { _ in 0 })
        ProcessMemory.returnLargeBlocks()
        let idleExit = try idleExit.value { ValidationError("--idle-exit: \($0)") }.duration
        let clientTimeout = try clientTimeout.value { ValidationError("--client-timeout: \($0)") }.duration
        guard maxClients >= 1 else { throw ValidationError("--max-clients must be at least 1") }
        guard clientTimeout > .zero else { throw ValidationError("--client-timeout must be longer than 0") }
        let http = try http.settings()
        let (loaded, logger, standardError) = try await arguments.load(signals: signals, pluginFailuresAreErrors: false)
        defer { standardError.flush(timeout: .milliseconds(500)) }
        // Who serves this configuration is decided before any plugin starts: one engine per socket.
        let (listener, lock) = try bind(configuration: loaded.file, logger: logger)
        defer { lock?.release() }
        let notifySocket = NotifySocket.fromEnvironment(logger: logger)
        // --http serves /metrics.
        let metrics = http != nil ? EngineMetrics() : nil
        metrics?.install()
        let engine = Engine(
            configuration: loaded, from: arguments.source,
            options: RunOptions(
                notifySocket: notifySocket, metrics: metrics, watchConfiguration: watchConfig,
                idleExit: idleExit > .zero ? idleExit : nil, numbersEvents: http != nil),
            logger: logger, standardError: standardError)
        var door: HTTPServer?
        do {
            if let http { door = try await HTTPDoor.start(http, engine: engine, metrics: metrics, logger: logger) }
            // A plugin starts when a client first watches a source of its kind (or at once, for `keep: true`).
            try await arguments.startPlugins(
                of: engine, loaded, logger: logger, standardError: standardError, signals: signals, for: .keptOnly)
        } catch {
            listener.close()
            throw error
        }
        logger.notice("serving \(loaded.file) at \(listener.path)")
        let status = await engine.serve(
            listener: listener, maximumClients: maxClients, stallTimeout: clientTimeout, signals: signals)
        await door?.shutdown()
        if status != 0 { throw ExitCode(status) }
    }

    /// The listener: systemd's (socket activation), or a socket of its own, bound under the engine lock so
    /// that two `serve`s of one socket (two attaches racing to start one) end with one engine: the second is
    /// told, and exits 3. A socket file left by an engine that died (even by SIGKILL) is replaced.
    private func bind(configuration file: String, logger: Logger) throws -> (UnixListener, EngineLock?) {
        do {
            if let activated = try UnixListener.fromSystemd() { return (activated, nil) }
            let environment = ProcessInfo.processInfo.environment
            guard let path = SocketPath.of(configuration: file, explicit: socket, environment: environment) else {
                throw usageError("\(file): no such file")
            }
            try SocketPath.prepareFolder(of: path)
            guard let lock = try EngineLock.acquire(forSocket: path) else {
                logger.error("an engine already serves \(path); `hammock attach \(arguments.config)` reads it")
                throw ExitCode(3)
            }
            return (try UnixListener.listen(at: path), lock)
        } catch let error as SocketError {
            logger.critical("\(error)")
            throw ExitCode(2)
        }
    }
}
