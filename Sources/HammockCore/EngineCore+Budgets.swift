/// Shared budgets (`limits:` and a source's `limit:`): every load start of a source with a `limit` counts
/// against its budget (`RequestBudget`), whatever its kind, once per load (a paginated rest load is one
/// start however many pages it fetches). A load the budget cannot start now waits in the budget's queue,
/// a person's ahead of the engine's own, and starts when the window frees, at a deadline of `tick`.
///
/// While it waits the source is not loading: no `requested` line, `loading` stays false, and its state is
/// what it was; the `requested` line comes when the load starts. A control `load` of a queued source is
/// acknowledged at once, after the lines it caused (none, while it waits): the ack says the load is taken
/// in hand, not that it started.
extension EngineCore {
    /// The budget `name` as it stands: its counted starts and its queue (for tests and diagnostics).
    public func budget(_ name: BudgetName) -> RequestBudget? { budgets[name] }

    /// Whether a load of `id` may start now: always for a source without a `limit`; for one with, when its
    /// budget has room and nobody waits before it (`turn`: it is the one whose turn came). The start is
    /// counted. Otherwise it is queued (once) and starts at its turn.
    mutating func admit(_ id: SourceID, priority: LoadPriority, turn: Bool, now: EngineTime) -> Bool {
        guard let name = sources[id].definition.limit, var budget = budgets[name] else { return true }
        defer { budgets[name] = budget }
        if turn || !budget.hasQueue, budget.admits(at: now.instant) {
            budget.remove(id)
            budget.record(now.instant, of: id)
            return true
        }
        budget.enqueue(id, priority: priority)
        return false
    }

    /// Starts the queued loads of every budget whose window has room at `now`, in queue order.
    mutating func startQueuedLoads(now: EngineTime) {
        guard budgets.values.contains(where: \.hasQueue) else { return }
        for name in budgets.keys.sorted() {
            while let budget = budgets[name], budget.hasQueue, budget.admits(at: now.instant) {
                guard let (id, priority) = budgets[name]?.dequeue() else { break }
                // A queued source is never loading (a load goes to the queue instead of starting); the
                // check keeps a mistake from sending a second load.
                guard sources.contains(id), !sources[id].phase.isLoading else { continue }
                load(id, now: now, priority: priority, turn: true)
                answerWaitingMoreUnlessLoading(id)
            }
        }
    }

    /// Takes `id` out of its budget's queue (a wipe, a cancel, nobody watching it, a reload that changes
    /// or removes it). Returns whether it was waiting there.
    @discardableResult
    mutating func leaveBudgetQueue(_ id: SourceID, budget name: BudgetName?) -> Bool {
        guard let name else { return false }
        return budgets[name]?.remove(id) ?? false
    }

    /// A reload removed `id`, or changed it: its budget forgets it (queue and turns); it may draw again.
    mutating func leaveBudget(_ id: SourceID, budget name: BudgetName?) {
        guard let name else { return }
        budgets[name]?.forget(id)
    }

    /// Whether `id` waits in its budget's queue.
    public func isQueuedForBudget(_ id: SourceID) -> Bool {
        guard let name = sources[ifKnown: id]?.definition.limit else { return false }
        return budgets[name]?.isQueued(id) ?? false
    }

    /// The earliest instant a queued load may start, for `nextDeadline`.
    var nextBudgetDeadline: MonotonicInstant? {
        var next: MonotonicInstant?
        for budget in budgets.values where budget.hasQueue {
            // A queue beside room happens only until the next tick (room came with time): now, then.
            let at = budget.freesAt ?? MonotonicInstant(milliseconds: 0)
            if next.map({ at < $0 }) ?? true { next = at }
        }
        return next
    }

    /// A new configuration's budgets: one that stays keeps the starts it counted (under its new numbers,
    /// the newest of them) and its queue; a new one starts empty; a removed one goes (each source that drew
    /// from it changed its `limit`, so it was taken out of the queue and loads again).
    mutating func reconfigureBudgets(_ new: [BudgetName: BudgetLimit]) {
        var updated: [BudgetName: RequestBudget] = [:]
        for (name, limit) in new {
            if var budget = budgets[name] {
                if budget.limit != limit { budget.change(to: limit) }
                updated[name] = budget
            } else {
                updated[name] = RequestBudget(limit: limit)
            }
        }
        budgets = updated
    }
}
