import ArgumentParser
import FoundationEssentials
import Glibc
import HammockConfig
import HammockCore
import HammockEngine
import HammockHTTP
import HammockJSON
import HammockLogging
import HammockMetrics
import HammockPluginHost
import HammockProtocol
import HammockRendering
import HammockSystem
import Logging

@main
struct Hammock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hammock",
        abstract: "Loads data sources declared in YAML, keeps them fresh, and writes every change as a JSON line.",
        discussion: """
            Run `hammock run CONFIG` as a subprocess and read its stdout: one JSON object per line, each \
            carrying the whole current state of a source or a view. Control lines may be written to its \
            stdin. See docs/protocol.md.
            """,
        version: hammockVersion,
        subcommands: [Run.self, Serve.self, Attach.self, Ctl.self, Get.self, Watch.self, MCP.self, Check.self, Schema.self, PluginCommand.self]
    )
}

/// Options shared by the commands that read a configuration.
struct ConfigurationArguments: ParsableArguments {
    @Argument(help: "The configuration file (YAML).", completion: .file(extensions: ["yaml", "yml"]))
    var config: String

    @Option(help: "How much hammock logs on stderr.")
    var logLevel: Logger.Level = .notice

    @Option(help: "Logs on stderr: text, or json (a JSON object a line: time, level, message and fields).")
    var logFormat: LogFormat = .text

    /// The configuration file, read here at start and by the engine at every reload.
    var source: ConfigurationSource { ConfigurationSource(file: config) }

    /// Logs go to stderr only, with `secrets` redacted; the engine shares the same `StandardError`.
    func makeLogger(secrets: Secrets) -> (Logger, StandardError) {
        let level = logLevel
        let output = StandardError(secrets: secrets, format: logFormat)
        LoggingSystem.bootstrap { _ in StandardErrorLogHandler(level: level, output: output) }
        return (Logger(label: "hammock"), output)
    }

    /// Reads the configuration and sets up logs on stderr that redact its secrets. A configuration that does
    /// not read is reported together with what its plugins say of the sources that did (`fail`), and the
    /// command exits 2. The caller flushes `standardError` before it exits.
    func load(
        signals: SignalRouter, pluginFailuresAreErrors: Bool
    ) async throws -> (loaded: LoadedConfiguration, logger: Logger, standardError: StandardError) {
        try requirePluginGuard()
        let outcome = source.read()
        let secrets = Secrets()
        let (logger, standardError) = makeLogger(secrets: secrets)
        signals.log(to: standardError)
        switch outcome {
        case .success(let loaded):
            secrets.add(loaded.configuration.secrets)
            return (loaded, logger, standardError)
        case .failure(let error):
            defer { standardError.flush(timeout: .milliseconds(500)) }
            secrets.add(error.secrets)
            try await fail(
                error, logger: logger, standardError: standardError, signals: signals,
                pluginFailuresAreErrors: pluginFailuresAreErrors)
        }
    }

    /// Starts the plugins of `loaded` and lets each check its sources' own keys.
    func checkWithPlugins(
        _ loaded: LoadedConfiguration, logger: Logger, standardError: StandardError, signals: SignalRouter
    ) async -> Engine.PluginValidation {
        let engine = Engine(
            configuration: loaded, from: source, options: RunOptions(), logger: logger, standardError: standardError)
        guard signals.stopsDuringStartUp(engine) else { await signals.waitForStartUpStop() }
        let validation = await engine.validatePlugins()
        await signals.waitIfStopping()
        await engine.shutdownLoaders()
        return validation
    }

    /// Starts `engine`'s plugins for `run` and `serve`: each checks its own options first, so a typo stops
    /// hammock with its line and column (exit 2, the plugins stopped) instead of turning into a source error at
    /// run time. A plugin that fails to start is not a configuration error: supervision restarts it and its
    /// sources show why, so it is logged and the engine goes on.
    ///
    /// Only the kinds that `demand` watches a source of start now (`serve`: the `keep: true` sources); the
    /// others start with their first load, when a client first watches one of their sources.
    func startPlugins(
        of engine: Engine, _ loaded: LoadedConfiguration, logger: Logger, standardError: StandardError,
        signals: SignalRouter, for demand: Demand = .everything
    ) async throws {
        guard signals.stopsDuringStartUp(engine) else { await signals.waitForStartUpStop() }
        let validation = await engine.validatePlugins(for: demand)
        await signals.waitIfStopping()
        if !validation.optionProblems.isEmpty {
            await engine.shutdownLoaders()
            report(ConfigurationError(file: loaded.file, diagnostics: validation.optionProblems), standardError: standardError)
            throw ExitCode(2)
        }
        for failure in validation.pluginFailures { logger.error("\(failure.formatted(file: loaded.file))") }
    }

