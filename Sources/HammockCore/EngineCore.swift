import HammockJSON
import HeapModule
import OrderedCollections

/// What the runtime must do on the core's behalf.
public enum EngineAction: Sendable {
    /// Ask the kind's loader (a plugin process, or the built-in `fake`) for the source's data.
    case startLoad(LoadRequest)
    /// The answer to this load is no longer wanted.
    case cancelLoad(source: String, kind: String, loadID: LoadID)
    /// The source is gone from the configuration: its loader forgets it (stops watching, ends its command).
    case removeSource(source: String, kind: String)
    case emit(OutputLine)
    /// A `cache: true` source's content changed (by a load, a push, an override or a wipe): the offline
    /// cache keeps `content` (`nil`: forgets it), to show at the next start.
    case persist(source: String, content: JSONValue?)
    /// `{"op":"reload"}`: read the configuration file again. Reading it and asking the plugins about it is
    /// I/O, so the runtime does it, then hands the result to `reconfigure`. The runtime acknowledges
    /// `replyingTo` once the new configuration is in force, or refuses them with the reason.
    case reload(replyingTo: [ControlID])
    /// A view's `on-click:` names a command for the button clicked.
    case runClickCommand(ClickCommand)
    /// `--once` is done: write nothing more and exit with this status.
    case finish(exitStatus: Int32)
}

public struct LoadRequest: Sendable, Equatable {
    public var source: String
    public var kind: String
    public var loadID: LoadID
    /// The source's options with every template filled in.
    public var options: JSONValue
    public var etag: String?
    public var lastModified: String?
    public var timeout: Duration
}

/// How a load ended, as the loader reports it.
public enum LoadOutcome: Sendable, Equatable {
    case newData(JSONValue, etag: String? = nil, lastModified: String? = nil)
    case notModified
    case error(SourceError)
    case cancelled
}

/// The engine's brain, with no I/O: sources, their freshness and timers, dependencies, views, and what
/// goes on stdout. The runtime feeds it events with the current time and carries out the actions it
/// returns; `nextDeadline` says when to call `tick` next.
public struct EngineCore: Sendable {
    public enum Mode: Sendable, Equatable {
        case continuous
        /// Load every source once, then finish; a source still loading at the deadline counts as failed.
        case once(deadline: Duration)
    }

    public private(set) var configuration: Configuration
    public let mode: Mode
    /// How long past a source's `timeout` the engine waits for its loader before failing the load itself.
    public var loadTimeoutGrace: Duration = .seconds(2)
    /// How long a load may wait in its loader's queue (`loadQueued`) before its work starts, on top of its
    /// timeout and grace. Generous, since a thousand sources that start together wait their turn by design;
    /// it is there so that a loader which never starts a load cannot leave the source loading for ever.
    public var queuedLoadAllowance: Duration = .seconds(300)

    private var sources = SourceTable()
    /// Each source's position in the configuration: sources due at the same tick act in that order.
    private var sourceOrder: [String: Int] = [:]
    /// Every pending deadline (polls, retries, load timeouts), earliest first, so a tick touches only the
    /// sources that are due: with a thousand sources polling fast, walking all of them on every tick
    /// was most of the engine's work. Entries are not removed when their deadline goes away (a load that
    /// answered in time); `isCurrent` tells, and stale ones are dropped when they reach the front.
    private var deadlines = Heap<Deadline>()
    private var lastViewStates: [ViewState?]
    /// The views that contain each source, by index into `configuration.views`.
    private var viewsBySource: [String: [Int]] = [:]
    /// Each view's counts over its sources' states, moved by `apply`: evaluating a view costs its errors,
    /// not its size, so an event of one source in a view of thousands is not a walk over all of them.
    private var viewTallies: [ViewTally] = []
    /// Views to evaluate at the next `emitChangedViews`: those with a source whose state changed since.
    private var staleViews: Set<Int> = []
    private var dependents: [String: [String]] = [:]
    private var nextLoadID: LoadID = 1
    private var random: SplitMix64
    private var actions: [EngineAction] = []
    private var onceDeadline: MonotonicInstant?
    private var isFinished = false
    /// `--once`: how many sources have not had their load, and those of them that wait for an input, so
    /// that seeing whether the run is done costs those, not every source after every answer.
    private var unsettledCount = 0
    private var waitingUnsettled: Set<String> = []

