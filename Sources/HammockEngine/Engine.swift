import Dispatch
import FoundationEssentials
import Glibc
import HammockConfig
import HammockCore
import HammockJSON
import HammockProtocol
import HammockSystem
import Logging
import Synchronization

/// How `hammock run` was asked to run.
public struct RunOptions: Sendable {
    public var once: Bool
    public var onceDeadline: Duration
    /// How long, once stopping, to go on writing to a consumer that does not read before exiting anyway
    /// (never in the middle of a line); `--once` waits for its consumer until `onceDeadline` and this more.
    public var drainTimeout: Duration
    /// `--format`: the protocol's JSON lines, or a status bar's.
    public var format: StdoutFormat
    /// `--view`: the views a bar format shows, in order (checked by the command).
    public var views: [ViewID]
    /// systemd's notify socket (`Type=notify`), when hammock runs under it.
    public var notifySocket: NotifySocket?
    /// `--metrics`: what the engine counts about itself; nil costs one branch per line written.
    public var metrics: EngineMetrics?
    /// `--watch-config`: a change to a file of the configuration reloads it (`ConfigurationWatch`).
    public var watchConfiguration: Bool

    public init(
        once: Bool = false, onceDeadline: Duration = .seconds(30), drainTimeout: Duration = .seconds(2),
        format: StdoutFormat = .json, views: [ViewID] = [], notifySocket: NotifySocket? = nil,
        metrics: EngineMetrics? = nil, watchConfiguration: Bool = false
    ) {
        self.once = once
        self.onceDeadline = onceDeadline
        self.drainTimeout = drainTimeout
        self.format = format
        self.views = views
        self.notifySocket = notifySocket
        self.metrics = metrics
        self.watchConfiguration = watchConfiguration
    }
}

/// The running engine: one loop that owns the core, feeds it every input with the current time, and
/// carries out what it asks for. The decisions are pure values' (`EngineCore` for sources, views and
/// output, `ReloadStateMachine` for the reload protocol); the loop holds the I/O objects they name (the
/// loaders, the writer, the cache) and does the I/O.
public final class Engine: Sendable {
    private let loaded: LoadedConfiguration
    /// Where `loaded` came from; a reload reads it again.
    private let source: ConfigurationSource
    private let options: RunOptions
    private let logger: Logger
    private let inputs: AsyncStream<EngineInput>
    private let inbox: EngineInbox
    private let loaders: [Kind: PluginHost]
    private let standardError: StandardError
    /// Whether the watchdog timer's ask waits in the inbox (see `run`).
    private let watchdogAsked = Atomic<Bool>(false)

    /// - Parameter standardError: shared with the logger, so that one set of secrets (grown by reloads) is
    ///   redacted from everything hammock writes.
    public init(
        configuration: LoadedConfiguration, from source: ConfigurationSource, options: RunOptions, logger: Logger,
        standardError: StandardError, pluginResolver: PluginResolver
    ) {
        self.loaded = configuration
        self.source = source
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
        _ sources: [SourceDefinition], of loaded: LoadedConfiguration, with loaders: [Kind: PluginHost]
    ) async -> PluginValidation {
        // Every plugin checks its sources at the same time; a slow handshake delays only its own kind.
        let answers = await withTaskGroup(of: [SourceID: PluginHost.ValidationAnswer].self) { group in
            for (kind, host) in loaders {
                let ofKind = sources.filter { $0.kind == kind }
                guard !ofKind.isEmpty else { continue }
                group.addTask { await validate(ofKind, with: host) }
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
                let positions = loaded.positions[source]
                validation.pluginFailures.append(
                    Diagnostic(
                        positions?.source ?? .init(line: 1, column: 1), "source \"\(source)\": \(reason)",
                        file: positions?.file))
            }
        }
        return validation
    }

    /// The plugin's answers for its sources, with the problems its template rules find (a template where
    /// the plugin's hello refused one) joined to them.
    static func validate(
        _ sources: [SourceDefinition], with host: PluginHost
    ) async -> [SourceID: PluginHost.ValidationAnswer] {
        var answers = await host.validate(sources.map { (id: $0.id, options: JSONValue.object($0.options)) })
        // No hello, no rules: its sources are answered `.pluginFailed` anyway.
        guard let rules = await host.templateRules, !rules.isEmpty else { return answers }
        for source in sources {
            let problems = rules.apply(to: source).problems
            guard !problems.isEmpty else { continue }
            switch answers[source.id] {
            case .invalid(let own): answers[source.id] = .invalid(own + problems)
            case .valid, nil: answers[source.id] = .invalid(problems)
            case .pluginFailed: break
            }
        }
        return answers
    }

