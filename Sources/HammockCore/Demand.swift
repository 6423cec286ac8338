/// Who watches which sources. `hammock run` watches everything; `hammock serve` watches what its clients
/// subscribed to (the engine passes the union of every connection's subscription).
///
/// As in Siesta, observing a resource is what makes it load: a source nobody watches keeps its state and
/// its cache but does not load, poll or retry, so a view no bar shows costs no request.
public enum Demand: Sendable, Equatable {
    case everything
    case subscribed(sources: Set<SourceID>, views: Set<ViewID>)

    /// What `hammock serve` watches before any client comes: the `keep: true` sources (and what their
    /// templates read).
    public static let keptOnly = Demand.subscribed(sources: [], views: [])
}

/// Which sources are watched, and what starting or stopping to watch one does.
extension EngineCore {
    /// The sources that load and poll: every one under `.everything` or `--once`; otherwise the subscribed
    /// ones, those of the subscribed views, the `keep: true` ones, and the inputs their templates read.
    public var watchedSources: Set<SourceID> { watched }

    public func isWatched(_ id: SourceID) -> Bool { watched.contains(id) }

    /// The union of every consumer's subscription changed: a source that becomes watched gets
    /// `loadIfNeeded`, one that is no longer watched stops polling and retrying (a load in flight ends and
    /// is applied, with nothing scheduled after it; its state and cache stay for the next watcher).
    public mutating func demandChanged(to demand: Demand, now: EngineTime) -> [EngineAction] {
        self.demand = demand
        let before = watched
        watched = Self.watched(by: demand, mode: mode, configuration: configuration, inputs: inputsBySource)
        for id in sourceIDs {
            switch (before.contains(id), watched.contains(id)) {
            case (false, true): startWatching(id, now: now)
            case (true, false): stopWatching(id)
            default: break
            }
        }
        emitChangedViews()
        return takeActions()
    }

    /// Each source's template inputs (the forward map of `dependents`), to follow what a watched source reads.
    static func inputs(of configuration: Configuration) -> [SourceID: [SourceID]] {
        var inputs: [SourceID: [SourceID]] = [:]
        for definition in configuration.sources where !definition.templates.isEmpty {
            inputs[definition.id] = definition.inputs
        }
        return inputs
    }

    /// The sources `demand` watches in `configuration` while the engine runs on (not `--once`).
    public static func watchedSources(by demand: Demand, in configuration: Configuration) -> Set<SourceID> {
        watched(by: demand, mode: .continuous, configuration: configuration, inputs: inputs(of: configuration))
    }

    /// The sources `demand` watches in `configuration`. `--once` loads everything whatever the demand, since
    /// it ends when every source has had its load. Ids the configuration does not have are ignored: a
    /// subscription may outlive a reload that removed them.
    static func watched(
        by demand: Demand, mode: Mode, configuration: Configuration, inputs: [SourceID: [SourceID]]
    ) -> Set<SourceID> {
        let all = configuration.sources.map(\.id)
        guard case .continuous = mode, case .subscribed(let sources, let views) = demand else { return Set(all) }
        let known = Set(all)
        var pending = configuration.sources.filter(\.keep).map(\.id) + sources
        for view in configuration.views where views.contains(view.id) { pending += view.sources }
        var watched: Set<SourceID> = []
        while let id = pending.popLast() {
            guard known.contains(id), watched.insert(id).inserted else { continue }
            pending += inputs[id] ?? []
        }
        return watched
    }

    /// Siesta's `loadIfNeeded` for a source someone starts to watch: a load in flight is joined; fresh data
    /// is kept and its polls resume from its last update; stale data, data this engine never loaded (none,
    /// or the offline cache's), and a request whose filled-in options changed while nobody watched, load.
    mutating func startWatching(_ id: SourceID, now: EngineTime) {
        let source = sources[id]
        guard !source.phase.isLoading else { return }
        let unchanged: Bool =
            if source.phase == .idle, source.request != nil, case .success(let options)? = resolvedOptions(of: source.definition) {
                options == source.lastOptions
            } else {
                false
            }
        let fresh =
            isUpToDate(
                source.state, invalidated: false, expiration: source.definition.expiration,
                retryDelay: source.retryDelay, age: source.updatedAt.map { now.instant - $0 })
            || source.isFreshByServer(at: now.instant)
        guard unchanged, fresh, let updatedAt = source.updatedAt else { return load(id, now: now, priority: .asked) }
        // The first poll or retry it would have had after now, had it been watched all along: the polls
        // missed while nobody watched are not made up for, the data being fresh.
        var next =
            source.definition.refresh.map { Self.nextPoll(after: now.instant, from: updatedAt, every: $0) }
            ?? scheduledInstant(of: source.definition, now: now)
        if let error = source.state.latestError, source.definition.retry.retries(error) {
            // Fresh in error means its age is within the retry delay: the retry is still ahead.
            next = updatedAt + source.retryDelay
        }
        guard var next else { return }
        if source.state.latestError == nil, let floor = source.serverFreshUntil, floor > next { next = floor }
        sources[id].nextAttemptAt = next
        deadlines.insert(Deadline(at: next, source: id))
    }

    /// The first of the polls of a source polled `every` so often since `updatedAt` that comes after `now`.
    static func nextPoll(after now: MonotonicInstant, from updatedAt: MonotonicInstant, every interval: Duration) -> MonotonicInstant {
        let periods = max(0, (now - updatedAt).milliseconds / max(interval.milliseconds, 1))
        let poll = pollInstant(after: updatedAt + .milliseconds(periods * interval.milliseconds), every: interval)
        return poll > now ? poll : pollInstant(after: poll, every: interval)
    }

    /// Nobody watches `id` any more: no poll or retry is pending (the deadline left in the heap is no longer
    /// current, see `isCurrent`), and it leaves its budget's queue. A load in flight goes on; `scheduleNextAttempt` schedules nothing after it.
    mutating func stopWatching(_ id: SourceID) {
        sources[id].nextAttemptAt = nil
        if leaveBudgetQueue(id, budget: sources[id].definition.limit) {
            answerWaitingMore(id, refusal: "nobody watches the source any more")
        }
    }
}
