import FoundationEssentials
import Glibc
import HammockConfig
import HammockCore
import HammockJSON
import HammockLogging
import HammockPluginHost
import HammockProtocol
import HammockRendering
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
    /// What stdout reads, and so what loads: everything, or for a bar format its views' sources.
    public var stdoutSubscription: Subscription { .reading(format, views: views) }
    /// What loads at start, for the plugins to start: what stdout reads (`--once`: everything).
    public var startDemand: Demand { once ? .everything : stdoutSubscription.demand }
    /// systemd's notify socket (`Type=notify`), when hammock runs under it.
    public var notifySocket: NotifySocket?
    /// `--metrics`: what counts what the engine does (HammockMetrics' `EngineMetrics`); nil costs one branch per line
    /// written.
    public var metrics: (any EngineObserver)?
    /// `--watch-config`: a change to a file of the configuration reloads it (`ConfigurationWatch`).
    public var watchConfiguration: Bool
    /// `hammock serve --idle-exit`: stop once no client has been connected for this long (nil: never).
    public var idleExit: Duration?
    /// Number every state line engine-wide (`EventJournal`), for the HTTP door's event streams and their
    /// resumption (`--http`).
    public var numbersEvents = false

    public init(
        once: Bool = false, onceDeadline: Duration = .seconds(30), drainTimeout: Duration = .seconds(2),
        format: StdoutFormat = .json, views: [ViewID] = [], notifySocket: NotifySocket? = nil,
        metrics: (any EngineObserver)? = nil, watchConfiguration: Bool = false, idleExit: Duration? = nil,
        numbersEvents: Bool = false
    ) {
        self.numbersEvents = numbersEvents
        self.idleExit = idleExit
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
/// carries out what it asks for. The decisions are pure values' (`EngineCore` for sources, views, output,
/// clicks and the cache's restore, `ReloadStateMachine` for the reload protocol, `EngineStop` for the stop's
/// order and exit status); the loop holds the I/O objects they name (the loaders, the writer, the cache) and
/// does the I/O. Everything it reaches outside itself comes from its `EngineEnvironment`, so a test runs a
/// whole engine in memory (`EmbeddedEngine` in `Tests/HammockEngineTests`).
public final class Engine: Sendable {
    private let loaded: LoadedConfiguration
    /// What the loop reaches outside itself: the clocks, the configuration a reload reads, the plugins,
    /// the cache's directory (`EngineEnvironment.system` in hammock; a test's own in memory).
    private let environment: EngineEnvironment
    private let options: RunOptions
    private let logger: Logger
    private let inputs: AsyncStream<EngineInput>
    /// Everything that wakes the loop goes in here (internal: a test in memory sends signals' inputs).
    let inbox: EngineInbox
    private let loaders: [Kind: PluginHost]
    private let standardError: StandardError
    /// Whether the watchdog timer's ask waits in the inbox (see `run`).
    private let watchdogAsked = Atomic<Bool>(false)

    /// - Parameter standardError: shared with the logger, so that one set of secrets (grown by reloads) is
    ///   redacted from everything hammock writes.
    public convenience init(
        configuration: LoadedConfiguration, from source: ConfigurationSource, options: RunOptions, logger: Logger,
        standardError: StandardError
    ) {
        self.init(
            configuration: configuration, environment: .system(source: source), options: options, logger: logger,
            standardError: standardError)
    }

    /// An engine over `environment`; its first plugin hosts come from the environment's catalog, as a
    /// reload's do.
    init(
        configuration: LoadedConfiguration, environment: EngineEnvironment, options: RunOptions, logger: Logger,
        standardError: StandardError
    ) {
        self.loaded = configuration
        self.environment = environment
        self.options = options
        self.logger = logger
        (inputs, inbox) = AsyncStream.makeStream(of: EngineInput.self)
        self.standardError = standardError
        standardError.secrets.add(configuration.configuration.secrets)
        loaders = environment.plugins.makeHosts(
            for: configuration.configuration, inbox: inbox, logger: logger, standardError: standardError)
    }

    /// What the plugins said of the configuration's sources.
    public struct PluginValidation: Sendable {
        /// Problems with the options as written, at their YAML line and column.
        public var optionProblems: [Diagnostic] = []
        /// Plugins that could not start or died while checking, at each affected source.
        public var pluginFailures: [Diagnostic] = []
    }

    /// Asks the running loop `question`; nil when no answer comes within `timeout` (the loop is stuck, or not
    /// running). The answer comes in the loop's own turn, after what waited in its inbox before it.
    public func ask(_ question: EngineQuestion, timeout: Duration) async -> EngineAnswer? {
        let inbox = inbox
        return await withCheckedContinuation { continuation in
            let answer = AnswerSlot(continuation)
            inbox.yield(.question(question, reply: { answer.resume(returning: $0) }))
            // Ends after `timeout`, whichever came first.
            Task {
                try? await Task.sleep(for: timeout)
                answer.resume(returning: nil)
            }
        }
    }

    /// The one resume of `ask`'s wait: the loop's answer or the timeout, whichever comes first.
    private final class AnswerSlot: Sendable {
        private let continuation: Mutex<CheckedContinuation<EngineAnswer?, Never>?>

        init(_ continuation: CheckedContinuation<EngineAnswer?, Never>) {
            self.continuation = Mutex(continuation)
        }

        func resume(returning answer: EngineAnswer?) {
            continuation.withLock { $0.take() }?.resume(returning: answer)
        }
    }

    /// Starts the plugins and asks each to check its sources' options, as written.
    ///
    /// `hammock check` treats a plugin failure as an error; `hammock run` goes on and lets supervision
    /// restart the plugin, while its sources show why they do not load.
    ///
    /// Only the plugins of kinds that `demand` watches a source of start, and each checks all of its kind's
    /// sources: `hammock serve` starts with `Demand.keptOnly`, so a kind nobody watches yet starts no
    /// plugin. Its plugin starts with the first load of one of its sources, and checks them then; what it
    /// refuses is logged at its line and column and is the source's error (`invalidOptions`).
    public func validatePlugins(for demand: Demand = .everything) async -> PluginValidation {
        let configuration = loaded.configuration
        let watched = EngineCore.watchedSources(by: demand, in: configuration)
        let kinds = Set(configuration.sources.filter { watched.contains($0.id) }.map(\.kind))
        return await Self.validate(configuration.sources.filter { kinds.contains($0.kind) }, of: loaded, with: loaders)
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
    /// templated sources back until the plugin's hello brings them (`PluginHostEvent.templateRulesLearned`).
    static func templateRules(
        for configuration: Configuration, from loaders: [Kind: PluginHost], watched: Set<SourceID>? = nil
    ) async -> [Kind: TemplateRules] {
        var rules: [Kind: TemplateRules] = [:]
        let templated = configuration.sources.filter { !$0.templates.isEmpty && watched?.contains($0.id) != false }
        for kind in Set(templated.map(\.kind)) {
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
    private func origins(of read: Result<LoadedConfiguration, ConfigurationError>) -> [Kind: PluginOrigin] {
        let configuration: LoadedConfiguration
        switch read {
        case .success(let next): configuration = next
        case .failure(let error):
            guard let partial = error.partial else { return [:] }
            configuration = partial
        }
        var origins: [Kind: PluginOrigin] = [:]
        for kind in configuration.configuration.kinds {
            origins[kind] = environment.plugins.origin(kind, configuration.configuration.plugins)
        }
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


    /// The secrets redacted from everything hammock writes (a client's output takes them too).
    var secrets: Secrets { standardError.secrets }

    /// The view `id` of the configuration the engine started with.
    func view(_ id: ViewID) -> ViewDefinition? { loaded.configuration.views.first { $0.id == id } }

    /// What encodes the lines for `--format`'s status bar; nil for the protocol's lines and the watch screen.
    var barEncoder: BarEncoder? {
        let definitions = loaded.configuration.views
        return options.format == .json || options.format == .tui
            ? nil
            : BarEncoder(
                format: options.format,
                // i3bar without --view: every view, in the configuration's order.
                views: options.format == .i3bar && options.views.isEmpty
                    ? definitions : options.views.compactMap { id in definitions.first { $0.id == id } })
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
        let bar = barEncoder
        let writer: any EngineOutput
        let controls: ControlMailbox
        if options.format == .tui {
            // Keys, not control lines: their commands carry no id, so nothing waits for room for an answer.
            let keyCommands = ControlMailbox()
            controls = keyCommands
            writer = WatchTerminal(
                title: URL(fileURLWithPath: loaded.file).lastPathComponent, sources: loaded.configuration.sources.map(\.id),
                views: definitions, secrets: standardError.secrets,
                act: { if keyCommands.command($0) { inbox.yield(.controls(.standardOutput)) } },
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

        // One owner for every part of a run, each a child task: stdin and the orphan sweep here; the writer
        // and the clock in `run(output:...)`; reload steps and loaders being retired in `serve`'s group. A
        // task group of our own rather than swift-service-lifecycle's `ServiceGroup`: hammock catches signals
        // from its first instruction (`SignalRouter`), before any group exists, and its stop has an order of
        // its own (`EngineStop.steps`) that a graceful shutdown of services in reverse start order does not
        // express.
        return await withTaskGroup(of: Void.self) { services in
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
            let status = await run(output: writer, controls: controls, stop: stop) {
                // From here on a signal (a second one, for a stop) means: stop waiting for the consumer.
                _ = signals.route { number in
                    guard !SignalRouter.nonStopping.contains(number) else { return }
                    _ = stop.request(number == SIGINT ? .interrupt : .signal, signal: number)
                    writer.interrupt()
                }
            }
            // The writer is over (`finish` has returned); the rest runs until told to stop.
            services.cancelAll()
            return status
        }
    }

    /// `hammock serve`: the engine with no stdout, whose consumers are the clients of `listener`, until a
    /// signal stops it (every client reads `bye`) or, with `--idle-exit`, no client has come for that long.
    /// Returns the exit status; the listener is closed (its socket file removed) before it returns.
    public func serve(listener: UnixListener, maximumClients: Int, stallTimeout: Duration, signals: SignalRouter) async -> Int32 {
        let inbox = inbox
        signal(SIGPIPE, SIG_IGN)
        OrphanReaper.becomeSubreaper()
        let stop = StopRequest()
        let clients = SocketClients(
            listener: listener,
            limits: SocketClients.Limits(maximumClients: maximumClients, stallTimeout: stallTimeout, drainTimeout: options.drainTimeout),
            views: loaded.configuration.views, secrets: standardError.secrets, logger: logger)
        let reloadWasAsked = signals.route { number in
            switch number {
            case SIGHUP: inbox.yield(.reload)
            case SIGUSR1: inbox.yield(.loadEverySource(failingOnly: true))
            case SIGUSR2: inbox.yield(.loadEverySource(failingOnly: false))
            case SIGINT: if stop.request(.interrupt, signal: number) { inbox.yield(.stop) }
            case _ where SignalRouter.nonStopping.contains(number): break  // no bar, no terminal of its own
            default: if stop.request(.signal, signal: number) { inbox.yield(.stop) }
            }
        }
        guard let reloadWasAsked else { await signals.waitForStartUpStop() }
        if reloadWasAsked { inbox.yield(.reload) }
        defer { listener.close() }
        return await withTaskGroup(of: Void.self) { services in
            services.addTask { await Self.sweepOrphans() }
            if let interval = options.notifySocket?.watchdogInterval {
                services.addTask {
                    while (try? await Task.sleep(for: interval)) != nil {
                        if !self.watchdogAsked.exchange(true, ordering: .acquiringAndReleasing) { inbox.yield(.watchdog) }
                    }
                }
            }
            let status = await run(primary: nil, clients: clients, stop: stop) {
                // Stopping: a second stop signal ends the clients' drain.
                _ = signals.route { number in
                    guard !SignalRouter.nonStopping.contains(number) else { return }
                    _ = stop.request(number == SIGINT ? .interrupt : .signal, signal: number)
                    clients.interruptAll()
                }
            }
            services.cancelAll()
            return status
        }
    }

    /// The loop and its stop over `writer` and `controls` (stdout and stdin, which read everything), with the
    /// clock, the configuration, the plugins and the cache of `environment`; returns the exit status. What
    /// `run(signals:)` does around it (signals, stdin, the orphan sweep, the watchdog) is the process's; a test
    /// calls this with an output and a control mailbox in memory (`EmbeddedEngine`). `whenStopping` is called
    /// once the loop has ended.
    func run(
        output writer: any EngineOutput, controls: ControlMailbox, stop: StopRequest,
        whenStopping: @escaping @Sendable () -> Void = {}
    ) async -> Int32 {
        let primary = Consumer(
            id: .standardOutput, subscription: options.stdoutSubscription, output: writer, controls: controls,
            format: options.format)
        return await run(primary: primary, clients: nil, stop: stop, whenStopping: whenStopping)
    }

    /// The loop and its stop over `primary` (stdout, when there is one) and whatever clients `clients`
    /// accepts (`hammock serve`'s socket, a test's connections in memory); returns the exit status.
    func run(
        primary: Consumer?, clients: (any ClientListener)?, stop: StopRequest,
        whenStopping: @escaping @Sendable () -> Void = {}
    ) async -> Int32 {
        let clock = environment.makeClock(inbox)
        return await withTaskGroup(of: Void.self) { services in
            if let primary { services.addTask { await primary.output.run() } }
            services.addTask { await clock.run() }
            if let clients { services.addTask { [inbox] in await clients.run(inbox: inbox) } }
            let status = await withTaskGroup(of: Void.self) { work in
                await serve(primary: primary, clients: clients, clock: clock, stop: stop, whenStopping: whenStopping, work: &work)
            }
            // The writer is over (`finish` has returned); the clock and the listener run until told to stop.
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
                    if clicks ? controls.receiveClick($0) : controls.receive($0) { inbox.yield(.controls(.standardOutput)) }
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
        primary: Consumer?, clients: (any ClientListener)?, clock: any EngineDeadlines, stop: StopRequest,
        whenStopping: @Sendable () -> Void, work: inout TaskGroup<Void>
    ) async -> Int32 {
        let loop = Loop(engine: self, primary: primary, clients: clients, stop: stop)
        // The plugins said hello when they checked the sources (`validatePlugins`), so their rules are known.
        // A kind that no watched source needs yet has its plugin started later, by the core (`startLoader`).
        let watched = loop.core.watchedSources
        for (kind, rules) in await Self.templateRules(for: loaded.configuration, from: loaders, watched: watched) {
            _ = loop.core.learnTemplateRules(rules, for: kind, now: environment.now())
        }
        // A child of the loop's own task: the stop waits for it to write what waits.
        let cache = loop.cache
        async let caching: Void = cache.run()
        // Start: what the cache holds of the sources that keep one, then every source's first load.
        let restored = await cache.restore(loop.core.cachedSourceIDs)
        // `--once`'s deadline counts from here, as the core's does; its output may take the drain time more.
        let onceOutputDeadline = environment.now().instant + options.onceDeadline + options.drainTimeout
        var running = await loop.perform(loop.core.start(now: environment.now(), restored: restored), work: &work)
        if loop.consumers.isEmpty { loop.waitForIdleExit() }
        // The loop: take an input (a stop first), ask the core or the reload machine, carry out what it says,
        // arm the clock for the core's next deadline.
        var pending = inputs.makeAsyncIterator()
        while running {
            clock.schedule(loop.core.nextDeadline)
            guard let input = await pending.next(), !stop.isRequested else { break }
            if case .controls(let consumer) = input { running = await loop.takeControls(from: consumer, work: &work) }
            if running { running = await loop.perform(await loop.decide(input, now: environment.now(), work: &work), work: &work) }
        }

        // The stop, in `EngineStop.steps`' order.
        var stopped: StopRequest.Reason?
        var status: Int32 = 0
        for step in EngineStop.steps {
            switch step {
            case .closeControls:
                loop.idleTimer?.cancel()
                clients?.stopAccepting()
                for consumer in loop.consumers.values { consumer.controls.close() }
                loop.notify(loop.notifier?.stopping())
            case .rerouteSignals:
                whenStopping()
                stopped = stop.current
            case .endClickCommands: await loop.clickCommands.endAll()
            case .shutDownPlugins: await Self.shutdown(Array(loop.loaders.values) + Array(loop.fresh.values) + Array(loop.checkers.values))
            case .waitForWork: await work.waitForAll()  // retired hosts and reload steps (the shutdown ended their waits)
            case .sweepOrphans: environment.sweepOrphans()
            case .finishCache:
                cache.finish()
                await caching
            case .logStopping:
                if let stopped { logger.info("stopping", metadata: ["reason": "\(stopped.reason)"]) }
            case .bye:
                loop.deliver(loop.core.stop(reason: stopped?.reason ?? .signal).compactMap(\.line))
            case .finishOutput:
                status = await finishOutput(
                    loop, stopped: stopped, isFinished: loop.isFinished, exitStatus: loop.exitStatus, stop: stop,
                    onceOutputDeadline: onceOutputDeadline)
            }
        }
        return status
    }

    /// Writes what is left for the consumer, for as long as `EngineStop.drain` says, and returns the exit
    /// status `EngineStop.verdict` decides, logging what it says.
    private func finishOutput(
        _ loop: Loop, stopped: StopRequest.Reason?, isFinished: Bool, exitStatus: Int32, stop: StopRequest,
        onceOutputDeadline: MonotonicInstant
    ) async -> Int32 {
        let deadline: Duration
        switch EngineStop.drain(isFinished: isFinished) {
        case .untilOnceOutputDeadline: deadline = max(onceOutputDeadline - environment.now().instant, .zero)
        case .drainTimeout: deadline = options.drainTimeout
        }
        // Every client drains at once, each for at most the drain time; only stdout's decides the status.
        let clients = loop.consumers.values.filter { $0.id != .standardOutput }
        async let clientsDone: Void = withTaskGroup(of: Void.self) { [drain = options.drainTimeout] group in
            for client in clients {
                group.addTask {
                    _ = await client.output.finish(with: nil, deadline: drain)
                    client.close()
                }
            }
        }
        let completion = await loop.primary?.output.finish(with: nil, deadline: deadline) ?? .complete
        await clientsDone
        let (status, records) = EngineStop.verdict(
            EngineStop.Ending(
                once: options.once, isFinished: isFinished, finishedStatus: exitStatus, completion: completion,
                stopReason: stopped?.reason, stopSignal: isFinished ? stop.current?.signal : stopped?.signal,
                outputDeadlinePassed: environment.now().instant >= onceOutputDeadline,
                onceDeadline: options.onceDeadline, drainTimeout: options.drainTimeout))
        for record in records { logger.log(level: record.level, "\(record.message)") }
        return status
    }
}

extension EngineAction {
    /// The line an `emit` writes.
    var line: OutputLine? {
        if case .emit(let line) = self { line } else { nil }
    }
}

extension Engine {
    /// What the loop owns while it runs, and how it carries out what the core and the reload machine decide:
    /// the core, the plugin hosts by role, the cache, the click runner, systemd's notifier, the metrics'
    /// observer. Owned by `serve`'s task alone, so a class that is not `Sendable`; a method that starts work
    /// off the loop (a reload step, a retiring host, a click command) adds it to `serve`'s group, `work`.
    fileprivate final class Loop {
        let engine: Engine
        /// `hammock run`'s stdout (and stdin); nil under `hammock serve`, whose readers are all clients.
        let primary: Consumer?
        /// Where `hammock serve`'s clients come from (nil for `run`).
        let clients: (any ClientListener)?
        /// Every reader of the engine's lines, the primary included, and which lines each reads.
        var consumers: [ConsumerID: Consumer] = [:]
        /// Under `serve`, the consumers that read their lines from `send`, not from the clients' log.
        var unpublishedConsumers: Set<ConsumerID> = []
        var fanout: Fanout
        /// Every state line's engine-wide number (`RunOptions.numbersEvents`).
        var journal: EventJournal?
        let stop: StopRequest
        var core: EngineCore
        // The loaders by role (`ReloadStateMachine.Role`): those that serve, and those a reload made.
        var loaders: [Kind: PluginHost]
        var fresh: [Kind: PluginHost] = [:]
        var checkers: [Kind: PluginHost] = [:]
        var reloads: ReloadStateMachine
        var configurationWatch: ConfigurationWatch?
        /// How many times the engine has been left without a client (`--idle-exit` counts from the last).
        var idleGeneration = 0
        /// The option problems last logged per source (`PluginHostEvent.optionsRefused`).
        var refusedOptions: [SourceID: [OptionProblem]] = [:]
        /// `--idle-exit`'s wait while no client is connected. Unstructured, so that the stop need not wait
        /// minutes for it: a client's join and the stop cancel it.
        var idleTimer: Task<Void, Never>?
        /// `--once` is done (the core's `.finish`), with this status.
        var isFinished = false
        var exitStatus: Int32 = 0
        let cache: CacheStore
        let clickCommands: any ClickCommandRunner
        // systemd's Type=notify: nothing at all is kept or computed without NOTIFY_SOCKET.
        let notifySocket: NotifySocket?
        var notifier: ServiceNotifier?
        var sourceMetrics: (any EngineLineObserver)?

        var options: RunOptions { engine.options }
        var logger: Logger { engine.logger }
        var environment: EngineEnvironment { engine.environment }
        var standardError: StandardError { engine.standardError }
        var inbox: EngineInbox { engine.inbox }

        init(engine: Engine, primary: Consumer?, clients: (any ClientListener)?, stop: StopRequest) {
            self.engine = engine
            self.primary = primary
            self.clients = clients
            self.stop = stop
            fanout = Fanout(configuration: engine.loaded.file)
            if let primary {
                consumers[primary.id] = primary
                fanout.join(primary.id, primary.subscription)
            }
            let (loaded, options, logger) = (engine.loaded, engine.options, engine.logger)
            journal = options.numbersEvents ? EventJournal(startedAt: engine.environment.now().wall) : nil
            let mode: EngineCore.Mode = options.once ? .once(deadline: options.onceDeadline) : .continuous
            core = EngineCore(
                configuration: loaded.configuration, mode: mode, seed: UInt64.random(in: 0...UInt64.max), demand: fanout.demand,
                calendar: engine.environment.calendar)
            loaders = engine.loaders
            reloads = ReloadStateMachine(current: loaded, running: loaders.mapValues(\.origin))
            configurationWatch = options.watchConfiguration ? ConfigurationWatch(inbox: engine.inbox, logger: logger) : nil
            configurationWatch?.follow([loaded.files])
            cache = CacheStore(
                configurationFile: loaded.file, secrets: engine.standardError.secrets, warn: { [logger] in logger.warning("\($0)") },
                environment: engine.environment.cacheEnvironment)
            clickCommands = engine.environment.makeClickCommands(logger, engine.standardError)
            notifySocket = options.notifySocket
            // Ready once every source that loads has answered: under `serve`, those kept fresh with no client.
            notifier = notifySocket.map { [core] _ in ServiceNotifier(sources: loaded.configuration.sources.filter { core.isWatched($0.id) }) }
            sourceMetrics = options.metrics.map { $0.lineObserver(sources: loaded.configuration.sources.map(\.id)) }
        }

            func notify(_ message: String?) {
                if let message { notifySocket?.send(message) }
            }
            /// Hands `lines` to the consumers that read them (`Fanout.route`); `answering` and `only` as there.
            /// Under `serve`, a turn of state lines for every subscriber goes to the clients once (`publish`),
            /// not once per client: the path of every change a shared engine fans out.
            /// Numbered first (`journal`) when they are new, not a joiner's snapshot.
            func deliver(_ lines: [OutputLine], answering: ConsumerID? = nil, only: ConsumerID? = nil) {
                guard !lines.isEmpty else { return }
                if only == nil { journal?.record(lines) }
                if only == nil, let clients, lines.allSatisfy(\.isRoutedBySubscription) {
                    clients.publish(lines)
                    // The consumers the log does not feed (the HTTP door's streams) take their share here.
                    for id in unpublishedConsumers {
                        for (id, batch) in fanout.route(lines, only: id) { hand(batch, to: id, live: true) }
                    }
                    return
                }
                for (id, batch) in fanout.route(lines, answering: answering, only: only) {
                    hand(batch, to: id, live: only == nil)
                }
            }

            /// Gives a consumer its batch, numbered for an output that shows numbers.
            func hand(_ batch: [OutputLine], to id: ConsumerID, live: Bool) {
                guard let consumer = consumers[id] else { return }
                if let numbered = consumer.numberedOutput, let journal {
                    numbered.send(contentsOf: batch, numbers: journal.numbers(for: batch, ofTurn: live), live: live)
                } else {
                    consumer.output.send(contentsOf: batch)
                }
            }

            /// Carries out `actions` in order; false when the run is to end. `answering`, `only`: the consumer
            /// whose control line they answer, and whether it alone reads their lines (`snapshot`).
            func perform(
                _ actions: [EngineAction], answering: ConsumerID? = nil, only: ConsumerID? = nil, work: inout TaskGroup<Void>
            ) async -> Bool {
                // The loads of one turn go to their loader in one call (one hop onto its actor, one write to the
                // plugin), in order, and its lines to the writer together (one wake-up of its thread); what else
                // reaches a loader or the writer (a cancel, a removal, a reload) or ends the run goes after
                // what was decided before it.
                var loadsToStart: [(kind: Kind, requests: [LoadRequest])] = []
                var lines: [OutputLine] = []
                func handOver() async {
                    deliver(lines, answering: answering, only: only)
                    lines.removeAll()
                    for (kind, requests) in loadsToStart { await loaders[kind]?.start(requests) }
                    loadsToStart.removeAll()
                }
                for action in actions {
                    switch action {
                    case .startLoad, .emit, .persist, .runClickCommand, .startLoader: break
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
                        deliver(carryOut(reloads.requested(replyingTo: ids), work: &work).compactMap(\.line), answering: answering)
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
                        work.addTask { [clickCommands] in await clickCommands.run(click) }
                    case .startLoader(let kind):
                        // Its hello reports the rules (`templateRulesLearned`); only a failure needs saying.
                        let host = loaders[kind]
                        work.addTask { [inbox] in
                            if await host?.templateRulesStartingIfNeeded() == nil { inbox.yield(.loaderFailedToStart(kind)) }
                        }
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
            func retire(_ loader: PluginHost?, work: inout TaskGroup<Void>) {
                guard let loader else { return }
                work.addTask { await loader.shutdown() }
            }

            /// Carries out what the reload protocol decided; returns what goes through `perform` after it (the
            /// core's actions, acks and refusals), in order.
            func carryOut(_ reloadActions: [ReloadStateMachine.Action], work: inout TaskGroup<Void>) -> [EngineAction] {
                var actions: [EngineAction] = []
                for action in reloadActions {
                    switch action {
                    case .notifyStarted:
                        notify(notifier?.reloadStarted(monotonicMicroseconds: NotifySocket.monotonicMicroseconds))
                    case .read:
                        let (read, inbox) = (environment.readConfiguration, inbox)
                        work.addTask { inbox.yield(.reloadStep(.read(read()))) }
                    case .addSecrets(let secrets):
                        standardError.secrets.add(secrets)
                    case .watch(let files):
                        configurationWatch?.follow(files)
                    case .makeLoader(let kind, let origin, let role):
                        let loader = environment.plugins.makeHost(kind, origin, inbox, logger, standardError)
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
                        work.addTask { [checking, inbox] in
                            let validation = await Engine.validate(sources, of: configuration, with: checking)
                            switch outcome {
                            case .refuse(let error):
                                inbox.yield(.reloadStep(.refused(error, validation)))
                            case .commitUnlessRefused:
                                let rules = await Engine.templateRules(for: configuration.configuration, from: checking)
                                inbox.yield(.reloadStep(.validated(configuration, rules, validation)))
                            }
                        }
                    case .retire(let kind, .running): retire(loaders.removeValue(forKey: kind), work: &work)
                    case .retire(let kind, .fresh): retire(fresh.removeValue(forKey: kind), work: &work)
                    case .retire(let kind, .checker): retire(checkers.removeValue(forKey: kind), work: &work)
                    case .promote(let kind):
                        loaders[kind] = fresh.removeValue(forKey: kind)
                    case .logReloaded(let file):
                        logger.notice("configuration reloaded", metadata: ["file": "\(file)"])
                    case .reconfigure(let next, let rules, let replacedKinds):
                        for consumer in consumers.values { consumer.output.viewsReloaded(next.configuration.views) }
                        clients?.viewsReloaded(next.configuration.views)
                        for (kind, kindRules) in rules { actions += core.learnTemplateRules(kindRules, for: kind, now: environment.now()) }
                        actions += core.reconfigure(next.configuration, replacingKinds: replacedKinds, now: environment.now())
                    case .acknowledge(let ids):
                        actions += ids.map { .emit(.ack(id: $0)) }
                    case .logRefusal(let error):
                        for diagnostic in error.diagnostics { logger.error("\(diagnostic.formatted(file: error.file))") }
                    case .refuse(let ids, let message):
                        actions += OutputLine.refusals(message, answering: ids).map(EngineAction.emit)
                    case .ended(let sources):
                        notify(notifier?.reloadEnded(sources: sources))
                        options.metrics?.reloadEnded(succeeded: sources != nil)
                        // The series of sources the reload removed leave the scrape (a stale failure count would
                        // keep an alert firing for a source that no longer exists).
                        if let sources { sourceMetrics?.configured(sources.map(\.id)) }
                    }
                }
                return actions
            }

            /// The control lines of `consumer` that wait, each carried out in order; false when the run is to end.
            /// A stop goes before the control lines that came ahead of it. Answers go to `consumer` alone; the
            /// states an op changes go to every consumer that reads them, but a `snapshot`'s, which only its
            /// asker reads.
            func takeControls(from id: ConsumerID, work: inout TaskGroup<Void>) async -> Bool {
                #if DEBUG
                    if let stall = Engine.testLoopStall { try? await Task.sleep(for: stall) }
                #endif
                guard let consumer = consumers[id] else { return true }  // it left; its lines go with it
                for entry in consumer.controls.take() {
                    if stop.isRequested { return false }
                    let now = environment.now()
                    switch entry {
                    case .invalid(let message, nil) where consumer.format == .i3bar:
                        logger.warning("\(id == .standardOutput ? "stdin" : "\(id)"): \(message)")  // the bar shows no error lines
                    case .invalid(let message, let id?):
                        let reply = fanout.replyIDs(for: consumer.id, [id])[0]
                        guard await perform([.emit(.error(message: message, id: reply))], answering: consumer.id, work: &work) else { return false }
                    case .invalid(let message, nil):
                        guard await perform([.emit(.error(message: message))], answering: consumer.id, work: &work) else { return false }
                    case .click(let click):
                        guard let clicked = core.clicked(click, now: now) else {
                            logger.warning("a click on \"\(click.view)\", which is not a view; ignored")
                            continue
                        }
                        guard await perform(clicked, answering: consumer.id, work: &work) else { return false }
                    case .command(let command, let ids):
                        let replies = fanout.replyIDs(for: consumer.id, ids)
                        let only = command == .snapshot ? consumer.id : nil
                        guard await perform(core.handle(command, replyingTo: replies, now: now), answering: consumer.id, only: only, work: &work)
                        else { return false }
                    }
                }
                return true
            }

            /// A client joins: its `hello` and a snapshot of what it reads, then (its subscription had an `id`)
            /// the `ack` that says the snapshot is whole, all before any other line; then what its demand
            /// loads. A subscription that names what the configuration does not have is refused.
            func join(_ consumer: Consumer, now: EngineTime) -> [EngineAction] {
                let sources = core.configuration.sources.map(\.id)
                let views = core.configuration.views.map(\.id)
                if let problem = consumer.subscription.unknownIDs(sources: sources, views: views) {
                    consumer.output.send(.error(message: problem, id: consumer.subscriptionID))
                    consumer.close()
                    if consumers.isEmpty { waitForIdleExit() }  // a refused client is no client
                    return []
                }
                idleGeneration += 1
                idleTimer?.cancel()
                consumers[consumer.id] = consumer
                fanout.join(consumer.id, consumer.subscription)
                if !consumer.readsPublishedLines && clients != nil { unpublishedConsumers.insert(consumer.id) }
                consumer.output.joined(consumer.subscription)
                var snapshot = core.snapshot()
                // A stream that came back reads what changed while it was away, when the journal knows.
                if let after = consumer.resumeAfter, let journal, journal.canResume(after: after) {
                    snapshot = journal.changes(after: after, in: snapshot)
                }
                var lines = [OutputLine.hello(sources: sources, views: views, version: hammockVersion)] + snapshot
                if let id = consumer.subscriptionID { lines.append(.ack(id: fanout.replyIDs(for: consumer.id, [id])[0])) }
                deliver(lines, only: consumer.id)
                return core.demandChanged(to: fanout.demand, now: now)
            }

            /// With `--idle-exit`, the engine has no consumer: it stops after that long unless one comes.
            func waitForIdleExit() {
                guard let wait = options.idleExit, wait > .zero else { return }
                idleGeneration += 1
                let (generation, inbox) = (idleGeneration, inbox)
                idleTimer?.cancel()
                idleTimer = Task {
                    guard (try? await Task.sleep(for: wait)) != nil else { return }
                    inbox.yield(.idleCheck(generation: generation))
                }
            }

            /// A client left, or the engine dropped it.
            func leave(_ id: ConsumerID, now: EngineTime) -> [EngineAction] {
                guard let consumer = consumers.removeValue(forKey: id) else { return [] }
                fanout.leave(id)
                unpublishedConsumers.remove(id)
                consumer.output.left()
                consumer.controls.close()
                consumer.close()
                return core.demandChanged(to: fanout.demand, now: now)
            }

            /// What the core (or the reload machine) decides about `input`.
            func decide(_ input: EngineInput, now: EngineTime, work: inout TaskGroup<Void>) async -> [EngineAction] {
                switch input {
                case .plugin(let event, let host):
                    // Only the running plugin's word counts, not that of one started to check a reload (its
                    // plugin may push what it was given to check) nor one retired and still shutting down.
                    guard let running = loaders[host.kind], running.id == host else { return [] }
                    return await decide(event, from: running, now: now)
                case .loaderFailedToStart(let kind):
                    return core.loaderFailedToStart(kind, now: now)
                case .joined(let consumer):
                    // What the newcomer's watching starts (Siesta's `loadIfNeeded` of what nobody watched) is
                    // carried out first, for the consumers already here: its snapshot then shows those sources
                    // loading, not idle (which `attach --once` would take for settled), and it does not read
                    // their `requested` lines twice.
                    if consumer.subscription.unknownIDs(
                        sources: core.configuration.sources.map(\.id), views: core.configuration.views.map(\.id)) == nil
                    {
                        let started = core.demandChanged(to: fanout.demand(adding: consumer.subscription), now: now)
                        guard await perform(started, work: &work) else { return [] }
                    }
                    return join(consumer, now: now)
                case .left(let id):
                    let actions = leave(id, now: now)
                    if consumers.isEmpty { waitForIdleExit() }
                    return actions
                case .idleCheck(let generation):
                    if generation == idleGeneration, consumers.isEmpty, clients?.isIdle ?? true, stop.request(.idle, signal: nil) {
                        logger.notice("no client for \(options.idleExit ?? .zero): stopping (--idle-exit)")
                        inbox.yield(.stop)
                    }
                    return []
                case .controls, .stop:
                    return []  // control lines are carried out one by one (`takeControls`); a stop's reason is in `stop`
                case .tick:
                    return core.tick(now: now)
                case .clockJumped:
                    logger.notice("the clock jumped (a suspend, or the wall clock was set): refreshing every polled source")
                    return core.clockJumped(now: now)
                case .reload:
                    return carryOut(reloads.requested(), work: &work)
                case .loadEverySource(let failingOnly):
                    return core.loadEverySource(failingOnly: failingOnly, now: now)
                case .reloadStep(.read(let result)):
                    return carryOut(reloads.read(result, origins: engine.origins(of: result)), work: &work)
                case .reloadStep(.validated(let next, let rules, let validation)):
                    return carryOut(reloads.checked(next, rules: rules, validation: validation), work: &work)
                case .reloadStep(.refused(let error, let validation)):
                    return carryOut(reloads.checkedRefusal(error, validation: validation), work: &work)
                case .watchdog:
                    engine.watchdogAsked.store(false, ordering: .releasing)
                    notify("WATCHDOG=1")
                    return []
                case .question(let question, let reply):
                    reply(core.answer(question))
                    return []
                }
            }

            /// What the core decides about what `host`, which serves its kind, said.
            func decide(_ event: PluginHostEvent, from host: PluginHost, now: EngineTime) async -> [EngineAction] {
                switch event {
                case .loadFinished(let source, let loadID, let outcome):
                    return core.loadFinished(source: source, loadID: LoadID(loadID), outcome: outcome, now: now)
                case .loadsFinished(let answers):
                    return answers.flatMap { core.loadFinished(source: $0.source, loadID: LoadID($0.loadID), outcome: $0.outcome, now: now) }
                case .loadQueued(let source, let loadID):
                    return core.loadQueued(source: source, loadID: LoadID(loadID), now: now)
                case .loadStarted(let source, let loadID):
                    return core.loadStarted(source: source, loadID: LoadID(loadID), now: now)
                case .pushed(let source, let mailbox):
                    return mailbox.take().map { core.pushed(source: source, content: $0.content, meta: $0.meta, now: now) } ?? []
                case .pushedError(let source, let error):
                    return core.pushedError(source: source, error: error, now: now)
                case .templateRulesLearned(let kind):
                    guard let rules = await host.templateRules else { return [] }
                    return core.learnTemplateRules(rules, for: kind, now: now)
                case .optionsRefused(let source, let problems):
                    // Said once per set of problems: a plugin restarted configures its sources again.
                    guard refusedOptions[source] != problems else { return [] }
                    refusedOptions[source] = problems
                    let configuration = reloads.current
                    for problem in problems {
                        logger.error("\(configuration.diagnostic(source: source, problem: problem).formatted(file: configuration.file))")
                    }
                    return []
                }
            }
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