    /// The template rules of the kinds whose sources hold templates, from their plugins' hellos (starting a
    /// plugin that never ran). A kind whose plugin failed to start has none yet: the core holds its
    /// templated sources back until the plugin's hello brings them (`EngineInput.templateRulesLearned`).
    static func templateRules(
        for configuration: Configuration, from loaders: [Kind: PluginHost]
    ) async -> [Kind: TemplateRules] {
        var rules: [Kind: TemplateRules] = [:]
        for kind in Set(configuration.sources.filter { !$0.templates.isEmpty }.map(\.kind)) {
            guard let host = loaders[kind] else { continue }  // no plugin found: its sources fail
            rules[kind] = await host.templateRulesStartingIfNeeded()
        }
        return rules
    }

    // MARK: Reload

    /// The steps of a reload that run off the loop, each handed back to it as an input: reading a large file
    /// or waiting for a plugin's answers never keeps the loop from control lines, pushes or a signal.
    enum ReloadStep: Sendable {
        /// The file was read again.
        case read(Result<LoadedConfiguration, ConfigurationError>)
        /// The plugins said what they think of the changed sources; `Configuration` is the new one with their
        /// template rules applied, for the core.
        case validated(LoadedConfiguration, [Kind: TemplateRules], PluginValidation)
        /// The file has problems of its own, and the plugins said what they think of the changed sources of
        /// the part that read: all of it is reported together, as at start.
        case refused(ConfigurationError, PluginValidation)
    }

    /// What would start each kind of the configuration that read (all of it, or the part of a failed one),
    /// for the kinds whose plugin is found: looking for a plugin's executable is I/O, so the loop does it
    /// for `ReloadStateMachine`.
    private static func origins(of read: Result<LoadedConfiguration, ConfigurationError>) -> [Kind: PluginOrigin] {
        let configuration: LoadedConfiguration
        switch read {
        case .success(let next): configuration = next
        case .failure(let error):
            guard let partial = error.partial else { return [:] }
            configuration = partial
        }
        let resolver = PluginResolver(configured: configuration.configuration.plugins)
        var origins: [Kind: PluginOrigin] = [:]
        for kind in configuration.configuration.kinds { origins[kind] = LoaderFactory.origin(of: kind, resolver: resolver) }
        return origins
    }

    #if DEBUG
        /// A test seam, compiled in debug builds only: `HAMMOCK_TEST_LOOP_STALL_MS=N` has the engine's loop stop
        /// taking inputs for N ms each time it takes control lines, as a loop stuck on a hung call would, so
        /// that a test can see a stuck loop stop the watchdog pings.
        static let testLoopStall: Duration? = ProcessInfo.processInfo.environment["HAMMOCK_TEST_LOOP_STALL_MS"]
            .flatMap { Int($0) }.map { .milliseconds($0) }
    #endif

    /// Stops every plugin (and every command they run); returns when they are gone.
    public func shutdownLoaders() async {
        await Self.shutdown(Array(loaders.values))
    }

    private static func shutdown(_ loaders: [PluginHost]) async {
        await withTaskGroup(of: Void.self) { group in
            for loader in loaders { group.addTask { await loader.shutdown() } }
        }
    }