    /// Reports a configuration that did not read cleanly, with what its plugins say of the sources that did,
    /// all at once and sorted by line; then exits 2.
    private func fail(
        _ error: ConfigurationError, logger: Logger, standardError: StandardError, signals: SignalRouter,
        pluginFailuresAreErrors: Bool
    ) async throws -> Never {
        var error = error
        if let partial = error.partial {
            let validation = await checkWithPlugins(
                partial, logger: logger, standardError: standardError, signals: signals)
            error = error.adding(pluginProblems: validation.optionProblems + (pluginFailuresAreErrors ? validation.pluginFailures : []))
        }
        report(error, standardError: standardError)
        throw ExitCode(2)
    }

    /// Every problem on stderr as `file:line:column: message`, then a count; no secret is quoted.
    ///
    /// Written directly rather than through `standardError`'s bounded queue: this is the command's answer,
    /// which must not be dropped. It waits for a consumer that reads stderr; a signal still ends hammock.
    func report(_ error: ConfigurationError, standardError: StandardError) {
        standardError.flush(timeout: .milliseconds(500))  // the logs that came before it, first
        let count = error.diagnostics.count
        let summary = "\(config): \(count) error\(count == 1 ? "" : "s")"
        let text: String
        switch standardError.format {
        case .text:
            text = error.description + "\n" + summary + "\n"
        case .json:
            // A record per problem, with its place as fields too, then the count.
            let records = error.diagnostics.map { diagnostic in
                StandardError.jsonRecord(
                    level: "error", message: diagnostic.formatted(file: error.file),
                    fields: [
                        "file": .string(error.file), "line": .number(JSONNumber(diagnostic.mark.line)),
                        "column": .number(JSONNumber(diagnostic.mark.column)),
                    ])
            } + [StandardError.jsonRecord(level: "error", message: summary, fields: [:])]
            text = records.map { String(decoding: $0, as: UTF8.self) }.joined()
        }
        writeAll(standardError.secrets.redactor.redact(text), to: STDERR_FILENO)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension LogFormat: ExpressibleByArgument {}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load the sources and write their states as JSON lines until stopped.")

    @OptionGroup var arguments: ConfigurationArguments

    @Flag(help: "Load every source once, write the states, then exit: 0 if no source failed, 1 otherwise.")
    var once = false

    @Option(help: "With --once: a source still loading after this long counts as failed (e.g. 30s, 2m).")
    var deadline = Parsed(OptionDuration(.seconds(30)))

    @Option(help: "What stdout carries: the protocol's JSON lines (json), a status bar's lines (waybar, polybar, text, tmux, i3bar), or the screen of `hammock watch` (tui). See docs/formats.md.")
    var format = Parsed(StdoutFormat.json)

    @Option(help: "A view for a bar format to show (waybar: exactly one; polybar, text, tmux: one or more, joined by \" | \"; i3bar: a block each, every view when none is given).")
    var view: [String] = []

    @Option(help: "Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464). See docs/service.md.")
    var metrics: Parsed<MetricsAddress>?

    @OptionGroup var http: HTTPArguments

    @Flag(help: "Reload the configuration, as SIGHUP does, whenever a file it was read from changes (included files and directories too).")
    var watchConfig = false

    func run() async throws {
        if once && watchConfig { throw usageError("--watch-config reloads a running configuration; --once exits after one load") }
        // No signal may end hammock before it has stopped what it started (`runEngine`), so the router comes
        // before anything else; then the options, in the order they have always been checked.
        let signals = Self.signalRouter(once: once)
        let deadline = try deadline.value { ValidationError("--deadline: \($0)") }.duration
        let format = try format.value { usageError("--format \($0)") }
        try await runEngine(
            arguments: arguments, signals: signals, once: once, deadline: deadline, format: format, view: view,
            metrics: metrics, http: try http.settings(), watchConfig: watchConfig)
    }

    /// A stop during start-up exits 0, as a stop does later (no `hello` was written, so no `bye` is); with
    /// --once, whose 0 says every source was loaded and written, 128 + the signal's number.
    static func signalRouter(once: Bool) -> SignalRouter {
        SignalRouter(exitStatusDuringStartUp: { [once] in once ? 128 + $0 : 0 })
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show every source and view live on the terminal: status, age, failures, errors, content.",
        discussion: """
            Keys: up/down or j/k move, r retries the selected source or view, l loads it, q quits. The same as \
            `hammock run --format tui`. See docs/formats.md, "hammock watch".

            With --attach, the screen shows the configuration's shared engine (`hammock serve`) instead of an \
            engine of its own, and starts one as `hammock attach` does when none serves the configuration \
            (unless --no-start): r and l act for every client of that engine, and q ends the screen, not the \
            engine. Exits 0 on q, a stop signal or the engine's bye, 1 when the connection drops without a \
            bye, 2 when the engine at the socket serves another configuration or another protocol.
            """)

    @OptionGroup var arguments: ConfigurationArguments

    @Flag(help: "Show the configuration's shared engine (`hammock serve`) instead of running an engine of its own; start one when none serves the configuration, as `hammock attach` does.")
    var attach = false

    @Option(help: "With --attach: the engine's socket (default: the configuration's own), as given to `hammock serve --socket`.")
    var socket: String?

    @Flag(help: "With --attach: never start an engine; when none serves the configuration, say so and exit 2.")
    var noStart = false

    @Option(help: "With --attach, for an engine this command starts: it exits once no client has been connected for this long (e.g. 30s, 5m); 0: never.")
    var idleExit = "5m"

    func validate() throws {
        if !attach && (socket != nil || noStart || idleExit != "5m") {
            throw ValidationError("--socket, --no-start and --idle-exit go with --attach")
        }
        if case .failure(let problem) = OptionDuration.parse(idleExit) { throw ValidationError("--idle-exit: \(problem)") }
    }

    func run() async throws {
        let signals = Run.signalRouter(once: false)
        if attach { return try await runAttached(signals: signals) }
        try await runEngine(
            arguments: arguments, signals: signals, once: false, deadline: .seconds(30), format: .tui, view: [])
    }

    /// `--attach`: the configuration is read here for its views' definitions (what a view's row renders) and
    /// its secrets; the engine's lines come over its socket.
    private func runAttached(signals: SignalRouter) async throws {
        guard isatty(STDOUT_FILENO) == 1 else {
            throw usageError("watch draws on a terminal and stdout is not one; for lines to read use `hammock attach` (JSON) or `hammock get`")
        }
        let (configuration, socket) = try EngineAddressArguments.resolve(config: arguments.config, socket: socket)
        let (loaded, _, standardError) = try await arguments.load(signals: signals, pluginFailuresAreErrors: false)
        defer { standardError.flush(timeout: .milliseconds(500)) }
        let secrets = standardError.secrets
        let source = arguments.source
        let watch = AttachedWatch(
            title: String(loaded.file.split(separator: "/").last ?? ""), views: loaded.configuration.views, secrets: secrets,
            rereadViews: {
                guard case .success(let reloaded) = source.read() else { return nil }
                secrets.add(reloaded.configuration.secrets)
                return reloaded.configuration.views
            })
        let start = EngineStart(noStart: noStart, idleExit: idleExit, logLevel: arguments.logLevel)
        let config = arguments.config
        let outcome = await OwnThread.run(named: "hammock.watch.attach") {
            Result { () throws -> Int32 in
                let connection = try EngineConnection.open(config: config, configuration: configuration, socket: socket, start: start)
                try connection.subscribe(sources: nil, views: nil, id: nil)
                let (_, hello) = try connection.readHello(configuration: configuration)
                let attached = AttachedWatch.Connection(
                    descriptor: connection.descriptor, hello: hello,
                    enginePID: UnixSocket.peerCredentials(of: connection.descriptor)?.pid)
                let ending = withExtendedLifetime(connection) { watch.run(attached, signals: signals) }
                switch ending {
                case .quit:
                    return 0
                case .bye(let reason):
                    writeAll("hammock: the engine at \(socket) stopped (\(reason))\n", to: STDERR_FILENO)
                    return 0
                case .closed:
                    writeAll("hammock: the engine at \(socket) closed the connection without a bye\n", to: STDERR_FILENO)
                    return 1
                }
            }
        }
        let status = try outcome.get()
        if status != 0 { throw ExitCode(status) }
    }
}

/// Every plugin runs below hammock-guard (`PluginGuard`), so without it hammock starts nothing: it says
/// where it looked, at start, and exits 2 (as for a usage error), never running a plugin unguarded.
func requirePluginGuard() throws {
    if case .failure(let missing) = PluginGuard.location { throw usageError("\(missing)") }
}

/// A wrong `--format` or `--view` is a usage error like a configuration's: stderr says why, exit 2.
func usageError(_ message: String) -> ExitCode {
    writeAll("hammock: error: \(message)\n", to: STDERR_FILENO)
    return ExitCode(2)
}

/// `hammock run`, and `hammock watch` as `run --format tui`.
///
/// `signals` is made first of all, by the command: no signal may end hammock before it has stopped what it
/// started.
private func runEngine(
    arguments: ConfigurationArguments, signals: SignalRouter, once: Bool, deadline onceDeadline: Duration,
    format outputFormat: StdoutFormat, view viewArguments: [String], metrics metricsOption: Parsed<MetricsAddress>? = nil,
    http: HTTPDoor.Settings? = nil, watchConfig: Bool = false
) async throws {
    ProcessMemory.returnLargeBlocks()
    let view = viewArguments.map { ViewID($0) }
    if let problem = outputFormat.checkSelection(view) { throw usageError(problem) }
    // The screen needs a terminal to draw on; a pipe or a file would get a stream of escape sequences.
    if outputFormat == .tui && isatty(STDOUT_FILENO) != 1 {
        throw usageError(
            "watch draws on a terminal and stdout is not one; for lines to read use `hammock run` (JSON) or `hammock run --format text --view ID`")
    }
    if outputFormat == .tui && once { throw usageError("--once writes states for a program; watch them without it") }
    let metricsAddress = try metricsOption?.value { usageError("--metrics \($0)") }
    let (loaded, logger, standardError) = try await arguments.load(signals: signals, pluginFailuresAreErrors: false)
    let knownViews = loaded.configuration.views.map(\.id)
    if let unknown = view.first(where: { !knownViews.contains($0) }) {
        standardError.flush(timeout: .milliseconds(500))
        let known = knownViews.isEmpty ? "none" : knownViews.map(\.rawValue).joined(separator: ", ")
        throw usageError("--view \"\(unknown)\": \(arguments.config) has no such view (views: \(known))")
    }
    // hammock's last words, without waiting long for a consumer that does not read stderr.
    defer { standardError.flush(timeout: .milliseconds(500)) }
    // Listening first: an address in use stops hammock before any plugin starts.
    // The metrics count for --metrics' server and for --http's /metrics alike.
    let engineMetrics = metricsAddress != nil || http != nil ? EngineMetrics() : nil
    engineMetrics?.install()
    var metricsServer: MetricsServer?
    if let metricsAddress, let engineMetrics {
        do {
            let server = try await MetricsServer.start(metricsAddress, metrics: engineMetrics)
            metricsServer = server
            logger.notice("serving metrics at http://\(server.address)/metrics")
        } catch {
            logger.critical("\(error)")
            throw ExitCode(2)
        }
    }
    // Read (and taken out of the environment) before any plugin starts, so none inherits it.
    let notifySocket = NotifySocket.fromEnvironment(logger: logger)
    let options = RunOptions(
        once: once, onceDeadline: onceDeadline, format: outputFormat, views: view, notifySocket: notifySocket,
        metrics: engineMetrics, watchConfiguration: watchConfig, numbersEvents: http != nil)
    let engine = Engine(configuration: loaded, from: arguments.source, options: options, logger: logger, standardError: standardError)
    var door: HTTPServer?
    if let http { door = try await HTTPDoor.start(http, engine: engine, metrics: engineMetrics, logger: logger) }
    // A bar loads its views' sources only: the plugins of other kinds start if something asks for them.
    try await arguments.startPlugins(
        of: engine, loaded, logger: logger, standardError: standardError, signals: signals, for: options.startDemand)
    let status = await engine.run(signals: signals)
    await door?.shutdown()
    await metricsServer?.shutdown()
    if status != 0 { throw ExitCode(status) }
}

struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a configuration and print every problem as FILE:LINE:COLUMN: message.",
        discussion: "Exits 0 with a one-line summary when the configuration is valid, 2 when it is not.")

    @OptionGroup var arguments: ConfigurationArguments

    func run() async throws {
        // First of all, as for `run`: a signal stops the plugins started so far, then exits 128 + its
        // number, since the check did not finish.
        let signals = SignalRouter(exitStatusDuringStartUp: { 128 + $0 })
        let (loaded, logger, standardError) = try await arguments.load(signals: signals, pluginFailuresAreErrors: true)
        defer { standardError.flush(timeout: .milliseconds(500)) }
        // Start the plugins the configuration needs, so that their own keys are checked too.
        let validation = await arguments.checkWithPlugins(
            loaded, logger: logger, standardError: standardError, signals: signals)
        let problems = validation.optionProblems + validation.pluginFailures
        if !problems.isEmpty {
            arguments.report(ConfigurationError(file: loaded.file, diagnostics: problems), standardError: standardError)
            throw ExitCode(2)
        }
        let configuration = loaded.configuration
        let kinds = configuration.kinds.map(\.rawValue).joined(separator: ", ")
        print(
            "\(arguments.config): ok: \(configuration.sources.count) sources (\(kinds)), \(configuration.views.count) views"
        )
    }
}

/// Writes all of `text` to `descriptor` (FoundationEssentials has no FileHandle), or what it can.
func writeAll(_ text: String, to descriptor: Int32) {
    Descriptor.writeOrDrop(Array(text.utf8), to: descriptor)
}