    /// - Parameter templateRules: the kinds' rules known at start (`learnTemplateRules` adds more later).
    public init(
        configuration: Configuration, mode: Mode = .continuous, seed: UInt64 = 0x5EED,
        templateRules: [String: TemplateRules] = [:]
    ) {
        self.templateRules = templateRules
        self.configuration = configuration
        self.mode = mode
        random = SplitMix64(seed: seed)
        lastViewStates = Array(repeating: nil, count: configuration.views.count)
        for definition in configuration.sources { sources.insert(SourceRuntime(definition: definition)) }
        sourceIDs = configuration.sources.map(\.id)
        sourceOrder = Self.order(of: configuration)
        dependents = Self.dependents(of: configuration)
        indexViews()
        countUnsettled()
    }

    /// What each kind's plugin said of templates in its hello: which options are URLs whose values are
    /// percent-encoded. A source with templates loads only once its kind's rules are known, since a value
    /// filled in without them could climb a URL's path.
    private var templateRules: [String: TemplateRules] = [:]

    /// A kind's plugin said hello: its rules fill in its sources' templates from now on, and the sources that
    /// waited for them load.
    public mutating func learnTemplateRules(_ rules: TemplateRules, for kind: String, now: EngineTime) -> [EngineAction] {
        guard templateRules[kind] != rules else { return [] }
        templateRules[kind] = rules
        for id in sourceIDs where sources[id].definition.kind == kind {
            guard sources[id].phase.templateRulesArrived(), !sources[id].isSettled else { continue }
            load(id, now: now)
        }
        emitChangedViews()
        return takeActions()
    }

    /// `definition`'s options with its templates filled in, encoded as its kind's rules say; `nil` while
    /// they are not known.
    private func resolvedOptions(of definition: SourceDefinition) -> Result<JSONValue, TemplateResolutionProblem>? {
        let content: (String) -> JSONValue? = { self.sources[ifKnown: $0]?.state.content }
        guard !definition.templates.isEmpty else { return definition.resolvedOptions(content: content) }
        guard let rules = templateRules[definition.kind] else { return nil }
        return rules.apply(to: definition).definition.resolvedOptions(content: content)
    }