    /// Runs until `--once` is done, a signal arrives or stdout closes; returns the exit status.
    ///
    /// `signals` has handled signals since the command began; from here on it sends them to this loop. A
    /// stop (a signal, a closed stdout) is seen before the next input, however many wait before it.
    public func run(signals: SignalRouter) async -> Int32 {
        let inbox = inbox
        // A closed stdout (or a plugin's closed stdin) must fail the write with EPIPE, not kill the engine
        // before it can shut its plugins down.
        signal(SIGPIPE, SIG_IGN)
        OrphanReaper.becomeSubreaper()
        let stop = StopRequest()
        let definitions = loaded.configuration.views
        let bar = options.format == .json || options.format == .tui
            ? nil
            : BarEncoder(
                format: options.format,
                // i3bar without --view: every view, in the configuration's order.
                views: options.format == .i3bar && options.views.isEmpty
                    ? definitions : options.views.compactMap { id in definitions.first { $0.id == id } })
        let writer: any EngineOutput
        let controls: ControlMailbox
        if options.format == .tui {
            // Keys, not control lines: their commands carry no id, so nothing waits for room for an answer.
            let keyCommands = ControlMailbox()
            controls = keyCommands
            writer = WatchTerminal(
                title: URL(fileURLWithPath: loaded.file).lastPathComponent, sources: loaded.configuration.sources.map(\.id),
                views: definitions, secrets: standardError.secrets,
                act: { if keyCommands.command($0) { inbox.yield(.controls) } },
                quit: { if stop.request(.quit, signal: nil) { inbox.yield(.stop) } })
        } else {
            let lines = OutputWriter(
                secrets: standardError.secrets, bar: bar, metrics: options.metrics,
                reportProblem: { [logger = self.logger] in logger.warning("\($0)") }
            ) {
                if stop.request(.stdoutClosed, signal: nil) { inbox.yield(.stop) }
            }
            writer = lines
            // A line with an id waits until stdout has room for its answer, which is never dropped.
            controls = ControlMailbox(waitForRoomForAnswers: { lines.waitForRoomForAnswers() })
        }
        let isI3bar = options.format == .i3bar
        let reloadWasAsked = signals.route { number in
            switch number {
            case SIGHUP: inbox.yield(.reload)
            case SIGUSR1: inbox.yield(.loadEverySource(failingOnly: true))
            case SIGUSR2: inbox.yield(.loadEverySource(failingOnly: false))
            // i3bar's stop_signal and cont_signal: the bar is hidden or shown again.
            case BarEncoder.i3barStopSignal: if isI3bar { writer.pause() }
            case BarEncoder.i3barContSignal: writer.resume()
            case SIGWINCH: writer.resized()
            case SIGINT: if stop.request(.interrupt, signal: number) { inbox.yield(.stop) }
            default: if stop.request(.signal, signal: number) { inbox.yield(.stop) }
            }
        }
        // A stop signal came during start-up: its own stop is under way, and it exits.
        guard let reloadWasAsked else { await signals.waitForStartUpStop() }
        if reloadWasAsked { inbox.yield(.reload) }
        let clock = EngineClock(inbox: inbox)

        // One owner for every part of a run, each a child task: the writer, stdin, the clock and the orphan
        // sweep here; reload steps and loaders being retired in `serve`'s group. A task group of our own
        // rather than swift-service-lifecycle's `ServiceGroup`: hammock catches signals from its first
        // instruction (`SignalRouter`), before any group exists, and its stop has an order of its own
        // (plugins, then the cache, then the drain with `bye` last) that a graceful shutdown of services in
        // reverse start order does not express.
        return await withTaskGroup(of: Void.self) { services in
            services.addTask { await writer.run() }
            services.addTask { await clock.run() }
            // `hammock watch` reads keys from stdin itself.
            if options.format != .tui {
                services.addTask { [options] in
                    await Self.readControls(into: controls, inbox: inbox, clicks: options.format == .i3bar)
                }
            }
            services.addTask { await Self.sweepOrphans() }
            if let interval = options.notifySocket?.watchdogInterval {
                // The timer only asks; the loop pings when it takes the input, so a stuck loop stops the pings.
                // One ask waits at a time: a loop that was busy for a while pings once when it is back, not once
                // for every interval it missed.
                services.addTask {
                    while (try? await Task.sleep(for: interval)) != nil {
                        if !self.watchdogAsked.exchange(true, ordering: .acquiringAndReleasing) { inbox.yield(.watchdog) }
                    }
                }
            }
            let status = await withTaskGroup(of: Void.self) { work in
                await serve(writer: writer, controls: controls, clock: clock, stop: stop, signals: signals, work: &work)
            }
            // The writer is over (`finish` has returned); the rest runs until told to stop.
            services.cancelAll()
            return status
        }
    }

    /// Control lines from stdin (i3bar's click events with `clicks`), until cancelled. Reading blocks, so on
    /// a thread of its own; the thread waits in `poll` for stdin or for the cancellation.
    private static func readControls(into controls: ControlMailbox, inbox: EngineInbox, clicks: Bool) async {
        let stopping = WakeupPipe()
        await withTaskCancellationHandler {
            await OwnThread.run(named: "hammock.stdin") {
                LineReader.read(
                    descriptor: STDIN_FILENO, maximumLineLength: ControlMailbox.maximumLineLength,
                    stopDescriptor: stopping.readEnd
                ) {
                    if clicks ? controls.receiveClick($0) : controls.receive($0) { inbox.yield(.controls) }
                }
            }
        } onCancel: {
            stopping.wake()
            controls.close()  // a reader waiting for room lets go of its line
        }
    }

