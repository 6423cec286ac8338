import HammockJSON
import HeapModule

/// Loads and their timing: what a loader answered, polls, retries, freshness, the deadlines a `tick`
/// fires, and the template rules a source waits for before its first load.
extension EngineCore {
    /// A kind's plugin said hello: its rules fill in its sources' templates from now on, and the sources that
    /// waited for them load.
    public mutating func learnTemplateRules(_ rules: TemplateRules, for kind: Kind, now: EngineTime) -> [EngineAction] {
        loadersStarting.remove(kind)
        guard templateRules[kind] != rules else { return [] }
        templateRules[kind] = rules
        // A source nobody watches keeps waiting: `startWatching` loads it.
        for id in sourceIDs where sources[id].definition.kind == kind && isWatched(id) {
            guard sources[id].phase.templateRulesArrived(), !sources[id].isSettled else { continue }
            load(id, now: now)
        }
        emitChangedViews()
        return takeActions()
    }

    /// The plugin of `kind`, asked to start for its template rules (`startLoader`), did not say hello: its
    /// waiting sources say so, and load once it has (a restart's hello brings `learnTemplateRules`).
    public mutating func loaderFailedToStart(_ kind: Kind, now: EngineTime) -> [EngineAction] {
        loadersStarting.remove(kind)
        for id in sourceIDs where sources[id].definition.kind == kind && sources[id].phase.isWaitingForTemplateRules {
            let error = SourceError(
                message: "the \"\(kind)\" plugin has not started yet, and it says how this source's templates are filled in; the source loads once it has",
                code: .pluginFailed)
            if sources[id].state.latestError != error { apply(.error(error), to: id, now: now) }
            markSettled(id, now: now)
        }
        emitChangedViews()
        return takeActions()
    }

    /// `definition`'s options with its templates filled in, encoded as its kind's rules say; `nil` while
    /// they are not known.
    func resolvedOptions(of definition: SourceDefinition) -> Result<JSONValue, TemplateResolutionProblem>? {
        let content: (SourceID) -> JSONValue? = { self.sources[ifKnown: $0]?.state.content }
        guard !definition.templates.isEmpty else { return definition.resolvedOptions(content: content) }
        guard let rules = templateRules[definition.kind] else { return nil }
        return rules.apply(to: definition).definition.resolvedOptions(content: content)
    }

