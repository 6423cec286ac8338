import HammockCore
import HammockJSON
import HammockProtocol
import Logging

/// The supervision of one kind's plugin, as decisions: what to do when the engine asks for a load, the
/// plugin writes a line or exits, or a deadline passes. Pure, like `EngineCore`: every input takes `now`
/// and returns the actions to carry out, in order; nothing here touches a process, a clock or a task.
/// `PluginHost` is the actor that carries them out (swift-nio's `...StateMachine` structs, and the engine
/// core, are the model).
///
/// The rules:
/// - The plugin starts when a source first needs it. It must answer `hello` within `handshakeTimeout`,
///   with this protocol and this kind, before anything else; otherwise it is killed.
/// - Once it said hello, every source is configured (in the order of their ids) and the loads that
///   waited are sent. A plugin that `queuesLoads` has each load reported `loadQueued` until it `started`.
/// - Each `configure` is answered within `configureTimeout`, counted from when it was sent or from the
///   plugin's last answer to one, whichever is later (a long list at start-up is fine). One left
///   unanswered holds its source back (its loads fail at once until its options change); the plugin is
///   killed over it unless it answered a later one, which shows it is still working. Options too long
///   for one line are held back the same way, without killing anything.
/// - A line that is not protocol kills the plugin; one over `maximumLineLength` fails what it answers.
/// - When the plugin ends, its loads fail, its other sources hear of it, and it restarts after
///   `restartDelay(afterCrashes:)`; at `maximumCrashes` within `crashWindow` it is given up, and from then
///   on every load fails at once.
///
/// Every process has a generation: a line, an exit or a deadline of a process that is no longer the
/// running one is ignored.
package struct PluginSupervisor: Sendable {
    package typealias Instant = SupervisionClock.Instant

    static let handshakeTimeout: Duration = .seconds(5)
    static let configureTimeout: Duration = .seconds(5)
    static let maximumCrashes = 5
    static let crashWindow: Duration = .seconds(60)
    /// A plugin line longer than this is a protocol violation, not something to buffer.
    package static let maximumLineLength = maximumPluginLineLength
    /// The longest line HammockPluginKit reads from the engine (its `LineReader` limit): a `configure`
    /// longer than this would be dropped unanswered, so it is not sent.
    static let maximumLineToPlugin = 64 << 20

    /// 250 ms after the first crash within `crashWindow`, doubling with each one after it, up to 32 s.
    static func restartDelay(afterCrashes crashes: Int) -> Duration {
        .milliseconds(250 * (1 << min(max(crashes, 1) - 1, 7)))
    }

    enum Phase: Sendable, Equatable {
        case stopped
        case starting
        case ready
        case waitingToRestart
        case gaveUp(String)
        case shuttingDown
    }

    /// A deadline the supervisor asked for, of the process of `generation`.
    enum Timer: Sendable, Equatable {
        case handshake(generation: Int)
        case configure(generation: Int)
        case restart(generation: Int)
    }

    /// What the running process wrote, as the host read it.
    enum Line: Sendable, Equatable {
        case message(PluginMessage)
        /// A line that does not parse: why, and an excerpt of it (already redacted).
        case notProtocol(error: String, excerpt: String)
        /// A line over `maximumLineLength`, skipped: its length and what its first bytes say.
        case tooLong(length: Int, head: LineHead)
    }

    /// What the engine hears (`PluginHostEvent`); a push carries its content, which the host puts in a mailbox.
    enum Report: Sendable, Equatable {
        case loadFinished(source: SourceID, loadID: Int, outcome: LoadOutcome)
        case loadQueued(source: SourceID, loadID: Int)
        case loadStarted(source: SourceID, loadID: Int)
        case pushed(source: SourceID, content: JSONValue, meta: JSONObject? = nil)
        case pushedError(source: SourceID, error: SourceError)
        case templateRulesLearned(kind: Kind)
    }

    package enum ValidationAnswer: Sendable, Equatable {
        case valid
        case invalid([OptionProblem])
        case pluginFailed(String)
    }

    enum Action: Sendable, Equatable {
        /// Start a process (it is `generation`), which becomes the running one.
        case startProcess(generation: Int)
        case send(EngineMessage)
        /// Send a line already encoded (a `configure`, whose length was checked).
        case sendLine([UInt8])
        /// Kill the running process; its exit comes as an input.
        case kill
        case report(Report)
        /// What comes next about `source` goes to the engine after its pushes that wait, not into their mailbox.
        case sealPushes(source: SourceID)
        /// The source is gone: its push that waits is dropped.
        case dropPushes(source: SourceID)
        /// The plugin ended: what it pushed before goes before the news of its end.
        case sealEveryPush
        /// Hand `answer` to whoever validates `source`.
        case settleValidation(source: SourceID, ValidationAnswer)
        /// Hand `answer` to every validation that waits.
        case settleEveryValidation(ValidationAnswer)
        /// Whoever waits for the plugin to be ready: it is (`nil`), or why it failed.
        case settleReadiness(failure: String?)
        /// Call `timerFired(timer, now:)` at `deadline`.
        case setTimer(Timer, deadline: Instant)
        case log(Logger.Level, String, metadata: [String: String] = [:])
        /// The plugin restarts: count it (`EngineObserver.pluginRestarted`).
        case countRestart
    }

    /// What `readiness(now:)` found.
    enum Readiness: Sendable, Equatable {
        case ready
        case failed(String)
        /// Wait for a `settleReadiness` action, after carrying out these.
        case waiting([Action])
    }

    let kind: Kind
    private(set) var phase = Phase.stopped
    /// The running (or last) process.
    private(set) var generation = 0
    /// What the plugin's hello declared about templates in this kind's options; `nil` until a hello came.
    private(set) var templateRules: TemplateRules?
    /// Why the current process is being ended, when the supervisor ended it; reported instead of its exit status.
    private var failureReason: String?
    /// The options the engine wants for each source, and those the running process was last sent.
    private var desiredOptions: [SourceID: JSONValue] = [:]
    private var sentOptions: [SourceID: JSONValue] = [:]
    private var invalidProblems: [SourceID: [OptionProblem]] = [:]
    /// Loads sent to the running process, by load id.
    private var pendingLoads: [Int: SourceID] = [:]
    /// What a plugin said of a load's answer before sending it (`fresh`, `meta`, `noStore`), by load id,
    /// kept for the answer that follows.
    private var advice: [Int: Advice] = [:]
    /// A `meta` message's object, kept for the push (by source) that follows it.
    private var pushMetas: [SourceID: JSONObject] = [:]
    /// Loads waiting for the process to be ready.
    private var queuedLoads: [LoadRequest] = []
    private var crashTimes: [Instant] = []
    /// The plugin said `queuesLoads` in its hello: it may hold loads back, and says `started` when one begins.
    private var queuesLoads = false
    /// `configure`s sent to the running process and not answered yet, by source.
    private var unansweredConfigures: [SourceID: SentConfigure] = [:]
    private var configuresSent = 0
    /// The newest `configure` (by `SentConfigure.order`) the running process has answered, and when it
    /// last answered one: a plugin that works through many of them is given `configureTimeout` for each,
    /// and one that answered a later one has moved past an earlier one it left unanswered.
    private var newestConfigureAnswered = 0
    private var lastConfigureAnswer: Instant
    private var configureWatchArmed = false
    /// The running process is being ended because a `configure` went unanswered (see `configureDue`).
    private var endedOverConfigure = false
    /// Sources not sent to the plugin until their options change, and why (a `configure` never answered,
    /// options too long for a line): their loads fail at once with the reason, so one source's options can
    /// neither hang the plugin's other sources nor crash-loop it into being given up.
    private var heldBack: [SourceID: HeldBack] = [:]
    /// Lines skipped for being over `maximumLineLength`, for the log.
    private var skippedLines = 0
    /// The actions of the input being handled.
    private var actions: [Action] = []

    private struct SentConfigure: Sendable {
        let at: Instant
        let order: Int
    }

    private struct HeldBack: Sendable {
        let options: JSONValue
        let error: SourceError
    }

    init(kind: Kind, now: Instant) {
        self.kind = kind
        lastConfigureAnswer = now
    }

    private mutating func taken() -> [Action] {
        defer { actions.removeAll() }
        return actions
    }

    // MARK: Requests from the engine

    /// The engine wants `request` loaded.
    mutating func start(_ request: LoadRequest, now: Instant) -> [Action] {
        desiredOptions[request.source] = request.options
        switch phase {
        case .gaveUp(let reason):
            fail(request, message: reason, code: .pluginGaveUp)
        case .ready:
            send(request, now: now)
        case .stopped:
            queuedLoads.append(request)
            launch(now: now)
        case .starting, .waitingToRestart:
            queuedLoads.append(request)
        case .shuttingDown:
            break
        }
        return taken()
    }

    mutating func cancel(loadID: Int) -> [Action] {
        queuedLoads.removeAll { $0.loadID.rawValue == loadID }
        advice[loadID] = nil
        if pendingLoads.removeValue(forKey: loadID) != nil { actions.append(.send(.cancel(id: loadID))) }
        return taken()
    }

    mutating func remove(source: SourceID) -> [Action] {
        desiredOptions[source] = nil
        invalidProblems[source] = nil
        heldBack[source] = nil
        pushMetas[source] = nil
        unansweredConfigures[source] = nil
        queuedLoads.removeAll { $0.source == source }
        // A push still waiting for the engine is of a source that is gone.
        actions.append(.dropPushes(source: source))
        if sentOptions.removeValue(forKey: source) != nil { actions.append(.send(.remove(source: source.rawValue))) }
        return taken()
    }

    /// The engine is stopping: nobody waits for the plugin any more. The host then ends the process.
    mutating func shutdown() -> [Action] {
        phase = .shuttingDown
        let reason = "hammock is shutting down"
        return [.settleReadiness(failure: reason), .settleEveryValidation(.pluginFailed(reason))]
    }

    /// The engine is about to validate (or load) `source` with `options`.
    mutating func want(_ source: SourceID, options: JSONValue) {
        desiredOptions[source] = options
    }

    /// Whether the plugin is ready, starting it if it never was.
    mutating func readiness(now: Instant) -> Readiness {
        switch phase {
        case .ready: return .ready
        case .gaveUp(let reason): return .failed(reason)
        case .shuttingDown: return .failed("hammock is shutting down")
        case .stopped: launch(now: now)
        case .starting, .waitingToRestart: break
        }
        return .waiting(taken())
    }

    /// Configures `source` again to hear the plugin's verdict (a `settleValidation` action), unless the
    /// same options are on their way already. The plugin must be ready.
    mutating func validate(_ source: SourceID, now: Instant) -> [Action] {
        configureIfNeeded(source, now: now, force: true)
        return taken()
    }

    // MARK: The process

    /// What the process of `generation` wrote.
    mutating func received(_ line: Line, generation: Int, now: Instant) -> [Action] {
        guard generation == self.generation else { return [] }
        switch line {
        case .tooLong(let length, let head):
            if case .starting = phase {
                fail(
                    generation,
                    "wrote a line of \(length) bytes, over the limit of \(Self.maximumLineLength), before answering hello")
            } else {
                skipped(length: length, head: head)
            }
        case .notProtocol(let error, let excerpt):
            fail(generation, "wrote a line that is not protocol (\(error)): \(excerpt)")
        case .message(let message):
            if case .starting = phase {
                hello(message, generation: generation, now: now)
            } else {
                handle(message, generation: generation, now: now)
            }
        }
        return taken()
    }

    /// The process of `generation` ended (its output read to the end).
    mutating func exited(generation: Int, exit: PluginExit, now: Instant) -> [Action] {
        guard generation == self.generation else { return [] }
        if case .shuttingDown = phase { return [] }
        actions.append(.sealEveryPush)
        let reason = "the \(kind) plugin \(failureReason ?? exit.description)"
        crashTimes = crashTimes.filter { now - $0 < Self.crashWindow } + [now]

        let error = SourceError(message: reason, code: .pluginFailed)
        for (loadID, source) in pendingLoads.sorted(by: { $0.key < $1.key }) {
            report(.loadFinished(source: source, loadID: loadID, outcome: .error(error)))
        }
        let failedSources = Set(pendingLoads.values).union(queuedLoads.map(\.source))
        pendingLoads.removeAll()
        advice.removeAll()
        pushMetas.removeAll()
        // Sources with no load in flight hear of it too: their watches and streams are gone until reloaded.
        for source in desiredOptions.keys.sorted() where !failedSources.contains(source) {
            report(.pushedError(source: source, error: error))
        }
        // A plugin ended over one source's `configure` restarts without that source, and answers the others
        // then: `check` reports the culprit alone. Any other end fails the validations it leaves.
        if !endedOverConfigure || crashTimes.count >= Self.maximumCrashes {
            actions.append(.settleEveryValidation(.pluginFailed(reason)))
        }
        // Whoever waits for the plugin to be ready hears of the failure now, not after every restart.
        actions.append(.settleReadiness(failure: reason))

        if crashTimes.count >= Self.maximumCrashes {
            let message = "\(reason); gave up after \(crashTimes.count) failures within \(Self.crashWindow.humanReadable)"
            actions.append(.log(.error, message))
            phase = .gaveUp(message)
            for request in queuedLoads { fail(request, message: message, code: .pluginGaveUp) }
            queuedLoads.removeAll()
            return taken()
        }
        // Loads that waited for this process (to start, or to restart) fail with it, like those it was sent:
        // otherwise a source would stay loading, its failures unseen, through every restart until the give-up.
        // The engine retries them by its own backoff.
        for request in queuedLoads { fail(request, message: reason, code: .pluginFailed) }
        queuedLoads.removeAll()
        let delay = Self.restartDelay(afterCrashes: crashTimes.count)
        actions.append(.log(.error, "\(reason); restarting it in \(delay.humanReadable)"))
        phase = .waitingToRestart
        actions.append(.setTimer(.restart(generation: generation), deadline: now + delay))
        return taken()
    }

    /// A deadline set by a `setTimer` action passed.
    mutating func timerFired(_ timer: Timer, now: Instant) -> [Action] {
        switch timer {
        case .handshake(let generation):
            guard generation == self.generation, case .starting = phase else { break }
            fail(generation, "did not answer hello within \(Self.handshakeTimeout.humanReadable)")
        case .configure(let generation):
            configureDue(generation, now: now)
        case .restart(let generation):
            guard generation == self.generation, case .waitingToRestart = phase else { break }
            actions.append(.countRestart)
            launch(now: now)
        }
        return taken()
    }

    private mutating func launch(now: Instant) {
        generation += 1
        phase = .starting
        failureReason = nil
        sentOptions.removeAll()
        unansweredConfigures.removeAll()
        newestConfigureAnswered = configuresSent
        configureWatchArmed = false
        endedOverConfigure = false
        actions.append(.startProcess(generation: generation))
        actions.append(.send(.hello(protocol: pluginProtocolVersion)))
        actions.append(.setTimer(.handshake(generation: generation), deadline: now + Self.handshakeTimeout))
    }

    /// Ends the current process because it misbehaved; its exit then reports `reason`.
    private mutating func fail(_ generation: Int, _ reason: String) {
        guard generation == self.generation, failureReason == nil else { return }
        failureReason = reason
        actions.append(.kill)
    }

    private mutating func hello(_ message: PluginMessage, generation: Int, now: Instant) {
        guard case .hello(let version, let kinds, let pluginVersion, let templates, let queues, _) = message else {
            fail(generation, "sent \"\(message.type)\" before answering hello")
            return
        }
        guard version == pluginProtocolVersion else {
            fail(generation, "speaks protocol \(version); this hammock speaks \(pluginProtocolVersion)")
            return
        }
        // The protocol names kinds and sources as text: they become typed names here, as they come in.
        guard kinds.contains(kind.rawValue) else {
            fail(generation, "does not serve kind \"\(kind)\" (it serves \(kinds.joined(separator: ", ")))")
            return
        }
        actions.append(.log(.debug, "plugin ready", metadata: ["kind": kind.rawValue, "version": pluginVersion]))
        templateRules = templates[kind.rawValue] ?? TemplateRules()
        queuesLoads = queues
        report(.templateRulesLearned(kind: kind))
        phase = .ready
        for source in desiredOptions.keys.sorted() { configureIfNeeded(source, now: now) }
        let queued = queuedLoads
        queuedLoads.removeAll()
        for request in queued { send(request, now: now) }
        actions.append(.settleReadiness(failure: nil))
    }

    private mutating func handle(_ message: PluginMessage, generation: Int, now: Instant) {
        switch message {
        case .hello:
            fail(generation, "said hello twice")
        case .configured(let name):
            let source = SourceID(name)
            configureAnswered(source, now: now)
            invalidProblems[source] = nil
            actions.append(.settleValidation(source: source, .valid))
        case .invalid(let name, let problems):
            let source = SourceID(name)
            configureAnswered(source, now: now)
            invalidProblems[source] = problems
            actions.append(.settleValidation(source: source, .invalid(problems)))
        case .newData(let id, _, let content, let etag, let lastModified):
            answer(id, .newData(content, etag: etag, lastModified: lastModified))
        case .fresh(let id, let seconds):
            // Kept for the answer that follows; a day at most, as a `Retry-After`.
            guard pendingLoads[id] != nil else { return }
            advice[id, default: Advice()].freshFor =
                .milliseconds(Int64(min(seconds, Double(RetryPolicy.longestServerFloor.milliseconds) / 1000) * 1000))
        case .pushedData(let name, let content):
            let source = SourceID(name)
            let meta = pushMetas.removeValue(forKey: source)
            guard desiredOptions[source] != nil else { return }
            report(.pushed(source: source, content: content, meta: meta))
        case .meta(let id, let meta):
            guard pendingLoads[id] != nil, let meta = bounded(meta, of: pendingLoads[id]) else { return }
            advice[id, default: Advice()].meta = meta
        case .noStore(let id):
            guard pendingLoads[id] != nil else { return }
            advice[id, default: Advice()].mayBeStored = false
        case .pushedMeta(let name, let meta):
            let source = SourceID(name)
            guard desiredOptions[source] != nil, let meta = bounded(meta, of: source) else { return }
            pushMetas[source] = meta
        case .notModified(let id):
            answer(id, .notModified)
        case .error(let id, _, var error):
            if let source = pendingLoads[id], let problems = invalidProblems[source] {
                error = SourceError(
                    message: "invalid options: " + problems.map { "\($0.pointer): \($0.message)" }.joined(separator: "; "),
                    code: .invalidOptions)
            }
            answer(id, .error(error))
        case .pushedError(let name, let error):
            let source = SourceID(name)
            guard desiredOptions[source] != nil else { return }
            actions.append(.sealPushes(source: source))
            report(.pushedError(source: source, error: error))
        case .cancelled(let id):
            pendingLoads[id] = nil
            advice[id] = nil
        case .started(let id):
            guard let source = pendingLoads[id] else { return }
            report(.loadStarted(source: source, loadID: id))
        }
    }

    private mutating func report(_ report: Report) {
        actions.append(.report(report))
    }

    private mutating func answer(_ loadID: Int, _ outcome: LoadOutcome) {
        let said = advice.removeValue(forKey: loadID) ?? Advice()
        // An answer to a load the engine cancelled or timed out is no longer wanted.
        guard let source = pendingLoads.removeValue(forKey: loadID) else { return }
        actions.append(.sealPushes(source: source))
        report(.loadFinished(source: source, loadID: loadID, outcome: said.wrapping(outcome)))
    }

    /// What a plugin said of one load's answer before sending it.
    private struct Advice {
        var freshFor: Duration?
        var meta: JSONObject?
        var mayBeStored = true

        /// `outcome` with this advice around it; an error or a cancellation takes none.
        func wrapping(_ outcome: LoadOutcome) -> LoadOutcome {
            switch outcome {
            case .newData, .notModified:
                var advised = outcome
                if let meta { advised = .described(advised, meta: meta) }
                if let freshFor { advised = .fresh(advised, for: freshFor) }
                return mayBeStored ? advised : .notStored(advised)
            case .error, .cancelled, .fresh, .described, .notStored:
                return outcome
            }
        }
    }

    /// `meta` if it is within `maximumMetaLength` encoded; else nil, and a warning that says whose it was.
    private mutating func bounded(_ meta: JSONObject, of source: SourceID?) -> JSONObject? {
        let length = JSONValue.object(meta).jsonBytes.count
        guard length > maximumMetaLength else { return meta }
        actions.append(
            .log(
                .warning,
                "the \(kind) plugin sent a meta of \(length) bytes for source \"\(source?.rawValue ?? "?")\"; "
                    + "the limit is \(maximumMetaLength), so the answer goes on without it"))
        return nil
    }

    private mutating func fail(_ request: LoadRequest, message: String, code: SourceError.Code) {
        report(.loadFinished(source: request.source, loadID: request.loadID.rawValue, outcome: .error(SourceError(message: message, code: code))))
    }

    private mutating func send(_ request: LoadRequest, now: Instant) {
        configureIfNeeded(request.source, now: now)
        if let held = heldBack[request.source] {
            report(.loadFinished(source: request.source, loadID: request.loadID.rawValue, outcome: .error(held.error)))
            return
        }
        pendingLoads[request.loadID.rawValue] = request.source
        actions.append(
            .send(
                .load(
                    source: request.source.rawValue, id: request.loadID.rawValue, etag: request.etag, lastModified: request.lastModified,
                    timeout: Double(request.timeout.milliseconds) / 1000, pages: request.pages)))
        // Its timeout waits for the plugin's `started`, so a load queued behind a thousand others does not
        // time out before it runs.
        if queuesLoads { report(.loadQueued(source: request.source, loadID: request.loadID.rawValue)) }
    }

    // MARK: Configure

    /// Sends `configure` when the process has not seen these options yet (first use, a restart, or a
    /// template whose input changed), unless the source is held back with these very options.
    private mutating func configureIfNeeded(_ source: SourceID, now: Instant, force: Bool = false) {
        guard case .ready = phase, let options = desiredOptions[source] else { return }
        if let held = heldBack[source] {
            guard held.options != options else {
                actions.append(.settleValidation(source: source, .pluginFailed(held.error.message)))
                return
            }
            heldBack[source] = nil
        }
        // Forced (to hear the plugin's verdict) unless the same options are on their way already.
        let inFlight = unansweredConfigures[source] != nil && sentOptions[source] == options
        guard (force && !inFlight) || sentOptions[source] != options else { return }
        let line = EngineMessage.configure(source: source.rawValue, options: options).line
        guard line.count - 1 <= Self.maximumLineToPlugin else {
            let message =
                "the options of source \"\(source)\" are \(line.count - 1) bytes once encoded, over the limit of "
                + "\(Self.maximumLineToPlugin) bytes for a line to a plugin"
            holdBack(source, options: options, SourceError(message: message, code: .tooLarge))
            return
        }
        sentOptions[source] = options
        configuresSent += 1
        // Options that changed while the former ones were unanswered: the plugin has had a `configure` of
        // this source to answer since the first.
        if unansweredConfigures[source] == nil {
            unansweredConfigures[source] = SentConfigure(at: now, order: configuresSent)
        }
        actions.append(.sendLine(line))
        armConfigureWatch()
    }

    private mutating func holdBack(_ source: SourceID, options: JSONValue, _ error: SourceError) {
        heldBack[source] = HeldBack(options: options, error: error)
        unansweredConfigures[source] = nil
        actions.append(.settleValidation(source: source, .pluginFailed(error.message)))
    }

    private mutating func configureAnswered(_ source: SourceID, now: Instant) {
        lastConfigureAnswer = now
        if let sent = unansweredConfigures.removeValue(forKey: source) {
            newestConfigureAnswered = max(newestConfigureAnswered, sent.order)
        }
        // A late answer: the plugin did take these options after all.
        if let held = heldBack[source], held.options == sentOptions[source] { heldBack[source] = nil }
    }

    /// When the oldest unanswered `configure` is due: `configureTimeout` after it was sent, or after the
    /// plugin last answered one, whichever is later.
    private var nextConfigureDeadline: Instant? {
        guard let oldest = unansweredConfigures.values.map(\.at).min() else { return nil }
        return max(oldest, lastConfigureAnswer) + Self.configureTimeout
    }

    /// One timer at a time watches the `configure`s: it is set for the oldest, and set again when it fires.
    private mutating func armConfigureWatch() {
        guard !configureWatchArmed, let deadline = nextConfigureDeadline else { return }
        configureWatchArmed = true
        actions.append(.setTimer(.configure(generation: generation), deadline: deadline))
    }

    /// A `configure` left unanswered past its deadline holds its source back. The plugin is killed (and
    /// restarted without that source) unless it answered a later `configure`, which shows it is still
    /// working: a plugin that handles its input in order, as HammockPluginKit does, is stuck on that one.
    private mutating func configureDue(_ generation: Int, now: Instant) {
        guard generation == self.generation else { return }
        configureWatchArmed = false
        guard case .ready = phase, let deadline = nextConfigureDeadline else { return }
        guard deadline <= now else {
            armConfigureWatch()
            return
        }
        guard let oldest = unansweredConfigures.min(by: { $0.value.order < $1.value.order }),
            let options = sentOptions[oldest.key]
        else { return }
        let (source, sent) = (oldest.key, oldest.value)
        let reason = "did not answer `configure` for source \"\(source)\" within \(Self.configureTimeout.humanReadable)"
        actions.append(.log(.error, "the \(kind) plugin \(reason)"))
        holdBack(source, options: options, SourceError(message: "the \(kind) plugin \(reason)", code: .pluginTimeout))
        if newestConfigureAnswered > sent.order {
            armConfigureWatch()
        } else {
            endedOverConfigure = true
            fail(generation, reason)
        }
    }

    /// A line over `maximumLineLength` is passed over, not read, and fails what its first bytes say it
    /// answers: a load (by `id`), or a source's push (by `source`). The plugin is not ended for it: its
    /// other sources go on. A line that names neither is only logged; the load it answered, if any, fails
    /// when its timeout passes.
    private mutating func skipped(length: Int, head: LineHead) {
        skippedLines += 1
        let what = head.type.map { "a \"\($0)\" line" } ?? "a line"
        let message =
            "the \(kind) plugin wrote \(what) of \(length) bytes, over the limit of \(Self.maximumLineLength) for a line; "
            + "it was skipped"
        let error = SourceError(message: message, code: .pluginFailed)
        if let id = head.id, pendingLoads[id] != nil {
            actions.append(.log(.warning, "\(message) (load \(id))"))
            answer(id, .error(error))
        } else if head.id == nil, let source = head.source.map({ SourceID($0) }), desiredOptions[source] != nil {
            actions.append(.log(.warning, "\(message) (a push of \"\(source)\")"))
            actions.append(.sealPushes(source: source))
            report(.pushedError(source: source, error: error))
        } else {
            let head = pluginLineHeadLength
            actions.append(
                .log(.warning, "\(message), naming no load or source in its first \(head) bytes (\(skippedLines) skipped so far)"))
        }
    }
}
