import Foundation
import HammockConfig
import HammockCore
import HammockJSON
import HammockProtocol
import Logging

/// How `hammock run` was asked to run.
public struct RunOptions: Sendable {
    public var once: Bool
    public var onceDeadline: Duration
    /// How long to wait for a consumer to read the last lines before exiting anyway.
    public var drainTimeout: Duration

    public init(once: Bool = false, onceDeadline: Duration = .seconds(30), drainTimeout: Duration = .seconds(2)) {
        self.once = once
        self.onceDeadline = onceDeadline
        self.drainTimeout = drainTimeout
    }
}

/// The running engine: one loop that owns the core, feeds it every input with the current time, and
/// carries out what it asks for. All state lives in `EngineCore`; this type only does I/O.
public final class Engine: Sendable {
    private let loaded: LoadedConfiguration
    private let options: RunOptions
    private let logger: Logger
    private let inputs: AsyncStream<EngineInput>
    private let inbox: EngineInbox
    private let loaders: [String: any SourceLoader]
    private let standardError: StandardError

    /// - Parameter standardError: shared with the logger, so that one set of secrets (grown by reloads) is
    ///   redacted from everything hammock writes.
    public init(
        configuration: LoadedConfiguration, options: RunOptions, logger: Logger, standardError: StandardError,
        pluginResolver: PluginResolver
    ) {
        self.loaded = configuration
        self.options = options
        self.logger = logger
        (inputs, inbox) = AsyncStream.makeStream(of: EngineInput.self)
        self.standardError = standardError
        standardError.secrets.add(configuration.configuration.secrets)
        loaders = LoaderFactory.makeLoaders(
            for: configuration.configuration, resolver: pluginResolver, inbox: inbox, logger: logger,
            standardError: standardError)
    }

    /// What the plugins said of the configuration's sources.
    public struct PluginValidation: Sendable {
        /// Problems with the options as written, at their YAML line and column.
        public var optionProblems: [Diagnostic] = []
        /// Plugins that could not start or died while checking, at each affected source.
        public var pluginFailures: [Diagnostic] = []
    }

    /// Starts the plugins and asks each to check its sources' options, as written.
    ///
    /// `hammock check` treats a plugin failure as an error; `hammock run` goes on and lets supervision
    /// restart the plugin, while its sources show why they do not load.
    public func validatePlugins() async -> PluginValidation {
        await Self.validate(loaded.configuration.sources, of: loaded, with: loaders)
    }

    private static func validate(
        _ sources: [SourceDefinition], of loaded: LoadedConfiguration, with loaders: [String: any SourceLoader]
    ) async -> PluginValidation {
        // Every plugin checks its sources at the same time; a slow handshake delays only its own kind.
        let answers = await withTaskGroup(of: [String: PluginHost.ValidationAnswer].self) { group in
            for (kind, loader) in loaders {
                guard let host = loader as? PluginHost else { continue }
                let ofKind = sources.filter { $0.kind == kind }.map { (id: $0.id, options: JSONValue.object($0.options)) }
                guard !ofKind.isEmpty else { continue }
                group.addTask { await host.validate(ofKind) }
            }
            return await group.reduce(into: [:]) { $0.merge($1) { first, _ in first } }
        }
        var validation = PluginValidation()
        for (source, answer) in answers.sorted(by: { $0.key < $1.key }) {
            switch answer {
            case .valid:
                break
            case .invalid(let problems):
                validation.optionProblems += problems.map { loaded.diagnostic(source: source, problem: $0) }
            case .pluginFailed(let reason):
                let mark = loaded.positions[source]?.source ?? .init(line: 1, column: 1)
                validation.pluginFailures.append(Diagnostic(mark, "source \"\(source)\": \(reason)"))
            }
        }
        return validation
    }