    /// A backstop: hammock is a subreaper, so an orphan that a plugin's guard missed comes to it, and is
    /// ended here within 2 s. A timer, until cancelled.
    private static func sweepOrphans() async {
        while (try? await Task.sleep(for: .seconds(2))) != nil { OrphanReaper.sweep() }
    }

    /// The engine loop, then the stop; returns the exit status. Reload steps and retiring loaders are
    /// children of `work`, which the stop waits for once it has shut every loader down (which ends any
    /// wait on one): a reload stuck on a plugin never holds up a stop.
    private func serve(
        writer: any EngineOutput, controls: ControlMailbox, clock: EngineClock, stop: StopRequest, signals: SignalRouter,
        work: inout TaskGroup<Void>
    ) async -> Int32 {
        let inbox = inbox
        let logger = logger
        let standardError = standardError
        let mode: EngineCore.Mode = options.once ? .once(deadline: options.onceDeadline) : .continuous
        var core = EngineCore(configuration: loaded.configuration, mode: mode, seed: UInt64.random(in: 0...UInt64.max))
        // The plugins said hello when they checked the sources (`validatePlugins`), so their rules are known.
        for (kind, rules) in await Self.templateRules(for: loaded.configuration, from: self.loaders) {
            _ = core.learnTemplateRules(rules, for: kind, now: .current)
        }
        // The loaders by role (`ReloadStateMachine.Role`): those that serve, and those a reload made.
        var loaders = self.loaders
        var fresh: [Kind: PluginHost] = [:]
        var checkers: [Kind: PluginHost] = [:]
        var reloads = ReloadStateMachine(current: loaded, running: loaders.mapValues(\.origin))
        var configurationWatch = options.watchConfiguration ? ConfigurationWatch(inbox: inbox, logger: logger) : nil
        configurationWatch?.follow([loaded.files])

        var exitStatus: Int32 = 0
        var isFinished = false
        let cache = CacheStore(
            configurationFile: loaded.file, secrets: standardError.secrets, warn: { [logger] in logger.warning("\($0)") })
        // A child of the loop's own task: the stop waits for it to write what waits.
        async let caching: Void = cache.run()
        let clickCommands = ClickCommands(logger: logger, standardError: standardError)
        // systemd's Type=notify: nothing at all is kept or computed without NOTIFY_SOCKET.
        let notifySocket = options.notifySocket
        var notifier = notifySocket.map { _ in ServiceNotifier(sources: loaded.configuration.sources) }
        var sourceMetrics = options.metrics.map { SourceMetricsObserver(metrics: $0, sources: loaded.configuration.sources.map(\.id)) }
        func notify(_ message: String?) {
            if let message { notifySocket?.send(message) }
        }
        func perform(_ actions: [EngineAction]) async -> Bool {
            // The loads of one turn go to their loader in one call (one hop onto its actor, one write to the
            // plugin), in order, and its lines to the writer together (one wake-up of its thread); what else
            // reaches a loader or the writer (a cancel, a removal, a reload) or ends the run goes after
            // what was decided before it.
            var loadsToStart: [(kind: Kind, requests: [LoadRequest])] = []
            var lines: [OutputLine] = []
            func handOver() async {
                writer.send(contentsOf: lines)
                lines.removeAll()
                for (kind, requests) in loadsToStart { await loaders[kind]?.start(requests) }
                loadsToStart.removeAll()
            }
            for action in actions {
                switch action {
                case .startLoad, .emit, .persist, .runClickCommand: break
                case .cancelLoad, .removeSource, .reload, .finish: await handOver()
                }
                switch action {
                case .emit(let line):
                    lines.append(line)
                    if notifier != nil { notify(notifier!.observe(line)) }
                    sourceMetrics?.observe(line)
                case .persist(let source, let content):
                    await cache.save(source, content: content)
                case .reload(let ids):
                    // A reload line over the bound is refused at once.
                    for case .emit(let line) in carryOut(reloads.requested(replyingTo: ids)) { writer.send(line) }
                case .startLoad(let request):
                    if let index = loadsToStart.firstIndex(where: { $0.kind == request.kind }) {
                        loadsToStart[index].requests.append(request)
                    } else {
                        loadsToStart.append((request.kind, [request]))
                    }
                case .cancelLoad(let source, let kind, let loadID):
                    await loaders[kind]?.cancel(source: source, loadID: loadID.rawValue)
                case .removeSource(let source, let kind):
                    await loaders[kind]?.remove(source: source)
                case .runClickCommand(let click):
                    work.addTask { await clickCommands.run(click) }
                case .finish(let status):
                    notify(notifier?.finished())
                    exitStatus = status
                    isFinished = true
                    return false
                }
            }
            await handOver()
            return true
        }

        /// Shuts `loader` down without waiting for it here; the stop waits for it.
        func retire(_ loader: PluginHost?) {
            guard let loader else { return }
            work.addTask { await loader.shutdown() }
        }

        /// Carries out what the reload protocol decided; returns what goes through `perform` after it (the
        /// core's actions, acks and refusals), in order.
        func carryOut(_ reloadActions: [ReloadStateMachine.Action]) -> [EngineAction] {
            var actions: [EngineAction] = []
            for action in reloadActions {
                switch action {
                case .notifyStarted:
                    notify(notifier?.reloadStarted(monotonicMicroseconds: NotifySocket.monotonicMicroseconds))
                case .read:
                    let source = source
                    work.addTask { inbox.yield(.reloadStep(.read(source.read()))) }
                case .addSecrets(let secrets):
                    standardError.secrets.add(secrets)
                case .watch(let files):
                    configurationWatch?.follow(files)
                case .makeLoader(let kind, let origin, let role):
                    let loader = PluginHost(kind: kind, origin: origin, inbox: inbox, logger: logger, standardError: standardError)
                    if role == .checker { checkers[kind] = loader } else { fresh[kind] = loader }
                case .check(let sources, let configuration, let roles, let outcome):
                    var checking: [Kind: PluginHost] = [:]
                    for (kind, role) in roles {
                        switch role {
                        case .running: checking[kind] = loaders[kind]
                        case .fresh: checking[kind] = fresh[kind]
                        case .checker: checking[kind] = checkers[kind]
                        }
                    }
                    work.addTask { [checking] in
                        let validation = await Self.validate(sources, of: configuration, with: checking)
                        switch outcome {
                        case .refuse(let error):
                            inbox.yield(.reloadStep(.refused(error, validation)))
                        case .commitUnlessRefused:
                            let rules = await Self.templateRules(for: configuration.configuration, from: checking)
                            inbox.yield(.reloadStep(.validated(configuration, rules, validation)))
                        }
                    }
                case .retire(let kind, .running): retire(loaders.removeValue(forKey: kind))
                case .retire(let kind, .fresh): retire(fresh.removeValue(forKey: kind))
                case .retire(let kind, .checker): retire(checkers.removeValue(forKey: kind))
                case .promote(let kind):
                    loaders[kind] = fresh.removeValue(forKey: kind)
                case .logReloaded(let file):
                    logger.notice("configuration reloaded", metadata: ["file": "\(file)"])
                case .reconfigure(let next, let rules, let replacedKinds):
                    writer.viewsReloaded(next.configuration.views)
                    for (kind, kindRules) in rules { actions += core.learnTemplateRules(kindRules, for: kind, now: .current) }
                    actions += core.reconfigure(next.configuration, replacingKinds: replacedKinds, now: .current)
                case .acknowledge(let ids):
                    actions += ids.map { .emit(.ack(id: $0)) }
                case .logRefusal(let error):
                    for diagnostic in error.diagnostics { logger.error("\(diagnostic.formatted(file: error.file))") }
                case .refuse(let ids, let message):
                    actions += OutputLine.refusals(message, answering: ids).map(EngineAction.emit)
                case .ended(let sources):
                    notify(notifier?.reloadEnded(sources: sources))
                    options.metrics?.reloads(outcome: sources == nil ? "failure" : "success").increment()
                    // The series of sources the reload removed leave the scrape (a stale failure count would
                    // keep an alert firing for a source that no longer exists).
                    if let sources { sourceMetrics?.configured(sources.map(\.id)) }
                }
            }
            return actions
        }

        let restored = await cache.restore(core.cachedSourceIDs)
        // `--once`'s deadline counts from here, as the core's does; its output may take the drain time more.
        let onceOutputDeadline = MonotonicInstant.current + options.onceDeadline + options.drainTimeout
        var running = await perform(core.start(now: .current, restored: restored))
        clock.schedule(core.nextDeadline)
        if running {
            inputs: for await input in inputs {
                if stop.isRequested { break }
                let now = EngineTime.current
                let actions: [EngineAction]
                switch input {
                case .loadFinished(let source, let loadID, let outcome):
                    actions = core.loadFinished(source: source, loadID: LoadID(loadID), outcome: outcome, now: now)
                case .loadsFinished(let answers):
                    actions = answers.flatMap { core.loadFinished(source: $0.source, loadID: LoadID($0.loadID), outcome: $0.outcome, now: now) }
                case .loadQueued(let source, let loadID):
                    actions = core.loadQueued(source: source, loadID: LoadID(loadID), now: now)
                case .loadStarted(let source, let loadID):
                    actions = core.loadStarted(source: source, loadID: LoadID(loadID), now: now)
                case .pushed(let source, let mailbox):
                    actions = mailbox.take().map { core.pushed(source: source, content: $0, now: now) } ?? []
                case .pushedError(let source, let error):
                    actions = core.pushedError(source: source, error: error, now: now)
                case .controls:
                    #if DEBUG
                        if let stall = Self.testLoopStall { try? await Task.sleep(for: stall) }
                    #endif
                    actions = []
                    for entry in controls.take() {
                        // A stop goes before the control lines that came ahead of it.
                        if stop.isRequested { break inputs }
                        switch entry {
                        case .invalid(let message, nil) where options.format == .i3bar:
                            logger.warning("stdin: \(message)")  // the bar shows no error lines
                        case .invalid(let message, let id):
                            running = await perform([.emit(.error(message: message, id: id))])
                        case .click(let click):
                            if let clicked = core.clicked(click, now: .current) {
                                running = await perform(clicked)
                            } else {
                                logger.warning("a click on \"\(click.view)\", which is not a view; ignored")
                            }
                        case .command(let command, let ids):
                            running = await perform(core.handle(command, replyingTo: ids, now: .current))
                        }
                        if !running { break inputs }
                    }
                case .tick:
                    actions = core.tick(now: now)
                case .clockJumped:
                    logger.notice("the clock jumped (a suspend, or the wall clock was set): refreshing every polled source")
                    actions = core.clockJumped(now: now)
                case .reload:
                    actions = carryOut(reloads.requested())
                case .loadEverySource(let failingOnly):
                    actions = core.loadEverySource(failingOnly: failingOnly, now: now)
                case .templateRulesLearned(let kind):
                    // Only the running plugin's word counts, not a plugin started to check a reload.
                    if let host = loaders[kind], let rules = await host.templateRules {
                        actions = core.learnTemplateRules(rules, for: kind, now: now)
                    } else {
                        actions = []
                    }
                case .reloadStep(.read(let result)):
                    actions = carryOut(reloads.read(result, origins: Self.origins(of: result)))
                case .reloadStep(.validated(let next, let rules, let validation)):
                    actions = carryOut(reloads.checked(next, rules: rules, validation: validation))
                case .reloadStep(.refused(let error, let validation)):
                    actions = carryOut(reloads.checkedRefusal(error, validation: validation))
                case .watchdog:
                    watchdogAsked.store(false, ordering: .releasing)
                    notify("WATCHDOG=1")
                    actions = []
                case .stop:
                    actions = []  // its reason is in `stop`, seen above
                }
                running = await perform(actions)
                if !running { break }
                clock.schedule(core.nextDeadline)
            }
        }

        controls.close()
        notify(notifier?.stopping())
        // From here on a signal (a second one, for a stop) means: stop waiting for the consumer.
        _ = signals.route { number in
            guard !SignalRouter.nonStopping.contains(number) else { return }
            _ = stop.request(number == SIGINT ? .interrupt : .signal, signal: number)
            writer.interrupt()
        }
        let stopped = stop.current
        await clickCommands.endAll()
        await Self.shutdown(Array(loaders.values) + Array(fresh.values) + Array(checkers.values))
        // Loaders retired by a reload, and reload steps (the shutdown above ended their waits on plugins).
        await work.waitForAll()
        OrphanReaper.sweep()
        cache.finish()
        await caching
        if let stopped {
            logger.info("stopping", metadata: ["reason": "\(stopped.reason)"])
        }
        // The core says the last word: `bye`, unless `--once` said it already.
        for case .emit(let line) in core.stop(reason: stopped?.reason ?? .signal) { writer.send(line) }
        return await finishOutput(
            writer, stopped: stopped, isFinished: isFinished, exitStatus: exitStatus, stop: stop,
            onceOutputDeadline: onceOutputDeadline)
    }

