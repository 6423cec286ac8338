import HammockJSON

/// What the consumer, the bar and the configuration ask for: control commands, clicks, the signals that
/// load every source, and a new configuration (hot reload).
extension EngineCore {
    /// Carries out a control command. Each of `ids` (the command's own, and those of the commands it
    /// replaced while waiting) gets an `ack` after every line the command caused, so that a consumer that
    /// reads the ack has read what it did; or an `error` with the reason. A `reload` is acknowledged by the
    /// runtime, once the new configuration is in force.
    public mutating func handle(_ command: ControlCommand, replyingTo ids: [ControlID] = [], now: EngineTime) -> [EngineAction] {
        do throws(ControlLineError) {
            try perform(command, replyingTo: ids, now: now)
            emitChangedViews()
            switch command {
            case .reload, .more: break  // acknowledged later: once the new configuration, or the pages, are in
            default: for id in ids { emit(.ack(id: id)) }
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

    /// SIGUSR1 (`failingOnly`): loads every watched source that has an error; SIGUSR2: loads every watched
    /// source. A status bar without stdin acts through these, as a consumer would with `retry` or `load` for
    /// each source; a source nobody watches is nobody's to refresh (a named `load` still loads it once).
    public mutating func loadEverySource(failingOnly: Bool, now: EngineTime) -> [EngineAction] {
        for id in sourceIDs where isWatched(id) && (!failingOnly || sources[id].state.latestError != nil) {
            loadOrFollowUp(id, now: now)
        }
        emitChangedViews()
        return takeActions()
    }

    /// Switches to a new configuration (hot reload). Sources whose definition is unchanged keep their state,
    /// their loads and their timers; changed ones keep their content and load again with the new definition;
    /// removed ones are dropped with a `removed` line; new ones load. Only watched sources load: the demand
    /// stays, the sources it watches are counted again over the new configuration, those it no longer
    /// watches stop polling, and those it now watches get `loadIfNeeded`.
    ///
    /// - Parameter replacingKinds: kinds whose plugin the reload replaced (its command changed). Their
    ///   sources count as changed even when their definitions are not: the new plugin has never been told
    ///   of them, and the old one, which served them, is going away.
    public mutating func reconfigure(
        _ new: Configuration, replacingKinds: Set<Kind> = [], now: EngineTime
    ) -> [EngineAction] {
        let old = configuration
        let newIDs = Set(new.sources.map(\.id))
        for definition in old.sources where !newIDs.contains(definition.id) {
            answerWaitingMore(definition.id, refusal: "a reload removed the source")
            leaveBudget(definition.id, budget: definition.limit)
            let runtime = sources.remove(definition.id)
            if let load = runtime.phase.inFlight {
                actions.append(.cancelLoad(source: definition.id, kind: definition.kind, loadID: load.id))
            }
            actions.append(.removeSource(source: definition.id, kind: definition.kind))
            emit(.removed(id: definition.id.rawValue, what: "source"))
        }
        let newViewIDs = Set(new.views.map(\.id))
        for view in old.views where !newViewIDs.contains(view.id) { emit(.removed(id: view.id.rawValue, what: "view")) }

        // A view whose definition is unchanged keeps its last line, so it is written again only if it changes.
        var lastLines: [ViewDefinition: ViewState] = [:]
        for (index, view) in old.views.enumerated() { lastLines[view] = lastViewStates[index] }
        configuration = new
        reconfigureBudgets(new.budgets)
        sourceIDs = new.sources.map(\.id)
        sourceOrder = Self.order(of: new)
        dependents = Self.dependents(of: new)
        inputsBySource = Self.inputs(of: new)
        let watchedBefore = watched
        watched = Self.watched(by: demand, mode: mode, configuration: new, inputs: inputsBySource)
        lastViewStates = new.views.map { lastLines[$0] }
        indexViews()
        emit(.reloaded(sources: sourceIDs, views: new.views.map(\.id)))

        let previous = Dictionary(uniqueKeysWithValues: old.sources.map { ($0.id, $0) })
        for definition in new.sources {
            guard let before = previous[definition.id] else {
                sources.insert(SourceRuntime(definition: definition))
                if isWatched(definition.id) { load(definition.id, now: now) }
                continue
            }
            guard before != definition || replacingKinds.contains(definition.kind) else {
                switch (watchedBefore.contains(definition.id), isWatched(definition.id)) {
                case (false, true): startWatching(definition.id, now: now)
                case (true, false): stopWatching(definition.id)
                default: break
                }
                continue
            }
            answerWaitingMore(definition.id, refusal: "a reload changed the source")
            let runtime = sources[definition.id]
            if let load = runtime.phase.inFlight {
                actions.append(.cancelLoad(source: definition.id, kind: before.kind, loadID: load.id))
            }
            // Queued under its old definition: the load below queues it again if its (new) budget is full.
            if before.limit == definition.limit {
                leaveBudgetQueue(definition.id, budget: before.limit)
            } else {
                leaveBudget(definition.id, budget: before.limit)
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
            // One nobody watches loads when someone does: `updated` has no `lastOptions`, so `startWatching`
            // sees a request it never sent.
            if isWatched(definition.id) { load(definition.id, now: now) }
        }
        // A budget whose numbers grew may have room for what waits.
        startQueuedLoads(now: now)
        // States were set above without `apply` (a reloaded source is not loading until its load): count again.
        indexViews()
        countUnsettled()
        emitChangedViews()
        return takeActions()
    }

    // MARK: - Control

    mutating func perform(_ command: ControlCommand, replyingTo ids: [ControlID], now: EngineTime) throws(ControlLineError) {
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
            for id in try sourceIDs(of: target) {
                // A load waiting for its budget is not sent; the source polls on as after a cancel.
                if leaveBudgetQueue(id, budget: sources[id].definition.limit) {
                    scheduleNextAttempt(id, now: now)
                    answerWaitingMore(id, refusal: "its load was cancelled")
                }
                cancel(id, now: now)
            }
        case .wipe(let target):
            for id in try sourceIDs(of: target) {
                // The pages asked for go with the content, unless a load of them is in flight: it brings them
                // back, and the next loads keep asking for as many.
                if !sources[id].phase.isLoading { sources[id].pagesWanted = nil }
                // A wipe forgets the load that waited for the budget too; the source's polls go on.
                if leaveBudgetQueue(id, budget: sources[id].definition.limit) {
                    scheduleNextAttempt(id, now: now)
                    answerWaitingMore(id, refusal: "a wipe forgot the pages it waited for")
                }
                sources[id].etag = nil
                sources[id].lastModified = nil
                sources[id].serverFreshUntil = nil
                apply(.newData(.null, origin: .wipe), to: id, now: now)
            }
        case .override(let id, let content):
            guard sources.contains(id) else { throw unknownSource(id) }
            apply(.newData(content, origin: .override), to: id, now: now)
        case .more(let id, let count):
            guard sources.contains(id) else { throw unknownSource(id) }
            let meta = sources[id].state.meta
            guard meta?["hasMore"] == true else {
                let said = meta.map { $0["hasMore"] == false ? "its meta says hasMore: false" : "its meta says nothing of more pages" }
                    ?? "it has no meta yet"
                throw ControlLineError(
                    "source \"\(id)\" has no more pages to load (\(said)); more loads the next pages of a paginated source whose server has them")
            }
            guard sources[id].waitingMore.count + ids.count <= Self.mostWaitingMore else {
                throw ControlLineError(
                    "source \"\(id)\" has \(Self.mostWaitingMore) more commands waiting for its pages already; wait for their answers")
            }
            // The plugin's word on the pages held, bounded first: counting on never overflows, and a load never
            // asks for fewer than one page.
            let held = min(max(meta?["pages"]?.numberValue?.intValue ?? 1, 1), Self.mostPages)
            // Past those held now, and never fewer than asked for already.
            sources[id].pagesWanted = min(max(sources[id].pagesWanted ?? 0, held + count), Self.mostPages)
            sources[id].waitingMore += ids
            loadOrFollowUp(id, now: now)
            answerWaitingMoreUnlessLoading(id)
        case .snapshot:
            for line in snapshot() { emit(line) }
        case .reload:
            actions.append(.reload(replyingTo: ids))
        }
    }

    func sourceIDs(of target: ControlTarget) throws(ControlLineError) -> [SourceID] {
        switch target {
        case .source(let id):
            guard sources.contains(id) else { throw unknownSource(id) }
            return [id]
        case .view(let id):
            guard let view = configuration.views.first(where: { $0.id == id }) else {
                let known = configuration.views.map(\.id.rawValue).joined(separator: ", ")
                throw ControlLineError("unknown view \"\(id)\" (views: \(known.isEmpty ? "none" : known))")
            }
            return view.sources
        }
    }

    /// The most pages `more` makes a source ask for, however often it is sent.
    static let mostPages = 1_000_000
    /// The most `more` commands that wait for one source's pages at once: each holds its id until answered.
    static let mostWaitingMore = 1024

    func unknownSource(_ id: SourceID) -> ControlLineError {
        ControlLineError("unknown source \"\(id)\" (sources: \(sourceIDs.map(\.rawValue).joined(separator: ", ")))")
    }
}