    public mutating func loadFinished(
        source id: SourceID, loadID: LoadID, outcome: LoadOutcome, now: EngineTime
    ) -> [EngineAction] {
        guard sources.contains(id), let ended = sources[id].phase.finish(loadID) else {
            return []  // cancelled or timed out earlier: the answer is no longer wanted
        }
        let source = sources[id]
        // The server's word on how long its answer stays fresh: a floor under the next poll.
        let serverFreshFor = outcome.freshFor
        let meta = outcome.meta
        let stored = outcome.mayBeStored
        let outcome = outcome.answer
        switch outcome {
        case .newData, .notModified:
            sources[id].serverFreshUntil =
                serverFreshFor.flatMap { source.definition.respectsServer ? now.instant + min(max($0, .zero), RetryPolicy.longestServerFloor) : nil }
        case .error, .cancelled, .fresh, .described, .notStored:
            break
        }
        switch outcome {
        case .fresh, .described, .notStored:
            break  // unwrapped above: a plugin's answer is advised once
        case .newData(let raw, let etag, let lastModified):
            sources[id].etag = etag
            sources[id].lastModified = lastModified
            switch select(raw, for: source.definition) {
            case .success(let content): apply(.newData(content, origin: .load), to: id, now: now, meta: meta, stored: stored)
            case .failure(let error): apply(.error(error), to: id, now: now)
            }
        case .notModified where source.state.content == nil:
            apply(
                .error(SourceError(
                    message: "the loader answered \"not modified\" but there is no earlier content to keep",
                    code: .notModifiedWithoutContent)),
                to: id, now: now)
        case .notModified:
            apply(.notModified, to: id, now: now, meta: meta)
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
    public mutating func loadQueued(source id: SourceID, loadID: LoadID, now: EngineTime) -> [EngineAction] {
        guard sources.contains(id) else { return [] }
        let giveUpAt = giveUpInstant(of: id, stage: .queued, now: now)
        if sources[id].phase.queued(loadID, giveUpAt: giveUpAt) { deadlines.insert(Deadline(at: giveUpAt, source: id)) }
        return takeActions()
    }

    /// The loader has begun the work of a load it held back: the timeout counts from now. A `started` for a
    /// load that was never said to be queued counts from now too, which is never sooner than from the send.
    public mutating func loadStarted(source id: SourceID, loadID: LoadID, now: EngineTime) -> [EngineAction] {
        guard sources.contains(id) else { return [] }
        let giveUpAt = giveUpInstant(of: id, stage: .started, now: now)
        if sources[id].phase.started(loadID, giveUpAt: giveUpAt) { deadlines.insert(Deadline(at: giveUpAt, source: id)) }
        return takeActions()
    }

    /// When the engine gives up on a load of `id` that reached `stage` at `now`: the source's timeout and the
    /// grace, and the queue's allowance on top while the loader holds it back.
    func giveUpInstant(of id: SourceID, stage: LoadInFlight.Stage, now: EngineTime) -> MonotonicInstant {
        let giveUpAt = now.instant + sources[id].definition.timeout + loadTimeoutGrace
        return stage == .queued ? giveUpAt + queuedLoadAllowance : giveUpAt
    }

    /// New content the loader noticed by itself: a watched file changed, a streaming command printed a line.
    public mutating func pushed(source id: SourceID, content raw: JSONValue, meta: JSONObject? = nil, now: EngineTime) -> [EngineAction] {
        guard let source = sources[ifKnown: id] else { return [] }
        switch select(raw, for: source.definition) {
        case .success(let content):
            apply(.newData(content, origin: .push), to: id, now: now, meta: meta)
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
    public mutating func pushedError(source id: SourceID, error: SourceError, now: EngineTime) -> [EngineAction] {
        guard sources.contains(id) else { return [] }
        apply(.error(error), to: id, now: now)
        if !sources[id].phase.isLoading && sources[id].nextAttemptAt == nil { scheduleNextAttempt(id, now: now) }
        emitChangedViews()
        return takeActions()
    }

    /// The machine was suspended or its wall clock stepped (the runtime sees the clocks disagree): what was
    /// loaded before may be old whatever the timers say, as a machine that wakes up expects, so every polled
    /// source that is watched and not loading loads now.
    public mutating func clockJumped(now: EngineTime) -> [EngineAction] {
        guard case .continuous = mode else { return [] }
        for id in sourceIDs
        where sources[id].definition.refresh != nil && !sources[id].phase.isLoading && isWatched(id) {
            load(id, now: now)
        }
        // A schedule is in wall-clock time: its next time is found again from the wall clock as it is now.
        for id in sourceIDs
        where sources[id].definition.schedule != nil && !sources[id].phase.isLoading && isWatched(id)
            && sources[id].state.latestError == nil
        {
            sources[id].nextAttemptAt = scheduledInstant(of: sources[id].definition, now: now)
            if let next = sources[id].nextAttemptAt { deadlines.insert(Deadline(at: next, source: id)) }
        }
        emitChangedViews()
        return takeActions()
    }

    /// Fires whatever is due: polls, retries, loads that outlived their timeout, the `--once` deadline.
    public mutating func tick(now: EngineTime) -> [EngineAction] {
        var due: Set<SourceID> = []
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
        startQueuedLoads(now: now)
        // A load that timed out above may have been the last one `--once` was waiting for.
        checkOnceCompletion(now: now)
        if let onceDeadline, now.instant >= onceDeadline { finishOnce(now: now, deadlinePassed: true) }
        emitChangedViews()
        return takeActions()
    }

    /// When `tick` must run next, or `nil` when nothing is scheduled.
    public var nextDeadline: MonotonicInstant? {
        guard !isFinished else { return nil }
        // `takeActions` left a current deadline (or none) at the front.
        var next = deadlines.min?.at
        for candidate in [onceDeadline, nextBudgetDeadline] {
            if let candidate, next.map({ candidate < $0 }) ?? true { next = candidate }
        }
        return next
    }

    func isCurrent(_ deadline: Deadline) -> Bool {
        guard let source = sources[ifKnown: deadline.source] else { return false }
        return source.nextAttemptAt == deadline.at || source.phase.inFlight?.giveUpAt == deadline.at
    }

    // MARK: - Loading

    /// Siesta's `loadIfNeeded`: joins a load in flight, skips fresh data, loads otherwise.
    mutating func loadIfNeeded(_ id: SourceID, now: EngineTime) {
        let source = sources[id]
        guard !source.phase.isLoading else { return }
        // Nothing here invalidates a source (Siesta's `invalidate`): its age alone decides, and what the
        // server said of it.
        let fresh =
            isUpToDate(
                source.state, invalidated: false, expiration: source.definition.expiration,
                retryDelay: source.retryDelay, age: source.updatedAt.map { now.instant - $0 })
            || source.isFreshByServer(at: now.instant)
        if !fresh { load(id, now: now, priority: .asked) }
    }

    /// A `load` or `retry` asked for by the consumer. A source already loading gets no second load at the
    /// same time: the one in flight goes on (nothing is cancelled) and one more follows when it ends, however
    /// many were asked for meanwhile. So a flood of `load` lines costs at most the load in flight and the
    /// newest, never one command per line.
    mutating func loadOrFollowUp(_ id: SourceID, now: EngineTime) {
        if sources[id].phase.askForLoad() { load(id, now: now, priority: .asked) }
    }

    /// `ended`, the load in flight, has ended (answered, failed or timed out): the load asked for meanwhile
    /// starts now.
    mutating func startFollowUp(_ id: SourceID, if ended: LoadInFlight, now: EngineTime) {
        if ended.followUp, !sources[id].phase.isLoading { load(id, now: now, priority: .asked) }
        if !sources[id].phase.isLoading && !isQueuedForBudget(id) { answerWaitingMore(id) }
    }

    /// Just after a load was asked for: one that could not start (an input lost its content) brings no
    /// pages, so the `more` commands waiting for them are refused; one that waits for its budget brings them
    /// when its turn comes.
    mutating func answerWaitingMoreUnlessLoading(_ id: SourceID) {
        guard !sources[id].phase.isLoading && !isQueuedForBudget(id) else { return }
        answerWaitingMore(id, refusal: sources[id].state.latestError?.message ?? "its load could not start")
    }

    /// Answers the `more` commands that wait for `id`'s pages, once its loads are done: an `ack` when the
    /// pages came, else an `error` with why (`refusal`, or the source's error).
    mutating func answerWaitingMore(_ id: SourceID, refusal: String? = nil) {
        let ids = sources[id].waitingMore
        guard !ids.isEmpty else { return }
        sources[id].waitingMore = []
        if let reason = refusal ?? sources[id].state.latestError?.message {
            for line in OutputLine.refusals("more pages of source \"\(id)\" did not come: \(reason)", answering: ids) { emit(line) }
        } else {
            for controlID in ids { emit(.ack(id: controlID)) }
        }
    }

    /// Starts a load unconditionally, unless the source's inputs have no content yet (then it waits for them)
    /// or its budget has no room (then it waits in the budget's queue, with `priority`; `turn`: its turn in
    /// that queue came, see `EngineCore+Budgets`).
    mutating func load(_ id: SourceID, now: EngineTime, priority: LoadPriority = .background, turn: Bool = false) {
        let definition = sources[id].definition
        guard let resolution = resolvedOptions(of: definition) else {
            // Its plugin has not said hello: no load goes without the plugin's word on encoding, and
            // `learnTemplateRules` starts it. A plugin never started is asked to start, and the source waits
            // for it without an error; one that failed to start, or waits to restart, shows why it waits.
            sources[id].phase.waitForTemplateRules()
            if loadersStarting.insert(definition.kind).inserted { actions.append(.startLoader(definition.kind)) }
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
        // The options are filled in when the load starts, not when it was queued: an input that changed
        // meanwhile is read.
        guard admit(id, priority: priority, turn: turn, now: now) else { return }
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
                lastModified: sources[id].lastModified, timeout: definition.timeout, pages: sources[id].pagesWanted)))
    }

    /// Siesta's rule: a different request is a different resource. When a source's filled-in options change
    /// (a template's input, a reload), the content, error and validators of the old request are dropped
    /// with a `wipe`, so a consumer never shows one resource's data under another's name, and the new
    /// request never carries the old one's `If-None-Match`.
    mutating func switchResource(_ id: SourceID, to request: RequestIdentity?, now: EngineTime) {
        let previous = sources[id].request
        sources[id].request = request
        guard let previous, previous != request else { return }
        sources[id].pagesWanted = nil
        sources[id].etag = nil
        sources[id].lastModified = nil
        sources[id].serverFreshUntil = nil
        let state = sources[id].state
        if state.content != nil || state.latestError != nil || state.timestamp != nil {
            apply(.newData(.null, origin: .wipe), to: id, now: now)
        }
    }

    mutating func cancel(_ id: SourceID, now: EngineTime) {
        // A cancel is for the follow-up too: nothing is to load.
        guard let load = sources[id].phase.cancel() else { return }
        actions.append(.cancelLoad(source: id, kind: sources[id].definition.kind, loadID: load.id))
        apply(.requestCancelled, to: id, now: now)
        answerWaitingMore(id, refusal: "its load was cancelled")
        scheduleNextAttempt(id, now: now)
    }

    /// After a load ends: poll again after `refresh`, or retry after the backoff delay when retrying can
    /// help (`RetryPolicy.retries`). A source nobody watches gets neither, but its retry delay still moves,
    /// since freshness reads it when someone watches again.
    mutating func scheduleNextAttempt(_ id: SourceID, now: EngineTime) {
        guard case .continuous = mode, !sources[id].phase.isLoading else { return }
        let source = sources[id]
        let definition = source.definition
        var next = definition.refresh.map { Self.pollInstant(after: now.instant, every: $0) } ?? scheduledInstant(of: definition, now: now)
        if let error = source.state.latestError {
            let delay = definition.retry.delay(
                afterFailures: source.state.failures, retryAfter: error.retryAfter,
                unitRandom: Double.random(in: 0..<1, using: &random))
            sources[id].retryDelay = delay
            if definition.retry.retries(error) { next = now.instant + delay }
        } else {
            sources[id].retryDelay = definition.retry.initialDelay
            // Not before the server said it may be asked again.
            if let poll = next, let floor = source.serverFreshUntil, floor > poll { next = floor }
        }
        guard isWatched(id) else {
            sources[id].nextAttemptAt = nil
            return
        }
        sources[id].nextAttemptAt = next
        if let next { deadlines.insert(Deadline(at: next, source: id)) }
    }

    /// The next time `definition`'s `at:` schedule matches after `now`, on the monotonic clock; nil without a
    /// schedule (or one that no longer matches). A step of the wall clock is seen by the runtime, which calls
    /// `clockJumped`, which schedules again.
    func scheduledInstant(of definition: SourceDefinition, now: EngineTime) -> MonotonicInstant? {
        guard let schedule = definition.schedule, let wall = schedule.next(after: now.wall, in: calendar) else { return nil }
        return now.instant + (wall - now.wall)
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

    func select(_ raw: JSONValue, for definition: SourceDefinition) -> Result<JSONValue, SourceError> {
        guard let pointer = definition.select else { return .success(raw) }
        guard let selected = raw[pointer] else {
            return .failure(SourceError(
                message: "select \"\(pointer)\" matches nothing in the loaded content", code: .selectMissing))
        }
        return .success(selected)
    }
}

/// When a source next needs the engine's attention: a poll, a retry, or giving up on a load.
struct Deadline: Comparable, Sendable {
    var at: MonotonicInstant
    var source: SourceID

    static func < (lhs: Deadline, rhs: Deadline) -> Bool { (lhs.at, lhs.source) < (rhs.at, rhs.source) }
}