    /// Writes what is left for the consumer and decides the exit status.
    ///
    /// Continuous mode exits 0 however it stopped, after at most `drainTimeout` for a consumer that does not
    /// read. `--once` exits 0 only when every source loaded and every line, `bye` last, reached the consumer
    /// by its deadline and the drain time after it (`onceOutputDeadline`): a consumer that leaves first, or
    /// has not read by then, gets status 1, a signal 128 + its number, and stderr says why. The deadline
    /// ends the run whatever the consumer does.
    private func finishOutput(
        _ writer: any EngineOutput, stopped: StopRequest.Reason?, isFinished: Bool, exitStatus: Int32, stop: StopRequest,
        onceOutputDeadline: MonotonicInstant
    ) async -> Int32 {
        if isFinished {
            let left = max(onceOutputDeadline - MonotonicInstant.current, .zero)
            switch await writer.finish(with: nil, deadline: left) {
            case .complete:
                return exitStatus
            case .incomplete(let unwritten) where MonotonicInstant.current >= onceOutputDeadline:
                logger.error("stdout was not read before --once's deadline (\(options.onceDeadline.humanReadable), and \(options.drainTimeout.humanReadable) to write): \(unwritten) lines not written, bye included")
                return 1
            case .incomplete(let unwritten):
                logger.error("stdout was closed before --once had written every line: \(unwritten) not written, bye included")
                return 1
            case .interrupted:
                let signal = stop.current?.signal ?? SIGTERM
                logger.error("stopped by signal \(signal) before the consumer had read every line of --once; the output is cut short")
                return 128 + signal
            }
        }
        let completion = await writer.finish(with: nil, deadline: options.drainTimeout)
        if completion != .complete && stopped?.reason != .stdoutClosed {
            logger.notice("stdout was not read within \(options.drainTimeout.humanReadable) of the stop: the last lines and bye were not written")
        }
        guard options.once else { return 0 }
        // `--once` did not get to the end: its status must not say it did.
        if let signal = stopped?.signal {
            logger.error("--once was stopped by signal \(signal) before every source was loaded")
            return 128 + signal
        }
        logger.error("stdout was closed before --once was done")
        return 1
    }
}

