import HammockJSON
import HeapModule
import OrderedCollections

/// What the runtime must do on the core's behalf.
public enum EngineAction: Sendable {
    /// Ask the kind's loader (a plugin process, or the built-in `fake`) for the source's data.
    case startLoad(LoadRequest)
    /// The answer to this load is no longer wanted.
    case cancelLoad(source: SourceID, kind: Kind, loadID: LoadID)
    /// The source is gone from the configuration: its loader forgets it (stops watching, ends its command).
    case removeSource(source: SourceID, kind: Kind)
    case emit(OutputLine)
    /// A `cache: true` source's content changed (by a load, a push, an override or a wipe): the offline
    /// cache keeps `content` (`nil`: forgets it), to show at the next start.
    case persist(source: SourceID, content: JSONValue?)
    /// `{"op":"reload"}`: read the configuration file again. Reading it and asking the plugins about it is
    /// I/O, so the runtime does it, then hands the result to `reconfigure`. The runtime acknowledges
    /// `replyingTo` once the new configuration is in force, or refuses them with the reason.
    case reload(replyingTo: [ControlID])
    /// A view's `on-click:` names a command for the button clicked.
    case runClickCommand(ClickCommand)
    /// A watched source needs its kind's template rules, which only the kind's plugin says (in its hello),
    /// and that plugin has not started: `hammock serve` starts a plugin when a source of its kind is first
    /// watched. `learnTemplateRules` follows once it has said hello, or `loaderFailedToStart`.
    case startLoader(Kind)
    /// `--once` is done: write nothing more and exit with this status.
    case finish(exitStatus: Int32)
}

public struct LoadRequest: Sendable, Equatable {
    public var source: SourceID
    public var kind: Kind
    public var loadID: LoadID
    /// The source's options with every template filled in.
    public var options: JSONValue
    public var etag: String?
    public var lastModified: String?
    public var timeout: Duration
    /// How many pages to load, for a source whose consumer asked for more (`more`); nil: the kind's default.
    public var pages: Int? = nil
}

/// How a load ended, as the loader reports it.
public indirect enum LoadOutcome: Sendable, Equatable {
    case newData(JSONValue, etag: String? = nil, lastModified: String? = nil)
    case notModified
    case error(SourceError)
    case cancelled
    /// `answer` (new data, or not modified), which the server said stays fresh for `duration` (the plugin's
    /// `fresh` message): the source polls no sooner (`SourceDefinition.respectsServer`).
    case fresh(LoadOutcome, for: Duration)
    /// `answer` (new data, or not modified), with what the loader said of it besides the content (the
    /// plugin's `meta` message): it becomes the state's `meta`.
    case described(LoadOutcome, meta: JSONObject)
    /// `answer` (new data), which must not be kept on disk (the plugin's `noStore`: HTTP's
    /// `Cache-Control: no-store`): a source with `cache: true` stores none of it, and forgets what it stored.
    case notStored(LoadOutcome)

    /// The answer itself, without the advice wrapped around it.
    public var answer: LoadOutcome {
        switch self {
        case .fresh(let answer, _), .described(let answer, _), .notStored(let answer): answer.answer
        case .newData, .notModified, .error, .cancelled: self
        }
    }

    /// How long the server said the answer stays fresh, if it did.
    public var freshFor: Duration? {
        switch self {
        case .fresh(_, let duration): duration
        case .described(let answer, _), .notStored(let answer): answer.freshFor
        case .newData, .notModified, .error, .cancelled: nil
        }
    }

    /// What the loader said of the answer, if anything.
    public var meta: JSONObject? {
        switch self {
        case .described(_, let meta): meta
        case .fresh(let answer, _), .notStored(let answer): answer.meta
        case .newData, .notModified, .error, .cancelled: nil
        }
    }

    /// Whether the answer may be kept on disk (no `noStore` from the plugin).
    public var mayBeStored: Bool {
        switch self {
        case .notStored: false
        case .fresh(let answer, _), .described(let answer, _): answer.mayBeStored
        case .newData, .notModified, .error, .cancelled: true
        }
    }
}

/// The engine's brain, with no I/O: sources, their freshness and timers, dependencies, views, and what
/// goes on stdout. The runtime feeds it events with the current time and carries out the actions it
/// returns; `nextDeadline` says when to call `tick` next.
///
/// This file holds its state, start and stop, and how a source's state changes (`apply`); the rest is cut
/// by concern: `EngineCore+Scheduling` (loads, loaders' answers, polls, retries, deadlines, `tick`),
/// `EngineCore+Views` (view tallies and view lines), `EngineCore+Control` (control commands, clicks, the
/// load-everything signals, hot reload) and `EngineCore+Once` (`--once`). Their members are internal, not
/// private, only so that those files can reach them; nothing outside the core uses them.
public struct EngineCore: Sendable {
    public enum Mode: Sendable, Equatable {
        case continuous
        /// Load every source once, then finish; a source still loading at the deadline counts as failed.
        case once(deadline: Duration)
    }