    private static func order(of configuration: Configuration) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: configuration.sources.enumerated().map { ($1.id, $0) })
    }

    private static func dependents(of configuration: Configuration) -> [String: [String]] {
        var dependents: [String: [String]] = [:]
        for definition in configuration.sources {
            for input in definition.inputs { dependents[input, default: []].append(definition.id) }
        }
        return dependents
    }

    /// The sources' ids in the configuration's order.
    public private(set) var sourceIDs: [String] = []

    /// The sources whose content the offline cache keeps, and `start` shows when given.
    public var cachedSourceIDs: [String] { configuration.sources.filter(\.cache).map(\.id) }

    public func state(of source: String) -> SourceState? { sources[ifKnown: source]?.state }

    public func viewState(_ index: Int) -> ViewState {
        viewTallies[index].evaluate { sources[ifKnown: $0]?.state.content }
    }

    // MARK: - Inputs

    /// Says hello, shows what the offline cache kept (origin `cache`), and loads every source whose inputs
    /// are ready.
    public mutating func start(now: EngineTime, restored: [String: JSONValue] = [:]) -> [EngineAction] {
        emit(.hello(sources: sourceIDs, views: configuration.views.map(\.id), version: hammockVersion))
        if case .once(let deadline) = mode { onceDeadline = now.instant + deadline }
        for id in sourceIDs {
            if let content = restored[id] { apply(.newData(content, origin: .cache), to: id, now: now) }
        }
        for id in sourceIDs { load(id, now: now) }
        emitChangedViews()
        checkOnceCompletion(now: now)
        return takeActions()
    }

    /// Carries out a control command. Each of `ids` (the command's own, and those of the commands it
    /// replaced while waiting) gets an `ack` after every line the command caused, so that a consumer that
    /// reads the ack has read what it did; or an `error` with the reason. A `reload` is acknowledged by the
    /// runtime, once the new configuration is in force.
    public mutating func handle(_ command: ControlCommand, replyingTo ids: [ControlID] = [], now: EngineTime) -> [EngineAction] {
        do throws(ControlLineError) {
            try perform(command, replyingTo: ids, now: now)
            emitChangedViews()
            if case .reload = command {} else {
                for id in ids { emit(.ack(id: id)) }
            }
        } catch {
            emitChangedViews()
            for line in OutputLine.refusals(error.message, answering: ids) { emit(line) }
        }
        return takeActions()
    }

    /// A click on a view's block in i3bar: what the view's `on-click:` says for the button; without a word
    /// for it, button 1 loads the view again, its failing sources only when it can try again (`retry`), every
    /// source otherwise (`load`), and other buttons do nothing. Nil for a view the configuration does not have.
    public mutating func clicked(_ click: BarClick, now: EngineTime) -> [EngineAction]? {
        guard let index = configuration.views.firstIndex(where: { $0.id == click.view }) else { return nil }
        let target = ControlTarget.view(click.view)
        let action = configuration.views[index].onClick[click.button]
            ?? (click.button == 1 ? (viewState(index).canTryAgain ? .retry : .load) : nil)
        switch action {
        case nil: return []
        case .load: return handle(.load(target), now: now)
        case .retry: return handle(.retry(target), now: now)
        case .loadIfNeeded: return handle(.loadIfNeeded(target), now: now)
        case .run(let command):
            return [.runClickCommand(ClickCommand(command: command, view: click.view, button: click.button))]
        }
    }

    /// SIGUSR1 (`failingOnly`): loads every source that has an error; SIGUSR2: loads every source. A status
    /// bar without stdin acts through these, as a consumer would with `retry` or `load` for each source.
    public mutating func loadEverySource(failingOnly: Bool, now: EngineTime) -> [EngineAction] {
        for id in sourceIDs where !failingOnly || sources[id].state.latestError != nil {
            loadOrFollowUp(id, now: now)
        }
        emitChangedViews()
        return takeActions()
    }

    public mutating func loadFinished(
        source id: String, loadID: LoadID, outcome: LoadOutcome, now: EngineTime
    ) -> [EngineAction] {
        guard sources.contains(id), let ended = sources[id].phase.finish(loadID) else {
            return []  // cancelled or timed out earlier: the answer is no longer wanted
        }
        let source = sources[id]
        switch outcome {
        case .newData(let raw, let etag, let lastModified):
            sources[id].etag = etag
            sources[id].lastModified = lastModified
            switch select(raw, for: source.definition) {
            case .success(let content): apply(.newData(content, origin: .load), to: id, now: now)
            case .failure(let error): apply(.error(error), to: id, now: now)
            }
        case .notModified where source.state.content == nil:
            apply(
                .error(SourceError(
                    message: "the loader answered \"not modified\" but there is no earlier content to keep",
                    code: .notModifiedWithoutContent)),
                to: id, now: now)
        case .notModified:
            apply(.notModified, to: id, now: now)
        case .error(let error):
            apply(.error(error), to: id, now: now)
        case .cancelled:
            apply(.requestCancelled, to: id, now: now)
        }
        startFollowUp(id, if: ended, now: now)
        scheduleNextAttempt(id, now: now)
        markSettled(id, now: now)
        emitChangedViews()
        checkOnceCompletion(now: now)
        return takeActions()
    }

    /// The loader holds the load back before working on it (its plugin said `queuesLoads` in its hello, and
    /// bounds how many loads run at once): the timeout does not run while it waits. Until `loadStarted`, the
    /// engine gives up only after `queuedLoadAllowance` more.
    public mutating func loadQueued(source id: String, loadID: LoadID, now: EngineTime) -> [EngineAction] {
        guard sources.contains(id) else { return [] }
        let giveUpAt = giveUpInstant(of: id, stage: .queued, now: now)
        if sources[id].phase.queued(loadID, giveUpAt: giveUpAt) { deadlines.insert(Deadline(at: giveUpAt, source: id)) }
        return takeActions()
    }

    /// The loader has begun the work of a load it held back: the timeout counts from now. A `started` for a
    /// load that was never said to be queued counts from now too, which is never sooner than from the send.
    public mutating func loadStarted(source id: String, loadID: LoadID, now: EngineTime) -> [EngineAction] {
        guard sources.contains(id) else { return [] }
        let giveUpAt = giveUpInstant(of: id, stage: .started, now: now)
        if sources[id].phase.started(loadID, giveUpAt: giveUpAt) { deadlines.insert(Deadline(at: giveUpAt, source: id)) }
        return takeActions()
    }

    /// When the engine gives up on a load of `id` that reached `stage` at `now`: the source's timeout and the
    /// grace, and the queue's allowance on top while the loader holds it back.
    private func giveUpInstant(of id: String, stage: LoadInFlight.Stage, now: EngineTime) -> MonotonicInstant {
        let giveUpAt = now.instant + sources[id].definition.timeout + loadTimeoutGrace
        return stage == .queued ? giveUpAt + queuedLoadAllowance : giveUpAt
    }

    /// New content the loader noticed by itself: a watched file changed, a streaming command printed a line.
    public mutating func pushed(source id: String, content raw: JSONValue, now: EngineTime) -> [EngineAction] {
        guard let source = sources[ifKnown: id] else { return [] }
        switch select(raw, for: source.definition) {
        case .success(let content):
            apply(.newData(content, origin: .push), to: id, now: now)
            // The push cured the error: the retry it scheduled is no longer wanted, only the usual poll.
            if source.state.latestError != nil && !sources[id].phase.isLoading { scheduleNextAttempt(id, now: now) }
        case .failure(let error):
            apply(.error(error), to: id, now: now)
        }
        markSettled(id, now: now)
        emitChangedViews()
        checkOnceCompletion(now: now)
        return takeActions()
    }

    /// A failure the loader noticed by itself: a watched file vanished, a streaming command died, the
    /// kind's plugin crashed. Content stays; the source retries as after any failed load.
    public mutating func pushedError(source id: String, error: SourceError, now: EngineTime) -> [EngineAction] {
        guard sources.contains(id) else { return [] }
        apply(.error(error), to: id, now: now)
        if !sources[id].phase.isLoading && sources[id].nextAttemptAt == nil { scheduleNextAttempt(id, now: now) }
        emitChangedViews()
        return takeActions()
    }

    /// The machine was suspended or its wall clock stepped (the runtime sees the clocks disagree): what was
    /// loaded before may be old whatever the timers say, as a machine that wakes up expects, so every polled
    /// source that is not loading loads now.
    public mutating func clockJumped(now: EngineTime) -> [EngineAction] {
        guard case .continuous = mode else { return [] }
        for id in sourceIDs where sources[id].definition.refresh != nil && !sources[id].phase.isLoading {
            load(id, now: now)
        }
        emitChangedViews()
        return takeActions()
    }

    /// Switches to a new configuration (hot reload). Sources whose definition is unchanged keep their state,
    /// their loads and their timers; changed ones keep their content and load again with the new definition;
    /// removed ones are dropped with a `removed` line; new ones load.
    ///
    /// - Parameter replacingKinds: kinds whose plugin the reload replaced (its command changed). Their
    ///   sources count as changed even when their definitions are not: the new plugin has never been told
    ///   of them, and the old one, which served them, is going away.
    public mutating func reconfigure(
        _ new: Configuration, replacingKinds: Set<String> = [], now: EngineTime
    ) -> [EngineAction] {
        let old = configuration
        let newIDs = Set(new.sources.map(\.id))
        for definition in old.sources where !newIDs.contains(definition.id) {
            let runtime = sources.remove(definition.id)
            if let load = runtime.phase.inFlight {
                actions.append(.cancelLoad(source: definition.id, kind: definition.kind, loadID: load.id))
            }
            actions.append(.removeSource(source: definition.id, kind: definition.kind))
            emit(.removed(id: definition.id, what: "source"))
        }
        let newViewIDs = Set(new.views.map(\.id))
        for view in old.views where !newViewIDs.contains(view.id) { emit(.removed(id: view.id, what: "view")) }

        // A view whose definition is unchanged keeps its last line, so it is written again only if it changes.
        var lastLines: [ViewDefinition: ViewState] = [:]
        for (index, view) in old.views.enumerated() { lastLines[view] = lastViewStates[index] }
        configuration = new
        sourceIDs = new.sources.map(\.id)
        sourceOrder = Self.order(of: new)
        dependents = Self.dependents(of: new)
        lastViewStates = new.views.map { lastLines[$0] }
        indexViews()
        emit(.reloaded(sources: sourceIDs, views: new.views.map(\.id)))

        let previous = Dictionary(uniqueKeysWithValues: old.sources.map { ($0.id, $0) })
        for definition in new.sources {
            guard let before = previous[definition.id] else {
                sources.insert(SourceRuntime(definition: definition))
                load(definition.id, now: now)
                continue
            }
            guard before != definition || replacingKinds.contains(definition.kind) else { continue }
            let runtime = sources[definition.id]
            if let load = runtime.phase.inFlight {
                actions.append(.cancelLoad(source: definition.id, kind: before.kind, loadID: load.id))
            }
            if before.kind != definition.kind { actions.append(.removeSource(source: definition.id, kind: before.kind)) }
            var updated = SourceRuntime(definition: definition)
            // Its load was cancelled above and `updated` starts idle: not loading until the load below.
            updated.keepVisibleState(of: runtime)
            updated.lastEvent = runtime.lastEvent
            updated.updatedAt = runtime.updatedAt
            // The load below compares it with the new request: other options, another resource.
            updated.request = runtime.request
            if before.kind == definition.kind && before.options == definition.options {
                updated.etag = runtime.etag
                updated.lastModified = runtime.lastModified
            }
            sources.insert(updated)
            load(definition.id, now: now)
        }
        // States were set above without `apply` (a reloaded source is not loading until its load): count again.
        indexViews()
        countUnsettled()
        emitChangedViews()
        return takeActions()
    }

    /// Fires whatever is due: polls, retries, loads that outlived their timeout, the `--once` deadline.
    public mutating func tick(now: EngineTime) -> [EngineAction] {
        var due: Set<String> = []
        while let first = deadlines.min, first.at <= now.instant { due.insert(deadlines.removeMin().source) }
        for id in due.sorted(by: { sourceOrder[$0, default: .max] < sourceOrder[$1, default: .max] }) {
            guard let source = sources[ifKnown: id] else { continue }
            if let expired = sources[id].phase.expire(at: now.instant) {
                actions.append(.cancelLoad(source: id, kind: source.definition.kind, loadID: expired.id))
                let seconds = source.definition.timeout.humanReadable
                let message = expired.stage == .queued
                    ? "no answer from the \"\(source.definition.kind)\" loader: the load waited in its queue and never started"
                    : "no answer from the \"\(source.definition.kind)\" loader within \(seconds)"
                apply(.error(SourceError(message: message, code: .timeout)), to: id, now: now)
                startFollowUp(id, if: expired, now: now)
                scheduleNextAttempt(id, now: now)
                markSettled(id, now: now)
            }
            if let due = sources[id].nextAttemptAt, due <= now.instant {
                sources[id].nextAttemptAt = nil
                // Never two loads of one source from the timers: the load in flight schedules the next.
                if !sources[id].phase.isLoading { load(id, now: now) }
            }
        }
        // A load that timed out above may have been the last one `--once` was waiting for.
        checkOnceCompletion(now: now)
        if let onceDeadline, now.instant >= onceDeadline { finishOnce(now: now, deadlinePassed: true) }
        emitChangedViews()
        return takeActions()
    }

    /// hammock stops (a signal, a closed stdout): the last line, `bye`, unless `--once` has already said it.
    /// Nothing is emitted after it.
    public mutating func stop(reason: StopReason) -> [EngineAction] {
        emit(.bye(reason: reason, failed: nil))
        isFinished = true
        return takeActions()
    }

    /// When `tick` must run next, or `nil` when nothing is scheduled.
    public var nextDeadline: MonotonicInstant? {
        guard !isFinished else { return nil }
        // `takeActions` left a current deadline (or none) at the front.
        switch (onceDeadline, deadlines.min?.at) {
        case (let once?, let source?): return min(once, source)
        case (let once, let source): return once ?? source
        }
    }

    private func isCurrent(_ deadline: Deadline) -> Bool {
        guard let source = sources[ifKnown: deadline.source] else { return false }
        return source.nextAttemptAt == deadline.at || source.phase.inFlight?.giveUpAt == deadline.at
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

    // MARK: - Control

    private mutating func perform(_ command: ControlCommand, replyingTo ids: [ControlID], now: EngineTime) throws(ControlLineError) {
        switch command {
        case .load(let target):
            for id in try sourceIDs(of: target) { loadOrFollowUp(id, now: now) }
        case .loadIfNeeded(let target):
            for id in try sourceIDs(of: target) { loadIfNeeded(id, now: now) }
        case .retry(let target):
            let ids = try sourceIDs(of: target)
            // A view's "try again" loads its failing sources; a named source is loaded whatever its state.
            let failing = if case .view = target { ids.filter { sources[$0].state.latestError != nil } } else { ids }
            for id in failing { loadOrFollowUp(id, now: now) }
        case .cancel(let target):
            for id in try sourceIDs(of: target) { cancel(id, now: now) }
        case .wipe(let target):
            for id in try sourceIDs(of: target) {
                sources[id].etag = nil
                sources[id].lastModified = nil
                apply(.newData(.null, origin: .wipe), to: id, now: now)
            }
        case .override(let id, let content):
            guard sources.contains(id) else { throw unknownSource(id) }
            apply(.newData(content, origin: .override), to: id, now: now)
        case .snapshot:
            for line in snapshot() { emit(line) }
        case .reload:
            actions.append(.reload(replyingTo: ids))
        }
    }

    private func sourceIDs(of target: ControlTarget) throws(ControlLineError) -> [String] {
        switch target {
        case .source(let id):
            guard sources.contains(id) else { throw unknownSource(id) }
            return [id]
        case .view(let id):
            guard let view = configuration.views.first(where: { $0.id == id }) else {
                let known = configuration.views.map(\.id).joined(separator: ", ")
                throw ControlLineError("unknown view \"\(id)\" (views: \(known.isEmpty ? "none" : known))")
            }
            return view.sources
        }
    }

    private func unknownSource(_ id: String) -> ControlLineError {
        ControlLineError("unknown source \"\(id)\" (sources: \(sourceIDs.joined(separator: ", ")))")
    }

    // MARK: - Loading

    /// Siesta's `loadIfNeeded`: joins a load in flight, skips fresh data, loads otherwise.
    private mutating func loadIfNeeded(_ id: String, now: EngineTime) {
        let source = sources[id]
        guard !source.phase.isLoading else { return }
        // Nothing here invalidates a source (Siesta's `invalidate`): its age alone decides.
        let fresh = isUpToDate(
            source.state, invalidated: false, expiration: source.definition.expiration,
            retryDelay: source.retryDelay, age: source.updatedAt.map { now.instant - $0 })
        if !fresh { load(id, now: now) }
    }

    /// A `load` or `retry` asked for by the consumer. A source already loading gets no second load at the
    /// same time: the one in flight goes on (nothing is cancelled) and one more follows when it ends, however
    /// many were asked for meanwhile. So a flood of `load` lines costs at most the load in flight and the
    /// newest, never one command per line.
    private mutating func loadOrFollowUp(_ id: String, now: EngineTime) {
        if sources[id].phase.askForLoad() { load(id, now: now) }
    }

    /// `ended`, the load in flight, has ended (answered, failed or timed out): the load asked for meanwhile
    /// starts now.
    private mutating func startFollowUp(_ id: String, if ended: LoadInFlight, now: EngineTime) {
        guard ended.followUp, !sources[id].phase.isLoading else { return }
        load(id, now: now)
    }

    /// Starts a load unconditionally, unless the source's inputs have no content yet (then it waits for them).
    private mutating func load(_ id: String, now: EngineTime) {
        let definition = sources[id].definition
        guard let resolution = resolvedOptions(of: definition) else {
            // Its plugin has not said hello (it failed to start, or waits to restart): no load goes without
            // the plugin's word on encoding; `learnTemplateRules` starts it.
            sources[id].phase.waitForTemplateRules()
            let error = SourceError(
                message: "the \"\(definition.kind)\" plugin has not started yet, and it says how this source's templates are filled in; the source loads once it has",
                code: .pluginFailed)
            if sources[id].state.latestError != error { apply(.error(error), to: id, now: now) }
            markSettled(id, now: now)
            return
        }
        let options: JSONValue
        switch resolution {
        case .success(let resolved):
            options = resolved
        case .failure(.inputMissing):
            waitForInputs(id)
            return
        case .failure(let problem):
            // Retrying cannot fix a path that points nowhere: like a source whose inputs have no content yet,
            // it waits for an input to change, and no earlier options may make that change look like no change.
            waitForInputs(id)
            sources[id].lastOptions = nil
            switchResource(id, to: nil, now: now)
            let error = SourceError(message: problem.message, code: .templateUnresolved)
            // One error line, not one more (and failures + 1) for every unrelated change of the input.
            if sources[id].state.latestError != error { apply(.error(error), to: id, now: now) }
            markSettled(id, now: now)
            return
        }
        switchResource(id, to: RequestIdentity(kind: definition.kind, options: options), now: now)
        let loadID = nextLoadID
        nextLoadID = nextLoadID.next
        sources[id].lastOptions = options
        sources[id].nextAttemptAt = nil
        let giveUpAt = giveUpInstant(of: id, stage: .sent, now: now)
        sources[id].phase.send(loadID, giveUpAt: giveUpAt)
        waitingUnsettled.remove(id)
        deadlines.insert(Deadline(at: giveUpAt, source: id))
        apply(.requested, to: id, now: now)
        actions.append(
            .startLoad(LoadRequest(
                source: id, kind: definition.kind, loadID: loadID, options: options, etag: sources[id].etag,
                lastModified: sources[id].lastModified, timeout: definition.timeout)))
    }

    /// Siesta's rule: a different request is a different resource. When a source's filled-in options change
    /// (a template's input, a reload), the content, error and validators of the old request are dropped
    /// with a `wipe`, so a consumer never shows one resource's data under another's name, and the new
    /// request never carries the old one's `If-None-Match`.
    private mutating func switchResource(_ id: String, to request: RequestIdentity?, now: EngineTime) {
        let previous = sources[id].request
        sources[id].request = request
        guard let previous, previous != request else { return }
        sources[id].etag = nil
        sources[id].lastModified = nil
        let state = sources[id].state
        if state.content != nil || state.latestError != nil || state.timestamp != nil {
            apply(.newData(.null, origin: .wipe), to: id, now: now)
        }
    }

    private mutating func cancel(_ id: String, now: EngineTime) {
        // A cancel is for the follow-up too: nothing is to load.
        guard let load = sources[id].phase.cancel() else { return }
        actions.append(.cancelLoad(source: id, kind: sources[id].definition.kind, loadID: load.id))
        apply(.requestCancelled, to: id, now: now)
        scheduleNextAttempt(id, now: now)
    }

    /// After a load ends: poll again after `refresh`, or retry after the backoff delay when retrying can
    /// help (`RetryPolicy.retries`).
    private mutating func scheduleNextAttempt(_ id: String, now: EngineTime) {
        guard case .continuous = mode, !sources[id].phase.isLoading else { return }
        let source = sources[id]
        let definition = source.definition
        var next = definition.refresh.map { Self.pollInstant(after: now.instant, every: $0) }
        if let error = source.state.latestError {
            let delay = definition.retry.delay(
                afterFailures: source.state.failures, retryAfter: error.retryAfter,
                unitRandom: Double.random(in: 0..<1, using: &random))
            sources[id].retryDelay = delay
            if definition.retry.retries(error) { next = now.instant + delay }
        } else {
            sources[id].retryDelay = definition.retry.initialDelay
        }
        sources[id].nextAttemptAt = next
        if let next { deadlines.insert(Deadline(at: next, source: id)) }
    }

    /// When a source polled `every` so often, whose last load ended at `end`, polls next: `end + every`,
    /// moved to the nearest instant of a grid of a twentieth of the interval (at most 250 ms), counted
    /// from the monotonic clock's origin.
    ///
    /// Sources with the same refresh then come due together, as i3blocks's do on its one-second tick: a
    /// hundred sources polled every second wake the engine, its clock and the plugin a few times a second,
    /// with a batch of loads each time, not a hundred times with one. A source also stays on its grid, polled
    /// every `every` exactly, where `end + every` would drift by each load's duration. The cost is that a poll
    /// comes up to half a grid step (2.5% of the interval) early or late.
    public static func pollInstant(after end: MonotonicInstant, every interval: Duration) -> MonotonicInstant {
        let step = min(interval.milliseconds / 20, 250)
        let unaligned = end + interval
        guard step > 1, unaligned.milliseconds >= 0, unaligned.milliseconds < Int64.max - step else { return unaligned }
        let aligned = (unaligned.milliseconds + step / 2) / step * step
        return MonotonicInstant(milliseconds: aligned)
    }

    private func select(_ raw: JSONValue, for definition: SourceDefinition) -> Result<JSONValue, SourceError> {
        guard let pointer = definition.select else { return .success(raw) }
        guard let selected = raw[pointer] else {
            return .failure(SourceError(
                message: "select \"\(pointer)\" matches nothing in the loaded content", code: .selectMissing))
        }
        return .success(selected)
    }

    // MARK: - State changes

    private mutating func apply(_ event: SourceEvent, to id: String, now: EngineTime) {
        let contentBefore = sources[id].state.content
        sources[id].apply(event, at: now.wall)
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
            actions.append(.persist(source: id, content: origin == .wipe ? nil : sources[id].state.content))
        }
        if sources[id].state.content != contentBefore { inputChanged(id, now: now) }
    }

    /// Reloads the sources that read `id` through templates, when a value they use has changed.
    private mutating func inputChanged(_ id: String, now: EngineTime) {
        for dependent in dependents[id] ?? [] {
            let source = sources[dependent]
            guard source.phase.isWaitingForInputs || source.lastOptions != nil else { continue }
            guard let resolved = resolvedOptions(of: source.definition) else { continue }  // loads once the rules come
            if case .success(let options) = resolved, options == source.lastOptions { continue }
            if case .failure(.inputMissing) = resolved, !source.phase.isWaitingForInputs { continue }
            if source.phase.isLoading { cancel(dependent, now: now) }
            load(dependent, now: now)
        }
    }

    /// Every view is evaluated once at first (and after a reload), then only when one of its sources changed:
    /// on the hot path an event costs the views of its source, not all of them.
    private mutating func indexViews() {
        viewsBySource = [:]
        for (index, view) in configuration.views.enumerated() {
            for source in Set(view.sources) { viewsBySource[source, default: []].append(index) }
        }
        viewTallies = configuration.views.map { view in ViewTally(view) { sources[ifKnown: $0]?.state ?? SourceState() } }
        staleViews = Set(configuration.views.indices)
    }

    private mutating func emitChangedViews() {
        let stale = staleViews.sorted()
        staleViews.removeAll(keepingCapacity: true)
        for index in stale {
            let state = viewState(index)
            if lastViewStates[index] != state {
                lastViewStates[index] = state
                emit(.view(id: configuration.views[index].id, state: state))
            }
        }
    }

    private mutating func emit(_ line: OutputLine) {
        guard !isFinished else { return }
        actions.append(.emit(line))
    }

    /// Every public entry point ends here, so this is where stale deadlines leave the front of the queue
    /// and `nextDeadline` can read it without changing anything.
    private mutating func takeActions() -> [EngineAction] {
        while let first = deadlines.min, !isCurrent(first) { deadlines.removeMin() }
        defer { actions.removeAll(keepingCapacity: true) }
        return actions
    }

    // MARK: - --once

    private mutating func markSettled(_ id: String, now: EngineTime) {
        guard case .once = mode, !sources[id].phase.isLoading else { return }
        settle(id)
    }

    private mutating func settle(_ id: String) {
        guard !sources[id].isSettled else { return }
        sources[id].isSettled = true
        unsettledCount -= 1
        waitingUnsettled.remove(id)
    }

    /// An attempt to load `id` found no options to send: it waits for an input to change.
    private mutating func waitForInputs(_ id: String) {
        sources[id].phase.waitForInputs()
        if !sources[id].isSettled { waitingUnsettled.insert(id) }
    }

    private mutating func countUnsettled() {
        unsettledCount = sources.all.filter { !$0.isSettled }.count
        waitingUnsettled = Set(
            sources.all.filter { $0.phase.isWaitingForInputs && !$0.isSettled }.map(\.definition.id))
    }

    private mutating func checkOnceCompletion(now: EngineTime) {
        guard case .once = mode, !isFinished else { return }
        // A source still waiting for an input that has settled without content will never load. Failing one
        // can block another declared before it (a chain c → b → a), so go round until nothing changes.
        var failedOne = true
        while failedOne {
            failedOne = false
            let waiting = waitingUnsettled.sorted { sourceOrder[$0, default: .max] < sourceOrder[$1, default: .max] }
            for id in waiting where sources[id].phase.isWaitingForInputs && !sources[id].isSettled {
                let blocked = sources[id].definition.inputs.first { input in
                    sources[ifKnown: input].map { $0.isSettled && $0.state.content == nil } ?? true
                }
                if let blocked {
                    apply(
                        .error(SourceError(
                            message: "not loaded: its input \"\(blocked)\" has no content", code: .inputFailed)),
                        to: id, now: now)
                    settle(id)
                    failedOne = true
                }
            }
        }
        if unsettledCount == 0 { finishOnce(now: now, deadlinePassed: false) }
    }

    private mutating func finishOnce(now: EngineTime, deadlinePassed: Bool) {
        guard case .once = mode, !isFinished else { return }
        let failed = sourceIDs.filter { id in
            let source = sources[id]
            return !source.isSettled || source.state.latestError != nil || source.state.content == nil
        }
        emitChangedViews()
        emit(.bye(reason: deadlinePassed && !failed.isEmpty ? .deadline : .once, failed: failed))
        for id in sourceIDs {
            if let load = sources[id].phase.inFlight {
                actions.append(.cancelLoad(source: id, kind: sources[id].definition.kind, loadID: load.id))
            }
        }
        actions.append(.finish(exitStatus: failed.isEmpty ? 0 : 1))
        isFinished = true
    }
}

/// When a source next needs the engine's attention: a poll, a retry, or giving up on a load.
private struct Deadline: Comparable, Sendable {
    var at: MonotonicInstant
    var source: String

    static func < (lhs: Deadline, rhs: Deadline) -> Bool { (lhs.at, lhs.source) < (rhs.at, rhs.source) }
}

/// The version hammock reports in `hello` and `--version`.
public let hammockVersion = "0.1.0"