/// Why the engine stops, set by whoever asks first (a signal, a closed stdout) and read by the loop before
/// each input, so that a stop never waits behind the inputs queued before it. A `Mutex`: signal handlers,
/// the stdout thread and the loop all touch it, each for a few loads.
final class StopRequest: Sendable {
    struct Reason: Sendable {
        var reason: StopReason
        /// The signal that asked for it, if one did.
        var signal: Int32?
    }

    private let state = Mutex<Reason?>(nil)

    /// Records the stop; false when one was already asked for (the first reason stands).
    func request(_ reason: StopReason, signal: Int32?) -> Bool {
        state.withLock { current in
            guard current == nil else { return false }
            current = Reason(reason: reason, signal: signal)
            return true
        }
    }

    var current: Reason? { state.withLock { $0 } }
    var isRequested: Bool { state.withLock { $0 != nil } }
}

/// hammock's SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGURG, SIGCONT and SIGWINCH, from the first instruction of a command to its exit.
///
/// They are caught from the moment this is made (see HammockSystem's `SignalCatcher`), so that none can end
/// hammock before it has stopped what it started. During start-up (reading the configuration, starting
/// plugins, waiting for their answers) SIGINT or SIGTERM stops every plugin started so far and exits with the
/// status the command chose, and a second one exits at once; SIGHUP is kept for the engine, since the file may have changed
/// after it was read. Once the engine runs, signals go where it routes them. SIGPIPE is ignored for good, so
/// that a closed stdout or stderr is an error to handle, not death.
public final class SignalRouter: Sendable {
    private enum Phase {
        case startingUp
        case stoppingStartUp
        case routed(@Sendable (Int32) -> Void)
    }

