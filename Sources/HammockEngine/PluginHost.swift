import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockProtocol
import HammockSystem
import Logging

/// Runs and supervises the one plugin process that serves a kind.
///
/// The host starts the plugin when a source first needs it, shakes hands, configures every source of the
/// kind, forwards loads and answers, and passes the plugin's stderr on line by line with the kind as prefix.
/// When the plugin dies, hangs its handshake or writes a line that is not protocol, its loads fail (the
/// sources keep their content), it is restarted with backoff and its sources are configured again; after
/// `maximumCrashes` crashes within `crashWindow` it is given up and its sources say so.
///
/// Every wait on the plugin has a deadline on `clock`: the handshake and each `configure` 5 s, a load its
/// source's timeout (kept by the engine), the exit after `shutdown` 2 s. A line too long to read fails the
/// load or source it names, not the plugin (see `skipped`).
///
/// Every task the host starts (each process and each deadline) is a child of one task group, which
/// `shutdown` ends (see `Supervision`): nothing the host started outlives it.
actor PluginHost: SourceLoader {
    let kind: String
    let origin: PluginOrigin
    private let logger: Logger
    private let inbox: EngineInbox
    private let makeTransport: PluginTransportFactory
    private let clock: SupervisionClock
    /// The configuration's secrets, to redact what the host quotes of a plugin's line before it cuts it.
    private let secrets: Secrets
    private var supervision = Supervision()

    static let handshakeTimeout: Duration = .seconds(5)
    static let configureTimeout: Duration = .seconds(5)
    static let shutdownGrace: Duration = .seconds(2)
    /// How long the guard gets to end a plugin it was told to end, before its group is killed outright.
    static let killGrace: Duration = .seconds(3)
    static let maximumCrashes = 5
    static let crashWindow: Duration = .seconds(60)
    /// A plugin line longer than this is a protocol violation, not something to buffer.
    static let maximumLineLength = maximumPluginLineLength
    /// The longest line HammockPluginKit reads from the engine (its `LineReader` limit): a `configure`
    /// longer than this would be dropped unanswered, so it is not sent.
    static let maximumLineToPlugin = 64 << 20

    private enum Phase {
        case stopped
        case starting
        case ready
        case waitingToRestart
        case gaveUp(String)
        case shuttingDown
    }

    private var phase = Phase.stopped
    private var generation = 0
    /// The running process, if any; `nil` once `exited` reported its end.
    private var process: (any PluginTransport)?
    /// Whoever waits for the running process to end (`waitForExit`), by wait.
    private var exitWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]
    private var exitWaits = 0
    /// Why the current process is being ended, when the host ended it; reported instead of its exit status.
    private var failureReason: String?
    /// The options the engine wants for each source, and those the running process was last sent.
    private var desiredOptions: [String: JSONValue] = [:]
    private var sentOptions: [String: JSONValue] = [:]
    private var invalidProblems: [String: [OptionProblem]] = [:]
    /// Loads sent to the running process, by load id.
    private var pendingLoads: [Int: String] = [:]
    /// Loads waiting for the process to be ready.
    private var queuedLoads: [LoadRequest] = []
    private var crashTimes: [SupervisionClock.Instant] = []
    private var readinessWaiters: [CheckedContinuation<String?, Never>] = []
    /// What `validate` waits for, by source: its waiters, and an answer that came before anyone waited.
    private var validationWaiters: [String: [CheckedContinuation<ValidationAnswer, Never>]] = [:]
    private var earlyValidationAnswers: [String: ValidationAnswer] = [:]
    /// What the plugin's hello declared about templates in this kind's options; `nil` until a hello came.
    private(set) var templateRules: TemplateRules?
    /// The plugin said `queuesLoads` in its hello: it may hold loads back, and says `started` when one begins.
    private var queuesLoads = false

    /// `configure`s sent to the running process and not answered yet, by source.
    private var unansweredConfigures: [String: SentConfigure] = [:]
    private var configuresSent = 0
    /// The newest `configure` (by `SentConfigure.order`) the running process has answered, and when it
    /// last answered one: a plugin that works through many of them is given `configureTimeout` for each,
    /// and one that answered a later one has moved past an earlier one it left unanswered.
    private var newestConfigureAnswered = 0
    private var lastConfigureAnswer: SupervisionClock.Instant
    private var configureWatchArmed = false
    /// The running process is being ended because a `configure` went unanswered (see `configureWatchFired`).
    private var endedOverConfigure = false
    /// Sources not sent to the plugin until their options change, and why (a `configure` never answered,
    /// options too long for a line): their loads fail at once with the reason, so one source's options can
    /// neither hang the plugin's other sources nor crash-loop it into being given up.
    private var heldBack: [String: HeldBack] = [:]
    /// Lines skipped for being over `maximumLineLength`, for the log.
    private var skippedLines = 0
    /// The answers of the read being handled, not yet handed to the engine (see `deliver`); nil between reads.
    private var answersOfRead: [FinishedLoad]?

    private struct SentConfigure {
        let at: SupervisionClock.Instant
        let order: Int
    }

    private struct HeldBack {
        let options: JSONValue
        let error: SourceError
    }

    /// Each source's push that the engine has not taken yet (see `PushMailbox`). A mailbox is let go as
    /// soon as anything else about its source goes to the engine (a load's answer, an error, the plugin's
    /// exit), so a push that follows starts a new one and the engine sees them in the order they came.
    private var pushMailboxes: [String: PushMailbox] = [:]

    enum ValidationAnswer: Sendable {
        case valid
        case invalid([OptionProblem])
        case pluginFailed(String)
    }

    /// A host of real plugin processes, each started from `command` below hammock's guard.
    init(kind: String, command: [String], inbox: EngineInbox, logger: Logger, standardError: StandardError) {
        self.init(kind: kind, origin: .command(command), inbox: inbox, logger: logger, clock: .system, secrets: standardError.secrets) {
            ProcessTransport(command: command, reapsOrphans: true) { standardError.write(prefix: kind, line: $0) }
        }
    }

    /// - Parameter makeTransport: makes the transport of each process it starts (tests pass an in-memory one).
    init(
        kind: String, origin: PluginOrigin, inbox: EngineInbox, logger: Logger, clock: SupervisionClock,
        secrets: Secrets = Secrets(), makeTransport: @escaping PluginTransportFactory
    ) {
        self.kind = kind
        self.secrets = secrets
        self.origin = origin
        self.inbox = inbox
        self.logger = logger
        self.clock = clock
        self.makeTransport = makeTransport
        lastConfigureAnswer = clock.now()
    }

    // MARK: SourceLoader

    func start(_ request: LoadRequest) {
        desiredOptions[request.source] = request.options
        switch phase {
        case .gaveUp(let reason):
            fail(request, message: reason, code: .pluginGaveUp)
        case .ready:
            send(request)
        case .stopped:
            queuedLoads.append(request)
            launch()
        case .starting, .waitingToRestart:
            queuedLoads.append(request)
        case .shuttingDown:
            break
        }
    }

    func start(_ requests: [LoadRequest]) {
        for request in requests { start(request) }
    }

    func cancel(source: String, loadID: Int) {
        queuedLoads.removeAll { $0.loadID == loadID }
        if pendingLoads.removeValue(forKey: loadID) != nil { process?.send(.cancel(id: loadID)) }
    }

    func remove(source: String) {
        desiredOptions[source] = nil
        invalidProblems[source] = nil
        heldBack[source] = nil
        unansweredConfigures[source] = nil
        queuedLoads.removeAll { $0.source == source }
        // A push still waiting for the engine is of a source that is gone: empty its mailbox.
        _ = pushMailboxes.removeValue(forKey: source)?.take()
        if sentOptions.removeValue(forKey: source) != nil { process?.send(.remove(source: source)) }
    }

    func shutdown() async {
        phase = .shuttingDown
        for waiter in readinessWaiters { waiter.resume(returning: "hammock is shutting down") }
        readinessWaiters.removeAll()
        for source in Array(validationWaiters.keys) { settleValidation(source, .pluginFailed("hammock is shutting down")) }
        var exited = true
        if let process {
            process.send(.shutdown)
            process.closeInput()
            exited = await waitForExit(within: Self.shutdownGrace)
            if !exited {
                logger.warning("the \(kind) plugin did not exit within \(Self.shutdownGrace.humanReadable) of shutdown; killing it")
                process.kill()
                exited = await waitForExit(within: Self.killGrace + .seconds(2))
            }
        }
        // The deadlines still armed end with it. A process that outlived even its kill stays with its task
        // rather than hold hammock's exit (as before: the kernel owes it a death that never came).
        let supervision = supervision
        await supervision.end(waitingForChildren: exited)
    }

    /// Whether the running process ended within `timeout`.
    private func waitForExit(within timeout: Duration) async -> Bool {
        guard process != nil else { return true }
        exitWaits += 1
        let wait = exitWaits
        let deadline = clock.now() + timeout
        return await withCheckedContinuation { continuation in
            exitWaiters[wait] = continuation
            after(deadline) { $0.exitWaitTimedOut(wait) }
        }
    }

    private func exitWaitTimedOut(_ wait: Int) {
        exitWaiters.removeValue(forKey: wait)?.resume(returning: false)
    }

    // MARK: Validation

    /// Configures each source with its options as written and reports what the plugin thinks of them.
    ///
    /// Every `configure` goes out at once, in order, and each answer is waited for at most
    /// `configureTimeout` (counted from the plugin's last answer to one while it works through them).
    func validate(_ sources: [(id: String, options: JSONValue)]) async -> [String: ValidationAnswer] {
        for source in sources { desiredOptions[source.id] = source.options }
        if let failure = await ready() {
            return Dictionary(uniqueKeysWithValues: sources.map { ($0.id, .pluginFailed(failure)) })
        }
        for source in sources {
            // Registered before the `configure` goes out, so that an answer coming first is kept.
            earlyValidationAnswers[source.id] = nil
            if validationWaiters[source.id] == nil { validationWaiters[source.id] = [] }
            configureIfNeeded(source.id, force: true)
        }
        var answers: [String: ValidationAnswer] = [:]
        for source in sources {
            if let early = earlyValidationAnswers.removeValue(forKey: source.id) {
                answers[source.id] = early
                continue
            }
            answers[source.id] = await withCheckedContinuation { continuation in
                validationWaiters[source.id, default: []].append(continuation)
            }
        }
        return answers
    }

    /// The rules of the plugin's hello, starting the plugin if it never was (a kind whose plugin command
    /// changed on reload, with no changed source to check): its sources are about to load on it. `nil` when
    /// no hello came: the plugin failed to start, or is waiting to restart.
    func templateRulesStartingIfNeeded() async -> TemplateRules? {
        if case .stopped = phase { _ = await ready() }
        return templateRules
    }

    /// Hands `answer` to whoever validates `source`, or keeps it for the `validate` about to wait for it.
    private func settleValidation(_ source: String, _ answer: ValidationAnswer) {
        guard let waiters = validationWaiters.removeValue(forKey: source) else { return }
        if waiters.isEmpty { earlyValidationAnswers[source] = answer }
        for waiter in waiters { waiter.resume(returning: answer) }
    }

    /// Starts the plugin if needed and waits for its handshake; returns why it failed, if it did.
    private func ready() async -> String? {
        switch phase {
        case .ready: return nil
        case .gaveUp(let reason): return reason
        case .shuttingDown: return "hammock is shutting down"
        case .stopped: launch()
        case .starting, .waitingToRestart: break
        }
        return await withCheckedContinuation { readinessWaiters.append($0) }
    }

    // MARK: The process

    private func launch() {
        generation += 1
        let generation = generation
        phase = .starting
        failureReason = nil
        sentOptions.removeAll()
        unansweredConfigures.removeAll()
        newestConfigureAnswered = configuresSent
        configureWatchArmed = false
        endedOverConfigure = false
        let process = makeTransport()
        self.process = process
        process.send(.hello(protocol: pluginProtocolVersion))
        supervision.start { [self] in
            let exit = await process.run { await self.received($0, generation: generation) }
            await exited(generation: generation, exit: exit)
        }
        after(clock.now() + Self.handshakeTimeout) { $0.handshakeTimedOut(generation) }
    }

    /// Calls `action` on the host at `deadline`, unless supervision ends first. The deadline is taken when
    /// the host asks, not when the timer's task starts.
    private func after(_ deadline: SupervisionClock.Instant, _ action: @escaping @Sendable (isolated PluginHost) -> Void) {
        let clock = clock
        supervision.start { [self] in
            guard await clock.sleep(until: deadline) else { return }
            await action(self)
        }
    }

    private func handshakeTimedOut(_ generation: Int) {
        guard generation == self.generation, case .starting = phase else { return }
        fail(generation, "did not answer hello within \(Self.handshakeTimeout.humanReadable)")
    }

    /// Ends the current process because it misbehaved; `exited` then reports `reason`.
    private func fail(_ generation: Int, _ reason: String) {
        guard generation == self.generation, failureReason == nil else { return }
        failureReason = reason
        process?.kill()
    }

    private func received(_ pieces: [LineSplitter.Piece], generation: Int) {
        answersOfRead = []
        for piece in pieces { received(piece, generation: generation) }
        deliverAnswersOfRead()
        answersOfRead = nil
    }

    /// Hands `input` to the engine. While the lines of one read are handled, the answers among them wait
    /// in `answersOfRead` to go as one input (one wake-up and one turn of the engine for all of them);
    /// anything else goes after the answers before it, so the engine sees everything in the plugin's order.
    private func deliver(_ input: EngineInput) {
        if case .loadFinished(let source, let loadID, let outcome) = input, answersOfRead != nil {
            answersOfRead?.append(FinishedLoad(source: source, loadID: loadID, outcome: outcome))
            return
        }
        deliverAnswersOfRead()
        inbox.yield(input)
    }

    private func deliverAnswersOfRead() {
        guard let answers = answersOfRead, let first = answers.first else { return }
        answersOfRead = []
        if answers.count == 1 {
            inbox.yield(.loadFinished(source: first.source, loadID: first.loadID, outcome: first.outcome))
        } else {
            inbox.yield(.loadsFinished(answers))
        }
    }

    private func received(_ piece: LineSplitter.Piece, generation: Int) {
        guard generation == self.generation else { return }
        let message: PluginMessage
        switch piece {
        case .tooLong(let length, let head):
            if case .starting = phase {
                fail(
                    generation,
                    "wrote a line of \(length) bytes, over the limit of \(Self.maximumLineLength), before answering hello")
            } else {
                skipped(length: length, head: LineHead(head))
            }
            return
        case .line(let bytes):
            do throws(ProtocolError) {
                message = try PluginMessage(line: bytes)
            } catch {
                // Redacted here, before the cut: the engine redacts the message again, but a secret cut in two
                // by this excerpt would no longer be found.
                let excerpt = secrets.redactor.excerpt(bytes, limit: 120)
                fail(generation, "wrote a line that is not protocol (\(error.message)): \(excerpt)")
                return
            }
        }
        if case .starting = phase {
            guard case .hello(let version, let kinds, let pluginVersion, let templates, let queues, _) = message else {
                fail(generation, "sent \"\(message.type)\" before answering hello")
                return
            }
            guard version == pluginProtocolVersion else {
                fail(generation, "speaks protocol \(version); this hammock speaks \(pluginProtocolVersion)")
                return
            }
            guard kinds.contains(kind) else {
                fail(generation, "does not serve kind \"\(kind)\" (it serves \(kinds.joined(separator: ", ")))")
                return
            }
            logger.debug("plugin ready", metadata: ["kind": "\(kind)", "version": "\(pluginVersion)"])
            templateRules = templates[kind] ?? TemplateRules()
            queuesLoads = queues
            deliver(.templateRulesLearned(kind: kind))
            phase = .ready
            for source in desiredOptions.keys.sorted() { configureIfNeeded(source) }
            let queued = queuedLoads
            queuedLoads.removeAll()
            for request in queued { send(request) }
            for waiter in readinessWaiters { waiter.resume(returning: nil) }
            readinessWaiters.removeAll()
            return
        }
        handle(message, generation: generation)
    }

    private func handle(_ message: PluginMessage, generation: Int) {
        switch message {
        case .hello:
            fail(generation, "said hello twice")
        case .configured(let source):
            configureAnswered(source)
            invalidProblems[source] = nil
            settleValidation(source, .valid)
        case .invalid(let source, let problems):
            configureAnswered(source)
            invalidProblems[source] = problems
            settleValidation(source, .invalid(problems))
        case .newData(let id, _, let content, let etag, let lastModified):
            answer(id, .newData(content, etag: etag, lastModified: lastModified))
        case .pushedData(let source, let content):
            guard desiredOptions[source] != nil else { return }
            push(content, for: source)
        case .notModified(let id):
            answer(id, .notModified)
        case .error(let id, _, var error):
            if let source = pendingLoads[id], let problems = invalidProblems[source] {
                error = SourceError(
                    message: "invalid options: " + problems.map { "\($0.pointer): \($0.message)" }.joined(separator: "; "),
                    code: .invalidOptions)
            }
            answer(id, .error(error))
        case .pushedError(let source, let error):
            guard desiredOptions[source] != nil else { return }
            sealPushes(for: source)
            deliver(.pushedError(source: source, error: error))
        case .cancelled(let id):
            pendingLoads[id] = nil
        case .started(let id):
            guard let source = pendingLoads[id] else { return }
            deliver(.loadStarted(source: source, loadID: id))
        }
    }

    private func answer(_ loadID: Int, _ outcome: LoadOutcome) {
        // An answer to a load the engine cancelled or timed out is no longer wanted.
        guard let source = pendingLoads.removeValue(forKey: loadID) else { return }
        sealPushes(for: source)
        deliver(.loadFinished(source: source, loadID: loadID, outcome: outcome))
    }

    /// Hands a push to the engine, or, while its last one still waits there, puts it in that one's place.
    private func push(_ content: JSONValue, for source: String) {
        if let waiting = pushMailboxes[source], waiting.replace(with: content) { return }
        let mailbox = PushMailbox(content)
        pushMailboxes[source] = mailbox
        deliver(.pushed(source: source, mailbox: mailbox))
    }

    /// Whatever comes next about the source goes after the pushes already waiting, not into their mailbox.
    private func sealPushes(for source: String) {
        pushMailboxes[source] = nil
    }

    private func send(_ request: LoadRequest) {
        configureIfNeeded(request.source)
        if let held = heldBack[request.source] {
            deliver(.loadFinished(source: request.source, loadID: request.loadID, outcome: .error(held.error)))
            return
        }
        pendingLoads[request.loadID] = request.source
        process?.send(
            .load(
                source: request.source, id: request.loadID, etag: request.etag, lastModified: request.lastModified,
                timeout: Double(request.timeout.milliseconds) / 1000))
        // Its timeout waits for the plugin's `started`, so a load queued behind a thousand others does not
        // time out before it runs.
        if queuesLoads { deliver(.loadQueued(source: request.source, loadID: request.loadID)) }
    }

    /// Sends `configure` when the process has not seen these options yet (first use, a restart, or a
    /// template whose input changed), unless the source is held back with these very options.
    private func configureIfNeeded(_ source: String, force: Bool = false) {
        guard case .ready = phase, let options = desiredOptions[source] else { return }
        if let held = heldBack[source] {
            guard held.options != options else {
                settleValidation(source, .pluginFailed(held.error.message))
                return
            }
            heldBack[source] = nil
        }
        // Forced (to hear the plugin's verdict) unless the same options are on their way already.
        let inFlight = unansweredConfigures[source] != nil && sentOptions[source] == options
        guard (force && !inFlight) || sentOptions[source] != options else { return }
        let line = EngineMessage.configure(source: source, options: options).line
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
            unansweredConfigures[source] = SentConfigure(at: clock.now(), order: configuresSent)
        }
        process?.send(line: line)
        armConfigureWatch()
    }

    private func holdBack(_ source: String, options: JSONValue, _ error: SourceError) {
        heldBack[source] = HeldBack(options: options, error: error)
        unansweredConfigures[source] = nil
        settleValidation(source, .pluginFailed(error.message))
    }

    private func configureAnswered(_ source: String) {
        lastConfigureAnswer = clock.now()
        if let sent = unansweredConfigures.removeValue(forKey: source) {
            newestConfigureAnswered = max(newestConfigureAnswered, sent.order)
        }
        // A late answer: the plugin did take these options after all.
        if let held = heldBack[source], held.options == sentOptions[source] { heldBack[source] = nil }
    }

    /// When the oldest unanswered `configure` is due: `configureTimeout` after it was sent, or after the
    /// plugin last answered one, whichever is later.
    private var nextConfigureDeadline: SupervisionClock.Instant? {
        guard let oldest = unansweredConfigures.values.map(\.at).min() else { return nil }
        return max(oldest, lastConfigureAnswer) + Self.configureTimeout
    }

    private func armConfigureWatch() {
        guard !configureWatchArmed, let deadline = nextConfigureDeadline else { return }
        configureWatchArmed = true
        let generation = generation
        after(deadline) { $0.configureWatchFired(generation) }
    }

    /// A `configure` left unanswered past its deadline holds its source back. The plugin is killed (and
    /// restarted without that source) unless it answered a later `configure`, which shows it is still
    /// working: a plugin that handles its input in order, as HammockPluginKit does, is stuck on that one.
    private func configureWatchFired(_ generation: Int) {
        guard generation == self.generation else { return }
        configureWatchArmed = false
        guard case .ready = phase, let deadline = nextConfigureDeadline else { return }
        guard deadline <= clock.now() else {
            armConfigureWatch()
            return
        }
        guard let oldest = unansweredConfigures.min(by: { $0.value.order < $1.value.order }),
            let options = sentOptions[oldest.key]
        else { return }
        let (source, sent) = (oldest.key, oldest.value)
        let reason = "did not answer `configure` for source \"\(source)\" within \(Self.configureTimeout.humanReadable)"
        logger.error("the \(kind) plugin \(reason)")
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
    private func skipped(length: Int, head: LineHead) {
        skippedLines += 1
        let what = head.type.map { "a \"\($0)\" line" } ?? "a line"
        let message =
            "the \(kind) plugin wrote \(what) of \(length) bytes, over the limit of \(Self.maximumLineLength) for a line; "
            + "it was skipped"
        let error = SourceError(message: message, code: .pluginFailed)
        if let id = head.id, pendingLoads[id] != nil {
            logger.warning("\(message) (load \(id))")
            answer(id, .error(error))
        } else if head.id == nil, let source = head.source, desiredOptions[source] != nil {
            logger.warning("\(message) (a push of \"\(source)\")")
            sealPushes(for: source)
            deliver(.pushedError(source: source, error: error))
        } else {
            let head = pluginLineHeadLength
            logger.warning("\(message), naming no load or source in its first \(head) bytes (\(skippedLines) skipped so far)")
        }
    }

    private func exited(generation: Int, exit: PluginExit) {
        guard generation == self.generation else { return }
        process = nil
        for waiter in exitWaiters.values { waiter.resume(returning: true) }
        exitWaiters.removeAll()
        if case .shuttingDown = phase { return }
        // What it pushed before it ended comes before the news of its end.
        pushMailboxes.removeAll()
        let reason = "the \(kind) plugin \(failureReason ?? exit.description)"
        let now = clock.now()
        crashTimes = crashTimes.filter { now - $0 < Self.crashWindow } + [now]

        for (loadID, source) in pendingLoads.sorted(by: { $0.key < $1.key }) {
            deliver(.loadFinished(source: source, loadID: loadID, outcome: .error(SourceError(message: reason, code: .pluginFailed))))
        }
        let failedSources = Set(pendingLoads.values).union(queuedLoads.map(\.source))
        pendingLoads.removeAll()
        // Sources with no load in flight hear of it too: their watches and streams are gone until reloaded.
        for source in desiredOptions.keys.sorted() where !failedSources.contains(source) {
            deliver(.pushedError(source: source, error: SourceError(message: reason, code: .pluginFailed)))
        }
        // A plugin ended over one source's `configure` restarts without that source, and answers the others
        // then: `check` reports the culprit alone. Any other end fails the validations it leaves.
        if !endedOverConfigure || crashTimes.count >= Self.maximumCrashes {
            for source in Array(validationWaiters.keys) { settleValidation(source, .pluginFailed(reason)) }
        }
        // Whoever waits for the plugin to be ready hears of the failure now, not after every restart.
        for waiter in readinessWaiters { waiter.resume(returning: reason) }
        readinessWaiters.removeAll()

        if crashTimes.count >= Self.maximumCrashes {
            let message = "\(reason); gave up after \(crashTimes.count) failures within \(Self.crashWindow.humanReadable)"
            logger.error("\(message)")
            phase = .gaveUp(message)
            for request in queuedLoads { fail(request, message: message, code: .pluginGaveUp) }
            queuedLoads.removeAll()
            return
        }
        // Loads that waited for this process (to start, or to restart) fail with it, like those it was sent:
        // otherwise a source would stay loading, its failures unseen, through every restart until the give-up.
        // The engine retries them by its own backoff.
        for request in queuedLoads { fail(request, message: reason, code: .pluginFailed) }
        queuedLoads.removeAll()
        let delay = Self.restartDelay(afterCrashes: crashTimes.count)
        logger.error("\(reason); restarting it in \(delay.humanReadable)")
        phase = .waitingToRestart
        after(now + delay) { $0.restart(after: generation) }
    }

    /// 250 ms after the first crash within `crashWindow`, doubling with each one after it, up to 32 s.
    static func restartDelay(afterCrashes crashes: Int) -> Duration {
        .milliseconds(250 * (1 << min(max(crashes, 1) - 1, 7)))
    }

    private func restart(after generation: Int) {
        guard generation == self.generation, case .waitingToRestart = phase else { return }
        EngineMetrics.installed.withLock { $0 }?.pluginRestarts(kind: kind).increment()
        launch()
    }

    private func fail(_ request: LoadRequest, message: String, code: SourceError.Code) {
        deliver(.loadFinished(source: request.source, loadID: request.loadID, outcome: .error(SourceError(message: message, code: code))))
    }
}

/// The task group under which a host runs every task it starts, and the one task that runs it.
///
/// A group's children can only be added from inside it, so the host hands each child over a stream that the
/// group's own task reads. That task is the host's one unstructured task, started with the first child and
/// awaited by `end`: everything below it ends with the host.
private struct Supervision {
    typealias Child = @Sendable () async -> Void
    private let children = AsyncStream.makeStream(of: Child.self)
    private var owner: Task<Void, Never>?

    mutating func start(_ child: @escaping Child) {
        if owner == nil {
            let children = children.stream
            owner = Task {
                await withDiscardingTaskGroup { group in
                    for await child in children { group.addTask(operation: child) }
                    // Ended: the deadlines still armed are let go.
                    group.cancelAll()
                }
            }
        }
        children.continuation.yield(child)
    }

    /// Takes no more children and cancels those that wait; with `waitingForChildren`, returns when all
    /// have ended.
    func end(waitingForChildren: Bool) async {
        children.continuation.finish()
        if waitingForChildren { await owner?.value }
    }
}