    /// Reads the configuration file again (SIGHUP, `{"op":"reload"}`). The new configuration must pass the
    /// same checks as at start, plugins' included, or it is reported with its lines and columns and the
    /// running one goes on untouched.
    private func reload(
        _ current: inout LoadedConfiguration, _ loaders: inout [String: any SourceLoader], core: inout EngineCore
    ) async -> [EngineAction] {
        let searching = PluginResolver()
        let configurationLoader = ConfigurationLoader(
            kindIsAvailable: { searching.command(for: $0) != nil },
            pluginSearchDescription: { searching.searchDescription(for: $0) })
        let next: LoadedConfiguration
        switch configurationLoader.load(file: current.file) {
        case .success(let loaded): next = loaded
        case .failure(let error):
            standardError.secrets.add(error.secrets)
            return rejectReload(error)
        }
        // From now on, before anything (a plugin's complaint, a log line) can quote one of them.
        standardError.secrets.add(next.configuration.secrets)
        let resolver = PluginResolver(configured: next.configuration.plugins)
        let inbox = inbox
        let standardError = standardError
        for kind in next.configuration.kinds {
            let command = resolver.command(for: kind)
            if let host = loaders[kind] as? PluginHost, host.command == command { continue }
            if kind == "fake" && loaders[kind] != nil { continue }
            // A new kind, or a kind whose plugin command changed: a fresh loader.
            await loaders[kind]?.shutdown()
            loaders[kind] = LoaderFactory.makeLoader(
                kind: kind, resolver: resolver, inbox: inbox, logger: logger, standardError: standardError)
        }
        let changed = next.configuration.sources.filter { source in
            current.configuration.sources.first { $0.id == source.id } != source
        }
        let validation = await Self.validate(changed, of: next, with: loaders)
        if !validation.optionProblems.isEmpty {
            return rejectReload(ConfigurationError(file: next.file, diagnostics: validation.optionProblems))
        }
        logger.notice("configuration reloaded", metadata: ["file": "\(next.file)"])
        current = next
        let actions = core.reconfigure(next.configuration, now: .current)
        for kind in Array(loaders.keys) where !next.configuration.kinds.contains(kind) {
            await loaders.removeValue(forKey: kind)?.shutdown()
        }
        return actions
    }

    private func rejectReload(_ error: ConfigurationError) -> [EngineAction] {
        for diagnostic in error.diagnostics { logger.error("\(diagnostic.formatted(file: error.file))") }
        return [.emit(.error(message: "reload failed, the running configuration goes on:\n\(error.description)"))]
    }

    /// Stops every plugin (and every command they run); returns when they are gone.
    public func shutdownLoaders() async {
        await Self.shutdown(loaders)
    }

    private static func shutdown(_ loaders: [String: any SourceLoader]) async {
        await withTaskGroup(of: Void.self) { group in
            for loader in loaders.values { group.addTask { await loader.shutdown() } }
        }
    }

    /// A control line longer than this is refused rather than buffered.
    static let maximumControlLineLength = 1 << 20