    private struct State {
        var phase = Phase.startingUp
        var engines: [Engine] = []
        var standardError: StandardError?
        var reloadWasAsked = false
        /// The stop of a start-up, which ends in `exit`.
        var startUpStop: Task<Void, Never>?
    }

    /// A `Mutex`: the signal thread and the command's task both read and move the phase, for a few loads.
    private let state = Mutex(State())
    private let exitStatus: @Sendable (Int32) -> Int32

    /// Call first thing. `exitStatus` is the status for a stop during start-up, given the signal.
    public init(exitStatusDuringStartUp exitStatus: @escaping @Sendable (Int32) -> Int32) {
        signal(SIGPIPE, SIG_IGN)
        self.exitStatus = exitStatus
        SignalCatcher.catchSignals([SIGINT, SIGTERM, SIGHUP] + Self.nonStopping.filter { $0 != SIGHUP }) { [self] number in
            received(number)
        }
    }

    /// The signals that never stop hammock: SIGHUP reloads, SIGUSR1 and SIGUSR2 load, SIGURG and SIGCONT
    /// pause and resume `--format i3bar`'s output (`BarEncoder.i3barStopSignal`, `i3barContSignal`).
    /// SIGWINCH redraws `hammock watch` at its new size.
    static let nonStopping: [Int32] = [SIGHUP, SIGUSR1, SIGUSR2, SIGURG, SIGCONT, SIGWINCH]

