import OrderedCollections

/// A budget's numbers as `limits:` writes them: at most `requests` load starts in any window of `per`.
public struct BudgetLimit: Sendable, Hashable {
    public var requests: Int
    public var per: Duration

    /// The most starts a budget may count. The budget keeps the instant of each of its last `requests`
    /// starts (8 bytes each, grown as starts come, not reserved), so this bounds one budget's memory to
    /// 8 MB; a million requests in any window is beyond every API's published limit.
    public static let maximumRequests = 1_000_000
    /// The shortest window: the engine's clock counts whole milliseconds.
    public static let shortestPer: Duration = .milliseconds(1)
    /// The longest window: a day, as for every floor the engine keeps (`Retry-After`, the server's
    /// freshness). The starts are counted in memory since hammock started, so a longer window would promise
    /// what a restart forgets.
    public static let longestPer: Duration = .seconds(86_400)

    public init(requests: Int, per: Duration) {
        self.requests = requests
        self.per = per
    }
}

/// Whether a load was asked for by a person (a consumer's `load`, `retry` or `loadIfNeeded`, a click, a
/// signal, a consumer starting to watch the source, and the follow-up of any of these), or is the engine's
/// own (a poll, a retry after a failure, a changed input, the first loads at start, a reload).
public enum LoadPriority: Sendable, Hashable {
    case asked
    case background
}

/// One shared budget (`limits:`): a sliding-window log of the instants its loads started, and the sources
/// waiting for a start it can give. Pure: the time is passed in.
///
/// The log is exact, not a token bucket: a start at `t` is allowed only when fewer than `requests` starts
/// are in `(t - per, t]`, so no window of length `per` ever holds more than `requests` starts (a bucket
/// refilled at `requests` per `per` lets up to twice that through a window that straddles a full bucket).
/// Only the last `requests` starts can decide that, so the log holds at most that many.
///
/// The queue holds each source at most once, the asked ones (`LoadPriority.asked`) ahead of the others.
/// The asked ones start first come, first served. The others start least recently served first (a source
/// that never started first of all), then first come, first served: a source polled every 100 ms that is
/// queued again the moment it started waits behind every source queued before it, and also behind one
/// that comes due at the same instant but started longer ago, so sources polled together take turns
/// instead of the first in the configuration winning every tie. Each other source can pass a waiting one
/// at most once before it starts, so none waits more than one turn of each of the budget's sources.
public struct RequestBudget: Sendable {
    public private(set) var limit: BudgetLimit
    /// The instants of the last starts, oldest first: a ring of at most `limit.requests`, `head` its oldest.
    private var ring: [MonotonicInstant] = []
    private var head = 0
    private var asked: OrderedSet<SourceID> = []
    private var background: OrderedSet<SourceID> = []
    /// When each source last started, as a count of the budget's starts (`turns`), for the others' order.
    /// One entry per source that drew from the budget; `forget` drops a source a reload took away.
    private var lastTurn: [SourceID: UInt64] = [:]
    private var turns: UInt64 = 0

    public init(limit: BudgetLimit) {
        precondition(limit.requests >= 1 && limit.per > .zero, "a budget of \(limit.requests) per \(limit.per) admits nothing")
        self.limit = limit
    }

    /// How many starts the log holds (at most `limit.requests`).
    public var countedStarts: Int { ring.count }

    /// When one more start fits: nil when fewer than `requests` starts were ever counted (one fits now),
    /// else `per` after the oldest of the last `requests` starts, which may have passed.
    public var freesAt: MonotonicInstant? {
        guard ring.count >= limit.requests else { return nil }
        return ring[head] + limit.per
    }

    /// The earliest instant, `now` or later, at which one more load may start.
    public func nextStart(now: MonotonicInstant) -> MonotonicInstant {
        guard let freesAt, freesAt > now else { return now }
        return freesAt
    }

    /// Whether one more load may start at `now`.
    public func admits(at now: MonotonicInstant) -> Bool { nextStart(now: now) == now }

    /// Counts a start at `instant`, of `source` when named, which the caller has checked with
    /// `admits(at:)`. The monotonic clock does not go back; an earlier instant than the last start is
    /// counted as the last start's.
    public mutating func record(_ instant: MonotonicInstant, of source: SourceID? = nil) {
        precondition(admits(at: instant), "a start at \(instant.milliseconds) ms would exceed \(limit.requests) per \(limit.per)")
        if let source {
            turns += 1
            lastTurn[source] = turns
        }
        let last = ring.isEmpty ? instant : ring[(head + ring.count - 1) % ring.count]
        let counted = max(instant, last)
        if ring.count < limit.requests {
            // Not yet full: append after the newest, which is at the end while `head` is 0.
            rotateToStart()
            ring.append(counted)
        } else {
            ring[head] = counted
            head = (head + 1) % ring.count
        }
    }

    /// New numbers (a reload): the starts already counted stay counted, the newest `requests` of them.
    public mutating func change(to limit: BudgetLimit) {
        precondition(limit.requests >= 1 && limit.per > .zero, "a budget of \(limit.requests) per \(limit.per) admits nothing")
        rotateToStart()
        if ring.count > limit.requests { ring.removeFirst(ring.count - limit.requests) }
        self.limit = limit
    }

    private mutating func rotateToStart() {
        guard head != 0 else { return }
        ring = Array(ring[head...] + ring[..<head])
        head = 0
    }

    // MARK: - The queue

    /// The sources waiting, in the order they will start.
    public var queue: [SourceID] { Array(asked) + Array(background) }
    public var hasQueue: Bool { !asked.isEmpty || !background.isEmpty }
    public func isQueued(_ id: SourceID) -> Bool { asked.contains(id) || background.contains(id) }
    /// Whether `id` waits with a person's priority.
    public func isAsked(_ id: SourceID) -> Bool { asked.contains(id) }

    /// Queues `id`, once: a source already queued keeps its place, except that a person's ask moves a
    /// background one to the end of the asked ones.
    public mutating func enqueue(_ id: SourceID, priority: LoadPriority) {
        switch priority {
        case .asked:
            guard !asked.contains(id) else { return }
            background.remove(id)
            asked.append(id)
        case .background:
            guard !isQueued(id) else { return }
            // Behind every queued one served before it (or never), ahead of those served since.
            let turn = lastTurn[id] ?? 0
            let index = background.firstIndex { (lastTurn[$0] ?? 0) > turn } ?? background.count
            background.insert(id, at: index)
        }
    }

    /// Forgets `id` altogether (a reload removed it, or moved it to another budget): out of the queue, and
    /// its last turn with it.
    public mutating func forget(_ id: SourceID) {
        remove(id)
        lastTurn[id] = nil
    }

    /// Takes `id` out of the queue; returns whether it was there.
    @discardableResult
    public mutating func remove(_ id: SourceID) -> Bool {
        asked.remove(id) != nil || background.remove(id) != nil
    }

    /// The next source to start, taken out of the queue, with the priority it waited with.
    public mutating func dequeue() -> (source: SourceID, priority: LoadPriority)? {
        if !asked.isEmpty { return (asked.removeFirst(), .asked) }
        if !background.isEmpty { return (background.removeFirst(), .background) }
        return nil
    }
}
