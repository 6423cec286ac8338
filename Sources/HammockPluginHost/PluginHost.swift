import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockLogging
import HammockProtocol
import HammockSystem
import Logging

/// Runs the one plugin process that serves a kind, as its `PluginSupervisor` decides.
///
/// The supervisor holds every rule (handshake, `configure` deadlines, held-back sources, restarts with
/// backoff, the crash window, the give-up); this actor only does what it says: it starts processes, sends
/// and reads lines, kills, arms deadlines on `clock`, and tells the engine what happened (`report`, with a
/// `PluginHostEvent`: the host knows nothing of the engine's other inputs, reloads among them). It also keeps what
/// is about waiting, which a pure value cannot hold: whoever waits for the plugin to be ready, for a
/// validation, or for the process to exit, and each source's push mailbox.
///
/// Every wait on the plugin has a deadline on `clock`: the handshake and each `configure` 5 s, a load its
/// source's timeout (kept by the engine), the exit after `shutdown` 2 s.
///
/// Every task the host starts (each process and each deadline) is a child of one task group, which
/// `shutdown` ends (see `Supervision`): nothing the host started outlives it.
package actor PluginHost {
    /// How a host tells the engine what its plugin did, and which host says it; called on the host's actor,
    /// so it must not block (the engine puts the event in its inbox).
    package typealias Report = @Sendable (_ event: PluginHostEvent, _ from: PluginHostID) -> Void

    package nonisolated let kind: Kind
    /// This host among every host this process makes: the engine heeds only the hosts that serve its
    /// configuration, not one started to check a reload and not yet shut down.
    package nonisolated let id: PluginHostID
    package nonisolated let origin: PluginOrigin
    private let logger: Logger
    private let report: Report
    private let makeTransport: PluginTransportFactory
    private let clock: SupervisionClock
    /// The configuration's secrets, to redact what the host quotes of a plugin's line before it cuts it.
    private let secrets: Secrets
    private var supervision = Supervision()
    private var supervisor: PluginSupervisor

    static let shutdownGrace: Duration = .seconds(2)
    /// How long the guard gets to end a plugin it was told to end, before its group is killed outright.
    static let killGrace: Duration = .seconds(3)

    package typealias ValidationAnswer = PluginSupervisor.ValidationAnswer

    /// The running process, if any; `nil` once it ended.
    private var process: (any PluginTransport)?
    /// Whoever waits for the running process to end (`waitForExit`), by wait.
    private var exitWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]
    private var exitWaits = 0
    private var readinessWaiters: [CheckedContinuation<String?, Never>] = []
    /// What `validate` waits for, by source: its waiters, and an answer that came before anyone waited.
    private var validationWaiters: [SourceID: [CheckedContinuation<ValidationAnswer, Never>]] = [:]
    private var earlyValidationAnswers: [SourceID: ValidationAnswer] = [:]
    /// The answers of the read being handled, not yet handed to the engine (see `deliver`); nil between reads.
    private var answersOfRead: [FinishedLoad]?
    /// Each source's push that the engine has not taken yet (see `PushMailbox`). A mailbox is let go as
    /// soon as anything else about its source goes to the engine (a load's answer, an error, the plugin's
    /// exit), so a push that follows starts a new one and the engine sees them in the order they came.
    private var pushMailboxes: [SourceID: PushMailbox] = [:]

    /// What the plugin's hello declared about templates in this kind's options; `nil` until a hello came.
    package var templateRules: TemplateRules? { supervisor.templateRules }

    /// A host of what `origin` says runs `kind`'s plugin: processes started from its command below hammock's
    /// guard (their stderr passed on line by line with the kind as prefix), or the plugin built into hammock
    /// and served in its own process. `nil` for a built-in origin of a kind hammock does not serve.
    package init?(
        kind: Kind, origin: PluginOrigin, report: @escaping Report, logger: Logger, standardError: StandardError
    ) {
        let makeTransport: PluginTransportFactory
        switch origin {
        case .builtIn:
            guard let serve = BuiltInPlugins.serve(kind) else { return nil }
            makeTransport = { InProcessTransport(serve: serve) }
        case .command(let command):
            makeTransport = {
                ProcessTransport(command: command, reapsOrphans: true) { standardError.write(prefix: kind.rawValue, line: $0) }
            }
        }
        self.init(
            kind: kind, origin: origin, report: report, logger: logger, clock: .system, secrets: standardError.secrets,
            makeTransport: makeTransport)
    }

    /// - Parameter makeTransport: makes the transport of each process it starts (tests pass an in-memory one).
    package init(
        kind: Kind, origin: PluginOrigin, report: @escaping Report, logger: Logger, clock: SupervisionClock,
        secrets: Secrets = Secrets(), makeTransport: @escaping PluginTransportFactory
    ) {
        self.kind = kind
        self.id = PluginHostID(kind: kind)
        self.secrets = secrets
        self.origin = origin
        self.report = report
        self.logger = logger
        self.clock = clock
        self.makeTransport = makeTransport
        supervisor = PluginSupervisor(kind: kind, now: clock.now())
    }

    // MARK: Requests from the engine

    package func start(_ request: LoadRequest) {
        perform(supervisor.start(request, now: clock.now()))
    }

    package func start(_ requests: [LoadRequest]) {
        for request in requests { start(request) }
    }

    package func cancel(source: SourceID, loadID: Int) {
        perform(supervisor.cancel(loadID: loadID))
    }

    package func remove(source: SourceID) {
        perform(supervisor.remove(source: source))
    }

    package func shutdown() async {
        perform(supervisor.shutdown())
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
            after(deadline) { $0.exitWaiters.removeValue(forKey: wait)?.resume(returning: false) }
        }
    }

    // MARK: Validation

    /// Configures each source with its options as written and reports what the plugin thinks of them.
    ///
    /// Every `configure` goes out at once, in order, and each answer is waited for at most
    /// `PluginSupervisor.configureTimeout` (counted from the plugin's last answer to one while it works through them).
    package func validate(_ sources: [(id: SourceID, options: JSONValue)]) async -> [SourceID: ValidationAnswer] {
        for source in sources { supervisor.want(source.id, options: source.options) }
        if let failure = await ready() {
            return Dictionary(uniqueKeysWithValues: sources.map { ($0.id, .pluginFailed(failure)) })
        }
        for source in sources {
            // Registered before the `configure` goes out, so that an answer coming first is kept.
            earlyValidationAnswers[source.id] = nil
            if validationWaiters[source.id] == nil { validationWaiters[source.id] = [] }
            perform(supervisor.validate(source.id, now: clock.now()))
        }
        var answers: [SourceID: ValidationAnswer] = [:]
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
    /// changed on reload, with no changed source to check; under `hammock serve`, a kind whose first source
    /// just became watched) and waiting for a hello on its way: its sources are about to load on it. `nil`
    /// when no hello came: the plugin failed to start, or is waiting to restart.
    package func templateRulesStartingIfNeeded() async -> TemplateRules? {
        switch supervisor.phase {
        case .stopped, .starting: _ = await ready()
        case .ready, .waitingToRestart, .gaveUp, .shuttingDown: break
        }
        return templateRules
    }

    /// Hands `answer` to whoever validates `source`, or keeps it for the `validate` about to wait for it.
    private func settleValidation(_ source: SourceID, _ answer: ValidationAnswer) {
        guard let waiters = validationWaiters.removeValue(forKey: source) else {
            if case .invalid(let problems) = answer { report(.optionsRefused(source: source, problems: problems), id) }
            return
        }
        if waiters.isEmpty { earlyValidationAnswers[source] = answer }
        for waiter in waiters { waiter.resume(returning: answer) }
    }

    /// Starts the plugin if needed and waits for its handshake; returns why it failed, if it did.
    private func ready() async -> String? {
        switch supervisor.readiness(now: clock.now()) {
        case .ready: return nil
        case .failed(let reason): return reason
        case .waiting(let actions): perform(actions)
        }
        return await withCheckedContinuation { readinessWaiters.append($0) }
    }

    // MARK: Carrying out the supervisor's actions

    private func perform(_ actions: [PluginSupervisor.Action]) {
        for action in actions {
            switch action {
            case .startProcess(let generation):
                let process = makeTransport()
                self.process = process
                supervision.start { [self] in
                    let exit = await process.run { await self.received($0, generation: generation) }
                    await exited(generation: generation, exit: exit)
                }
            case .send(let message):
                process?.send(message)
            case .sendLine(let line):
                process?.send(line: line)
            case .kill:
                process?.kill()
            case .report(let report):
                deliver(report)
            case .sealPushes(let source):
                pushMailboxes[source] = nil
            case .dropPushes(let source):
                _ = pushMailboxes.removeValue(forKey: source)?.take()
            case .sealEveryPush:
                pushMailboxes.removeAll()
            case .settleValidation(let source, let answer):
                settleValidation(source, answer)
            case .settleEveryValidation(let answer):
                for source in Array(validationWaiters.keys) { settleValidation(source, answer) }
            case .settleReadiness(let failure):
                for waiter in readinessWaiters { waiter.resume(returning: failure) }
                readinessWaiters.removeAll()
            case .setTimer(let timer, let deadline):
                after(deadline) { host in host.perform(host.supervisor.timerFired(timer, now: host.clock.now())) }
            case .log(let level, let message, let metadata):
                logger.log(level: level, "\(message)", metadata: metadata.isEmpty ? nil : metadata.mapValues { .string($0) })
            case .countRestart:
                PluginRestartObserver.current.withLock { $0 }?(kind)
            }
        }
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

    private func received(_ pieces: [LineSplitter.Piece], generation: Int) {
        answersOfRead = []
        for piece in pieces where generation == supervisor.generation {
            let line: PluginSupervisor.Line
            switch piece {
            case .tooLong(let length, let head):
                line = .tooLong(length: length, head: LineHead(head))
            case .line(let bytes):
                do throws(ProtocolError) {
                    line = .message(try PluginMessage(line: bytes))
                } catch {
                    // Redacted here, before the cut: the engine redacts the message again, but a secret cut in
                    // two by this excerpt would no longer be found.
                    line = .notProtocol(error: error.message, excerpt: secrets.redactor.excerpt(bytes, limit: 120))
                }
            }
            perform(supervisor.received(line, generation: generation, now: clock.now()))
        }
        deliverAnswersOfRead()
        answersOfRead = nil
    }

    private func exited(generation: Int, exit: PluginExit) {
        guard generation == supervisor.generation else { return }
        process = nil
        for waiter in exitWaiters.values { waiter.resume(returning: true) }
        exitWaiters.removeAll()
        perform(supervisor.exited(generation: generation, exit: exit, now: clock.now()))
    }

    // MARK: To the engine

    /// Hands `report` to the engine. While the lines of one read are handled, the answers among them wait
    /// in `answersOfRead` to go as one input (one wake-up and one turn of the engine for all of them);
    /// anything else goes after the answers before it, so the engine sees everything in the plugin's order.
    private func deliver(_ report: PluginSupervisor.Report) {
        let event: PluginHostEvent
        switch report {
        case .loadFinished(let source, let loadID, let outcome):
            if answersOfRead != nil {
                answersOfRead?.append(FinishedLoad(source: source, loadID: loadID, outcome: outcome))
                return
            }
            event = .loadFinished(source: source, loadID: loadID, outcome: outcome)
        case .loadQueued(let source, let loadID): event = .loadQueued(source: source, loadID: loadID)
        case .loadStarted(let source, let loadID): event = .loadStarted(source: source, loadID: loadID)
        case .pushedError(let source, let error): event = .pushedError(source: source, error: error)
        case .templateRulesLearned(let kind): event = .templateRulesLearned(kind: kind)
        case .pushed(let source, let content, let meta):
            // While its last push still waits for the engine, a newer one takes its place.
            let push = PushMailbox.Push(content, meta: meta)
            if let waiting = pushMailboxes[source], waiting.replace(with: push) { return }
            let mailbox = PushMailbox(push)
            pushMailboxes[source] = mailbox
            event = .pushed(source: source, mailbox: mailbox)
        }
        deliverAnswersOfRead()
        self.report(event, id)
    }

    private func deliverAnswersOfRead() {
        guard let answers = answersOfRead, let first = answers.first else { return }
        answersOfRead = []
        if answers.count == 1 {
            report(.loadFinished(source: first.source, loadID: first.loadID, outcome: first.outcome), id)
        } else {
            report(.loadsFinished(answers), id)
        }
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