    /// Where a start-up stop writes its last words.
    public func log(to standardError: StandardError) {
        state.withLock { $0.standardError = standardError }
    }

    /// A stop during start-up stops `engine`'s plugins. False when such a stop is already under way: the
    /// caller must start nothing more (`waitForStartUpStop`).
    public func stopsDuringStartUp(_ engine: Engine) -> Bool {
        state.withLock { state in
            guard case .startingUp = state.phase else { return false }
            state.engines.append(engine)
            return true
        }
    }

    /// From now on every signal goes to `handler`. Returns nil when a start-up stop is under way (it exits),
    /// else whether a SIGHUP came during start-up.
    public func route(_ handler: @escaping @Sendable (Int32) -> Void) -> Bool? {
        state.withLock { state in
            if case .stoppingStartUp = state.phase { return nil }
            state.phase = .routed(handler)
            defer { state.reloadWasAsked = false }
            return state.reloadWasAsked
        }
    }

    /// Waits for the start-up stop under way, which exits.
    public func waitForStartUpStop() async -> Never {
        await state.withLock { $0.startUpStop }?.value
        fatalError("hammock: the start-up stop ended without exiting")
    }

    /// Waits for good when a start-up stop is under way: what a step of start-up found out once the stop
    /// ended its plugins (they "failed") must not be reported, nor the run go on.
    public func waitIfStopping() async {
        let stopping = state.withLock { state in
            if case .stoppingStartUp = state.phase { true } else { false }
        }
        if stopping { await waitForStartUpStop() }
    }

    private enum Action {
        case route(@Sendable (Int32) -> Void)
        case exitNow
        case nothing
    }

    private func received(_ number: Int32) {
        let action = state.withLock { state -> Action in
            switch state.phase {
            case .routed(let handler):
                return .route(handler)
            case .startingUp where number == SIGHUP:
                state.reloadWasAsked = true
                return .nothing
            case .startingUp where Self.nonStopping.contains(number):
                return .nothing  // every source loads as the engine starts anyway; nothing is written yet
            case .startingUp:
                state.phase = .stoppingStartUp
                state.startUpStop = Self.stopStartUp(
                    state.engines, log: state.standardError, signal: number, status: exitStatus(number))
                return .nothing
            case .stoppingStartUp:
                return Self.nonStopping.contains(number) ? .nothing : .exitNow
            }
        }
        switch action {
        case .route(let handler):
            handler(number)
        case .exitNow:
            exit(exitStatus(number))
        case .nothing:
            break
        }
    }
}

extension SignalRouter {
    /// Stops the plugins of `engines`, then exits. Its own task, not a child of the start-up it ends: that
    /// start-up is the task it stops, waiting in `waitForStartUpStop`.
    fileprivate static func stopStartUp(
        _ engines: [Engine], log standardError: StandardError?, signal number: Int32, status: Int32
    ) -> Task<Void, Never> {
        Task.detached {
            standardError?.log(level: "notice", message: "stopped by signal \(number) during start-up")
            await withTaskGroup(of: Void.self) { group in
                for engine in engines { group.addTask { await engine.shutdownLoaders() } }
            }
            OrphanReaper.sweep()
            standardError?.flush(timeout: .milliseconds(500))
            exit(status)
        }
    }
}