    /// Runs until `--once` is done, a signal arrives or stdout closes; returns the exit status.
    public func run() async -> Int32 {
        let inbox = inbox
        // A closed stdout (or a plugin's closed stdin) must fail the write with EPIPE, not kill the engine
        // before it can shut its plugins down.
        signal(SIGPIPE, SIG_IGN)
        OrphanReaper.becomeSubreaper()
        let reaper = Task.detached(priority: .background) {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(2))
                OrphanReaper.sweep()
            }
        }
        defer { reaper.cancel() }
        let writer = OutputWriter(secrets: standardError.secrets) {
            inbox.yield(.stop(reason: "stdout closed"))
        }
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP]) { signal in
            switch signal {
            case SIGHUP: inbox.yield(.reload)
            case SIGINT: inbox.yield(.stop(reason: "interrupt"))
            default: inbox.yield(.stop(reason: "signal"))
            }
        }
        LineReader.start(descriptor: STDIN_FILENO, maximumLineLength: Self.maximumControlLineLength, name: "hammock.stdin") {
            event in
            switch event {
            case .line(let bytes): inbox.yield(.control(bytes))
            case .tooLong(let length): inbox.yield(.controlTooLong(length))
            case .end: break  // the end of stdin is not a reason to stop: the consumer may only read
            }
        }

        let mode: EngineCore.Mode = options.once ? .once(deadline: options.onceDeadline) : .continuous
        var core = EngineCore(configuration: loaded.configuration, mode: mode, seed: UInt64.random(in: 0...UInt64.max))
        let timer = EngineClock(inbox: inbox)
        var current = loaded
        var loaders = self.loaders

        var exitStatus: Int32 = 0
        var byeReason: String?
        let cache = CacheStore(configurationFile: loaded.file)
        var cachedSources = Set(loaded.configuration.sources.filter(\.cache).map(\.id))
        func perform(_ actions: [EngineAction]) async -> Bool {
            for action in actions {
                switch action {
                case .emit(let line):
                    writer.send(line)
                    if case .source(let id, .newData(_, let origin)?, let state) = line, cachedSources.contains(id),
                        origin != .cache
                    {
                        await cache.save(id, content: origin == .wipe ? nil : state.content)
                    }
                case .startLoad(let request):
                    await loaders[request.kind]?.start(request)
                case .cancelLoad(let source, let kind, let loadID):
                    await loaders[kind]?.cancel(source: source, loadID: loadID)
                case .removeSource(let source, let kind):
                    await loaders[kind]?.remove(source: source)
                case .finish(let status):
                    exitStatus = status
                    return false
                }
            }
            return true
        }

        /// Reads the configuration again; the set of cached sources follows it.
        func reloadConfiguration() async -> [EngineAction] {
            let actions = await reload(&current, &loaders, core: &core)
            cachedSources = Set(current.configuration.sources.filter(\.cache).map(\.id))
            return actions
        }

        let restored = await cache.restore(Array(cachedSources))
        var running = await perform(core.start(now: .current, restored: restored))
        timer.schedule(core.nextDeadline)
        if running {
            for await input in inputs {
                let now = EngineTime.current
                let actions: [EngineAction]
                switch input {
                case .loadFinished(let source, let loadID, let outcome):
                    actions = core.loadFinished(source: source, loadID: loadID, outcome: outcome, now: now)
                case .pushed(let source, let mailbox):
                    actions = mailbox.take().map { core.pushed(source: source, content: $0, now: now) } ?? []
                case .pushedError(let source, let error):
                    actions = core.pushedError(source: source, error: error, now: now)
                case .control(let bytes):
                    do throws(ControlLineError) {
                        let command = try ControlCommand(line: bytes)
                        if command == .reload {
                            actions = await reloadConfiguration()
                        } else {
                            actions = core.handle(command, now: now)
                        }
                    } catch {
                        actions = [.emit(.error(message: error.message))]
                    }
                case .controlTooLong(let length):
                    actions = [.emit(.error(message: "control line of \(length) bytes is longer than the limit of \(Self.maximumControlLineLength) bytes; ignored"))]
                case .tick:
                    actions = core.tick(now: now)
                case .clockJumped:
                    logger.notice("the clock jumped (a suspend, or the wall clock was set): refreshing every polled source")
                    actions = core.clockJumped(now: now)
                case .reload:
                    actions = await reloadConfiguration()
                case .stop(let reason):
                    byeReason = reason
                    actions = []
                }
                if byeReason != nil { break }
                running = await perform(actions)
                if !running { break }
                timer.schedule(core.nextDeadline)
            }
        }

        timer.cancel()
        signals.cancel()
        await Self.shutdown(loaders)
        OrphanReaper.sweep()
        await cache.flush()
        if let byeReason {
            logger.info("stopping", metadata: ["reason": "\(byeReason)"])
            writer.finish(with: .bye(reason: byeReason, failed: nil), timeout: options.drainTimeout)
        } else {
            writer.finish(with: nil, timeout: options.drainTimeout)
        }
        return exitStatus
    }
}

/// Turns SIGINT and SIGTERM into engine inputs instead of letting them kill the process, so that plugins
/// are shut down and `bye` is written. (Dispatch sources are thread-safe and never reassigned here, which
/// the compiler cannot see: hence `@unchecked`.)
private final class SignalWatcher: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]

    init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(number) }
            source.resume()
            return source
        }
    }

    func cancel() { sources.forEach { $0.cancel() } }
}

