import HammockJSON

/// The core's sources by id.
///
/// Almost every id the core looks up it took from the configuration the table was built from (its order,
/// its dependents, its views, a control target checked against it), so a miss is a bug in the core, not an
/// event: `self[id]` is not optional, and traps with the id in the message. Ids that can have gone missing
/// in the normal course of things (a loader's answer or a timer from before a reload) are looked up with
/// `self[ifKnown:]`, which says so at the call.
///
/// A type that only the table could hand out (ids known to be in it) would say the same thing more
/// strongly, but every reload would have to hand them out again, and the ids in a loader's answer or a
/// control line come from outside anyway (typed as `SourceID` where their text is read, but not checked
/// against any table): the trap names the id, which is what finding such a bug needs.
struct SourceTable: Sendable {
    /// Each runtime's place in `runtimes`. The runtimes themselves sit in an array, densely: a dictionary
    /// of them kept a bucket of a runtime's size (about 800 bytes) for each of its free slots, twice the
    /// memory at a thousand sources, and moved them whole when it grew.
    private var places: [SourceID: Int] = [:]
    private var runtimes: [SourceRuntime] = []

    init() {}

    /// The runtime of a source the caller knows is there. Mutations happen in place.
    subscript(id: SourceID) -> SourceRuntime {
        get {
            guard let place = places[id] else { Self.unknown(id) }
            return runtimes[place]
        }
        _modify {
            guard let place = places[id] else { Self.unknown(id) }
            yield &runtimes[place]
        }
    }

    /// The runtime of a source that may be gone (an answer or a deadline from before a reload).
    subscript(ifKnown id: SourceID) -> SourceRuntime? { places[id].map { runtimes[$0] } }

    func contains(_ id: SourceID) -> Bool { places[id] != nil }

    var all: [SourceRuntime] { runtimes }

    /// Room for `count` sources, so that a configuration's table is made at its size.
    mutating func reserveCapacity(_ count: Int) {
        places.reserveCapacity(count)
        runtimes.reserveCapacity(count)
    }

    mutating func insert(_ runtime: SourceRuntime) {
        if let place = places[runtime.definition.id] {
            runtimes[place] = runtime
        } else {
            places[runtime.definition.id] = runtimes.count
            runtimes.append(runtime)
        }
    }

    mutating func remove(_ id: SourceID) -> SourceRuntime {
        guard let place = places.removeValue(forKey: id) else { Self.unknown(id) }
        // The last runtime takes the removed one's place.
        let last = runtimes.count - 1
        if place != last {
            runtimes.swapAt(place, last)
            places[runtimes[place].definition.id] = place
        }
        return runtimes.removeLast()
    }

    private static func unknown(_ id: SourceID) -> Never {
        preconditionFailure("the core looked up source \"\(id)\", which its table does not have")
    }
}

/// What the core keeps for each source besides its visible state.
struct SourceRuntime: Sendable {
    let definition: SourceDefinition
    /// Content, error, timestamp and failures as the consumer sees them; `isLoading` is `phase`'s, see `state`.
    private var visible = SourceState()
    /// Where the source is in its load lifecycle: the one place that says whether it loads, what it waits for,
    /// and which load the engine waits for.
    var phase: LoadPhase = .idle
    var lastEvent: SourceEvent?
    var etag: String?
    var lastModified: String?
    /// The next poll or retry.
    var nextAttemptAt: MonotonicInstant?
    /// Until when the server said its latest answer stays fresh (`LoadOutcome.fresh`): no poll, and no
    /// `loadIfNeeded`, comes before. Nil when it said nothing, or the source does not respect it.
    var serverFreshUntil: MonotonicInstant?
    /// When `state.timestamp` was last set, on the monotonic clock: freshness is an age, and an age must
    /// not jump when the wall clock is stepped.
    var updatedAt: MonotonicInstant?
    /// The delay that applies to freshness while the source is in error.
    var retryDelay: Duration
    /// The filled-in options of the latest load, to see whether a changed input changes them.
    var lastOptions: JSONValue?
    /// The request the content, error and validators belong to; `nil` before the first load, or while a
    /// template cannot be filled in.
    var request: RequestIdentity?
    /// `--once`: the source has had its one load. Not a `LoadPhase`: a settled source still loads again when
    /// an input changes, so this is the run's bookkeeping, beside the phase and independent of it.
    var isSettled = false
    /// How many pages a paginated source's loads ask for (`more`); nil: the kind's own default.
    var pagesWanted: Int?
    /// `more` commands waiting for this source's pages: acknowledged when its loads are done.
    var waitingMore: [ControlID] = []

    init(definition: SourceDefinition) {
        self.definition = definition
        retryDelay = definition.retry.initialDelay
    }

    /// The server said its latest answer is still fresh at `instant` (and no error came since).
    func isFreshByServer(at instant: MonotonicInstant) -> Bool {
        guard visible.latestError == nil, let until = serverFreshUntil else { return false }
        return instant < until
    }

    /// The source's state, with `isLoading` derived from its phase, as Siesta derives it from the requests
    /// in flight: it cannot say loading while no load is in flight, or the other way round.
    var state: SourceState {
        var state = visible
        state.isLoading = phase.isLoading
        return state
    }

    /// Moves the visible state by Siesta's event table. The core moves `phase` first, so the event sees
    /// whether a load is still in flight.
    mutating func apply(_ event: SourceEvent, at now: Timestamp, meta: JSONObject? = nil) {
        visible.apply(event, at: now, otherLoadsInFlight: phase.isLoading, meta: meta)
    }

    /// A source reloaded with a new definition keeps what the consumer saw (not its loads: those are
    /// cancelled, and `phase` starts idle).
    mutating func keepVisibleState(of previous: SourceRuntime) {
        visible = previous.visible
    }
}

/// What makes two loads of a source loads of the same resource.
struct RequestIdentity: Equatable, Sendable {
    var kind: Kind
    var options: JSONValue
}