    public internal(set) var configuration: Configuration
    public let mode: Mode
    /// The local time `at:` schedules are read in (the system's zone in hammock; a test's own).
    let calendar: any LocalCalendar
    /// How long past a source's `timeout` the engine waits for its loader before failing the load itself.
    public var loadTimeoutGrace: Duration = .seconds(2)
    /// How long a load may wait in its loader's queue (`loadQueued`) before its work starts, on top of its
    /// timeout and grace. Generous, since a thousand sources that start together wait their turn by design;
    /// it is there so that a loader which never starts a load cannot leave the source loading for ever.
    public var queuedLoadAllowance: Duration = .seconds(300)

    var sources = SourceTable()
    /// Each source's position in the configuration: sources due at the same tick act in that order.
    var sourceOrder: [SourceID: Int] = [:]
    /// Every pending deadline (polls, retries, load timeouts), earliest first, so a tick touches only the
    /// sources that are due: with a thousand sources polling fast, walking all of them on every tick
    /// was most of the engine's work. Entries are not removed when their deadline goes away (a load that
    /// answered in time); `isCurrent` tells, and stale ones are dropped when they reach the front.
    var deadlines = Heap<Deadline>()
    var lastViewStates: [ViewState?]
    /// The views that contain each source, by index into `configuration.views`.
    var viewsBySource: [SourceID: [Int]] = [:]
    /// Each view's counts over its sources' states, moved by `apply`: evaluating a view costs its errors,
    /// not its size, so an event of one source in a view of thousands is not a walk over all of them.
    var viewTallies: [ViewTally] = []
    /// Views to evaluate at the next `emitChangedViews`: those with a source whose state changed since.
    var staleViews: Set<Int> = []
    var dependents: [SourceID: [SourceID]] = [:]
    /// Each source's template inputs: the forward map of `dependents`, to follow what a watched source reads.
    var inputsBySource: [SourceID: [SourceID]] = [:]
    /// Who watches what (`Demand`), kept across a reload, and the sources it watches in this configuration.
    var demand: Demand
    var watched: Set<SourceID> = []
    var nextLoadID: LoadID = 1
    var random: SplitMix64
    var actions: [EngineAction] = []
    /// The kinds whose plugin the core asked to start (`startLoader`) for their template rules, until the
    /// rules come or the start fails; their waiting sources show no error meanwhile.
    var loadersStarting: Set<Kind> = []
    var onceDeadline: MonotonicInstant?
    var isFinished = false
    /// `--once`: how many sources have not had their load, and those of them that wait for an input, so
    /// that seeing whether the run is done costs those, not every source after every answer.
    var unsettledCount = 0
    var waitingUnsettled: Set<SourceID> = []
    /// The shared budgets (`limits:`), by name: the starts each counted, and the sources waiting for one
    /// (`EngineCore+Budgets`).
    var budgets: [BudgetName: RequestBudget] = [:]

    /// - Parameter templateRules: the kinds' rules known at start (`learnTemplateRules` adds more later).
    /// - Parameter demand: who watches which sources; only watched sources load (`demandChanged` moves it).
    public init(
        configuration: Configuration, mode: Mode = .continuous, seed: UInt64 = 0x5EED,
        templateRules: [Kind: TemplateRules] = [:], demand: Demand = .everything, calendar: any LocalCalendar = UTCCalendar()
    ) {
        self.calendar = calendar
        self.templateRules = templateRules
        self.demand = demand
        self.configuration = configuration
        self.mode = mode
        random = SplitMix64(seed: seed)
        lastViewStates = Array(repeating: nil, count: configuration.views.count)
        sources.reserveCapacity(configuration.sources.count)
        for definition in configuration.sources { sources.insert(SourceRuntime(definition: definition)) }
        sourceIDs = configuration.sources.map(\.id)
        sourceOrder = Self.order(of: configuration)
        dependents = Self.dependents(of: configuration)
        inputsBySource = Self.inputs(of: configuration)
        watched = Self.watched(by: demand, mode: mode, configuration: configuration, inputs: inputsBySource)
        budgets = configuration.budgets.mapValues(RequestBudget.init(limit:))
        indexViews()
        countUnsettled()
    }

    /// What each kind's plugin said of templates in its hello: which options are URLs whose values are
    /// percent-encoded. A source with templates loads only once its kind's rules are known, since a value
    /// filled in without them could climb a URL's path.
    var templateRules: [Kind: TemplateRules] = [:]

    static func order(of configuration: Configuration) -> [SourceID: Int] {
        Dictionary(uniqueKeysWithValues: configuration.sources.enumerated().map { ($1.id, $0) })
    }

    static func dependents(of configuration: Configuration) -> [SourceID: [SourceID]] {
        var dependents: [SourceID: [SourceID]] = [:]
        for definition in configuration.sources {
            for input in definition.inputs { dependents[input, default: []].append(definition.id) }
        }
        return dependents
    }

