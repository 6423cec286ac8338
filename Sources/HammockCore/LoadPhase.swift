/// Where one source is in its load lifecycle: the one value the core keeps of it, where it used to keep a
/// dictionary of loads in flight (never more than one) and loose flags (`wantsFollowUp`,
/// `isWaitingForInputs`, `isWaitingForTemplateRules`) whose combinations were not all possible.
///
/// As in Siesta's `Resource`, whether the source is loading is not stored beside the load: it is derived
/// from it (`isLoading`), so the `loading` of an output line cannot disagree with the load the engine waits
/// for. The transitions are pure and take the time they need as instants; `EngineCore` calls them and turns
/// what they return into actions.
///
/// `--once`'s "has had its one load" is not a phase: a settled source loads again when an input changes, so
/// it is the core's bookkeeping of the run, not a state of the source's load.
public enum LoadPhase: Sendable, Hashable {
    /// No load in flight and none waited for. The next poll or retry, if any, is a timer of the core.
    case idle
    /// Its templates read an input that has no content yet, or point at nothing in it: it loads when an
    /// input's content changes, and not on a timer (retrying cannot fill the template in).
    case waitingForInputs
    /// Its templates wait for its kind's `TemplateRules`: its plugin has not said hello yet, and no load goes
    /// without the plugin's word on how values are encoded.
    case waitingForTemplateRules
    /// One load is in flight. Another asked for meanwhile is not started beside it: it is remembered as
    /// `followUp`, and starts when this one ends.
    case loading(LoadInFlight)

    /// Whether a load is in flight: the `isLoading` of the source's state.
    public var isLoading: Bool {
        if case .loading = self { return true }
        return false
    }

    /// The load in flight, if any.
    public var inFlight: LoadInFlight? {
        if case .loading(let load) = self { return load }
        return nil
    }

    public var isWaitingForInputs: Bool { self == .waitingForInputs }
    public var isWaitingForTemplateRules: Bool { self == .waitingForTemplateRules }

    // MARK: - Transitions

    /// A load is sent to the loader; until `queued` or `started` its timeout counts from the send.
    ///
    /// The core sends only from a phase with no load in flight: a load asked for while one runs is a
    /// follow-up (`askForLoad`), and a changed input cancels the load in flight first.
    public mutating func send(_ id: LoadID, giveUpAt: MonotonicInstant) {
        precondition(!isLoading, "a second load of a source was sent while load \(inFlight?.id.description ?? "") is in flight")
        self = .loading(LoadInFlight(id: id, giveUpAt: giveUpAt, stage: .sent))
    }

    /// A `load` or `retry` is asked for. Returns `true` when it is to start now; while a load is in flight,
    /// it becomes that load's follow-up (one, however many are asked for) and returns `false`.
    public mutating func askForLoad() -> Bool {
        guard case .loading(var load) = self else { return true }
        load.followUp = true
        self = .loading(load)
        return false
    }

    /// The loader holds load `id` back in its queue: the timeout stops counting until it starts, and
    /// `giveUpAt` (the queue's allowance on top) bounds the wait. Only a load just sent can be queued;
    /// returns whether the word applied.
    public mutating func queued(_ id: LoadID, giveUpAt: MonotonicInstant) -> Bool {
        guard case .loading(var load) = self, load.id == id, load.stage == .sent else { return false }
        load.stage = .queued
        load.giveUpAt = giveUpAt
        self = .loading(load)
        return true
    }

    /// The loader began the work of load `id`: the timeout counts from now (`giveUpAt`). A `started` of a
    /// load never said to be queued counts from now too, which is never sooner than from the send. Returns
    /// whether the word applied (not to another load, nor twice).
    public mutating func started(_ id: LoadID, giveUpAt: MonotonicInstant) -> Bool {
        guard case .loading(var load) = self, load.id == id, load.stage != .started else { return false }
        load.stage = .started
        load.giveUpAt = giveUpAt
        self = .loading(load)
        return true
    }

    /// Load `id` answered. Returns the load that ended (the source is idle again), or `nil` when `id` is not
    /// the load in flight: it was cancelled or timed out earlier, and its answer is no longer wanted.
    public mutating func finish(_ id: LoadID) -> LoadInFlight? {
        guard case .loading(let load) = self, load.id == id else { return nil }
        self = .idle
        return load
    }

    /// The load in flight, if its deadline has passed at `now`, ends as timed out; the source is idle again.
    public mutating func expire(at now: MonotonicInstant) -> LoadInFlight? {
        guard case .loading(let load) = self, load.giveUpAt <= now else { return nil }
        self = .idle
        return load
    }

    /// The load in flight is no longer wanted, nor its follow-up (a cancel is for the follow-up too):
    /// returns it; the source is idle again. A source with no load in flight is left as it is.
    public mutating func cancel() -> LoadInFlight? {
        guard case .loading(let load) = self else { return nil }
        self = .idle
        return load
    }

    /// An attempt to load found no options to send: its inputs have no content, or its templates point at
    /// nothing. Called only when no load is in flight.
    public mutating func waitForInputs() {
        precondition(!isLoading, "a source with a load in flight cannot wait for its inputs")
        self = .waitingForInputs
    }

    /// An attempt to load found its kind's template rules unknown. Called only when no load is in flight.
    public mutating func waitForTemplateRules() {
        precondition(!isLoading, "a source with a load in flight cannot wait for template rules")
        self = .waitingForTemplateRules
    }

    /// Its kind's template rules arrived: returns whether the source was waiting for them (it is idle now,
    /// and the core loads it).
    public mutating func templateRulesArrived() -> Bool {
        guard self == .waitingForTemplateRules else { return false }
        self = .idle
        return true
    }
}

/// The one load of a source the engine waits for, and until when.
public struct LoadInFlight: Sendable, Hashable {
    /// How far the loader has got with it, which decides what its deadline counts from.
    public enum Stage: Sendable, Hashable {
        /// Sent; the loader has said nothing of it yet (a loader that never says `queued`): the timeout
        /// counts from the send.
        case sent
        /// The loader holds it back in its queue: the queue's allowance applies.
        case queued
        /// The loader began its work: the timeout counts from the start.
        case started
    }

    public var id: LoadID
    /// When the engine gives up on it and fails the load itself.
    public var giveUpAt: MonotonicInstant
    public var stage: Stage
    /// A `load` or `retry` came while it was in flight: one more load starts when it ends.
    public var followUp: Bool

    public init(id: LoadID, giveUpAt: MonotonicInstant, stage: Stage, followUp: Bool = false) {
        self.id = id
        self.giveUpAt = giveUpAt
        self.stage = stage
        self.followUp = followUp
    }
}