    /// The sources' ids in the configuration's order.
    public internal(set) var sourceIDs: [SourceID] = []

    /// The sources whose content the offline cache keeps, and `start` shows when given.
    public var cachedSourceIDs: [SourceID] { configuration.sources.filter(\.cache).map(\.id) }

    public func state(of source: SourceID) -> SourceState? { sources[ifKnown: source]?.state }

    // MARK: - Inputs

    /// Says hello, shows what the offline cache kept (origin `cache`), and loads every watched source whose
    /// inputs are ready. A source nobody watches does not load until someone does (`demandChanged`).
    public mutating func start(now: EngineTime, restored: [SourceID: JSONValue] = [:]) -> [EngineAction] {
        emit(.hello(sources: sourceIDs, views: configuration.views.map(\.id), version: hammockVersion))
        if case .once(let deadline) = mode { onceDeadline = now.instant + deadline }
        for id in sourceIDs {
            if let content = restored[id] { apply(.newData(content, origin: .cache), to: id, now: now) }
        }
        for id in sourceIDs where isWatched(id) { load(id, now: now) }
        emitChangedViews()
        checkOnceCompletion(now: now)
        return takeActions()
    }

    /// hammock stops (a signal, a closed stdout): the last line, `bye`, unless `--once` has already said it.
    /// Nothing is emitted after it.
    public mutating func stop(reason: StopReason) -> [EngineAction] {
        emit(.bye(reason: reason, failed: nil))
        isFinished = true
        return takeActions()
    }

    /// Every source's and view's current state, as lines.
    public func snapshot() -> [OutputLine] {
        var lines = sourceIDs.compactMap { id in
            sources[ifKnown: id].map { OutputLine.source(id: id, event: $0.lastEvent, state: $0.state) }
        }
        for (index, view) in configuration.views.enumerated() {
            lines.append(.view(id: view.id, state: viewState(index)))
        }
        return lines
    }

    // MARK: - State changes

    ///
    /// - Parameter stored: whether new data may go to the offline cache; when not (`no-store`), what the
    ///   cache holds of the source is forgotten instead.
    mutating func apply(_ event: SourceEvent, to id: SourceID, now: EngineTime, meta: JSONObject? = nil, stored: Bool = true) {
        var event = event
        // A failure whose side said when to ask again tells the consumer when that is.
        if case .error(var error) = event, error.retryAt == nil, let delay = error.retryAfter {
            error.retryAt = now.wall + min(max(delay, .zero), RetryPolicy.longestRetryAfter)
            event = .error(error)
        }
        let contentBefore = sources[id].state.content
        sources[id].apply(event, at: now.wall, meta: meta)
        switch event {
        case .newData(_, .wipe): sources[id].updatedAt = nil
        case .newData, .notModified, .error: sources[id].updatedAt = now.instant
        case .requested, .requestCancelled: break
        }
        sources[id].lastEvent = event
        for index in viewsBySource[id] ?? [] {
            viewTallies[index].update(id, to: sources[id].state)
            staleViews.insert(index)
        }
        emit(.source(id: id, event: event, state: sources[id].state))
        if case .newData(_, let origin) = event, origin != .cache, sources[id].definition.cache, !isFinished {
            actions.append(.persist(source: id, content: origin == .wipe || !stored ? nil : sources[id].state.content))
        }
        if sources[id].state.content != contentBefore { inputChanged(id, now: now) }
    }

    /// Reloads the watched sources that read `id` through templates, when a value they use has changed. One
    /// nobody watches loads with its new options when someone does (`startWatching` compares them).
    mutating func inputChanged(_ id: SourceID, now: EngineTime) {
        for dependent in dependents[id] ?? [] where isWatched(dependent) {
            let source = sources[dependent]
            guard source.phase.isWaitingForInputs || source.lastOptions != nil else { continue }
            guard let resolved = resolvedOptions(of: source.definition) else { continue }  // loads once the rules come
            if case .success(let options) = resolved, options == source.lastOptions { continue }
            if case .failure(.inputMissing) = resolved, !source.phase.isWaitingForInputs { continue }
            if source.phase.isLoading { cancel(dependent, now: now) }
            load(dependent, now: now)
        }
    }

    mutating func emit(_ line: OutputLine) {
        guard !isFinished else { return }
        actions.append(.emit(line))
    }

    /// Every public entry point ends here, so this is where stale deadlines leave the front of the queue
    /// and `nextDeadline` can read it without changing anything.
    mutating func takeActions() -> [EngineAction] {
        while let first = deadlines.min, !isCurrent(first) { deadlines.removeMin() }
        // Handed over whole and begun afresh: emptied keeping its capacity, the array shared with the caller
        // would be copied into a new buffer of its largest size (a thousand sources' first turn) every turn.
        let taken = actions
        actions = []
        return taken
    }
}

/// The version hammock reports in `hello` and `--version`.
public let hammockVersion = "0.1.0"
