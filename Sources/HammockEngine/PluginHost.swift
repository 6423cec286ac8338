import Foundation
import HammockCore
import HammockJSON
import HammockProtocol
import Logging

/// Runs and supervises the one plugin process that serves a kind.
///
/// The host starts the plugin when a source first needs it, shakes hands, configures every source of the
/// kind, forwards loads and answers, and passes the plugin's stderr on line by line with the kind as prefix.
/// When the plugin dies, hangs its handshake or writes a line that is not protocol, its loads fail (the
/// sources keep their content), it is restarted with backoff and its sources are configured again; after
/// `maximumCrashes` crashes within `crashWindow` it is given up and its sources say so.
actor PluginHost: SourceLoader {
    let kind: String
    let command: [String]
    private let logger: Logger
    private let inbox: EngineInbox
    private let standardError: StandardError

    static let handshakeTimeout: Duration = .seconds(5)
    static let shutdownGrace: Duration = .seconds(2)
    static let maximumCrashes = 5
    static let crashWindow: Duration = .seconds(60)
    /// A plugin line longer than this is a protocol violation, not something to buffer.
    static let maximumLineLength = 16 << 20

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
    private var process: PluginProcessHandle?
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
    private var crashTimes: [ContinuousClock.Instant] = []
    private var readinessWaiters: [CheckedContinuation<String?, Never>] = []
    private var validationWaiters: [String: CheckedContinuation<ValidationAnswer, Never>] = [:]

    /// Each source's push that the engine has not taken yet (see `PushMailbox`). A mailbox is let go as
    /// soon as anything else about its source goes to the engine (a load's answer, an error, the plugin's
    /// exit), so a push that follows starts a new one and the engine sees them in the order they came.
    private var pushMailboxes: [String: PushMailbox] = [:]

    enum ValidationAnswer: Sendable {
        case valid
        case invalid([OptionProblem])
        case pluginFailed(String)
    }

    init(kind: String, command: [String], inbox: EngineInbox, logger: Logger, standardError: StandardError) {
        self.kind = kind
        self.standardError = standardError
        self.command = command
        self.inbox = inbox
        self.logger = logger
    }

    // MARK: SourceLoader

    func start(_ request: LoadRequest) {
        desiredOptions[request.source] = request.options
        switch phase {
        case .gaveUp(let reason):
            fail(request, message: reason, code: "pluginGaveUp")
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

    func cancel(source: String, loadID: Int) {
        queuedLoads.removeAll { $0.loadID == loadID }
        if pendingLoads.removeValue(forKey: loadID) != nil { process?.send(.cancel(id: loadID)) }
    }

    func remove(source: String) {
        desiredOptions[source] = nil
        invalidProblems[source] = nil
        queuedLoads.removeAll { $0.source == source }
        // A push still waiting for the engine is of a source that is gone: empty its mailbox.
        _ = pushMailboxes.removeValue(forKey: source)?.take()
        if sentOptions.removeValue(forKey: source) != nil { process?.send(.remove(source: source)) }
    }

    func shutdown() async {
        phase = .shuttingDown
        for waiter in readinessWaiters { waiter.resume(returning: "hammock is shutting down") }
        readinessWaiters.removeAll()
        guard let process else { return }
        process.send(.shutdown)
        process.closeInput()
        if await process.waitForExit(timeout: Self.shutdownGrace) { return }
        logger.warning("the \(kind) plugin did not exit within \(Self.shutdownGrace.humanReadable) of shutdown; killing it")
        process.kill()
        _ = await process.waitForExit(timeout: .seconds(5))
    }

    // MARK: Validation

    /// Configures each source with its options as written and reports what the plugin thinks of them.
    func validate(_ sources: [(id: String, options: JSONValue)]) async -> [String: ValidationAnswer] {
        for source in sources { desiredOptions[source.id] = source.options }
        if let failure = await ready() {
            return Dictionary(uniqueKeysWithValues: sources.map { ($0.id, .pluginFailed(failure)) })
        }
        var answers: [String: ValidationAnswer] = [:]
        for source in sources {
            answers[source.id] = await withCheckedContinuation { continuation in
                validationWaiters[source.id] = continuation
                configureIfNeeded(source.id, force: true)
            }
        }
        return answers
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
        process = PluginProcessHandle.launch(
            command: command, kind: kind, host: self, generation: generation, standardError: standardError)
        process?.send(.hello(protocol: pluginProtocolVersion))
        Task {
            try? await Task.sleep(for: Self.handshakeTimeout)
            self.handshakeTimedOut(generation)
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

    func received(_ piece: LineSplitter.Piece, generation: Int) {
        guard generation == self.generation else { return }
        let message: PluginMessage
        switch piece {
        case .tooLong(let length):
            fail(generation, "wrote a line of \(length) bytes, over the limit of \(Self.maximumLineLength)")
            return
        case .line(let bytes):
            do throws(ProtocolError) {
                message = try PluginMessage(line: bytes)
            } catch {
                let excerpt = String(decoding: bytes.prefix(120), as: UTF8.self)
                fail(generation, "wrote a line that is not protocol (\(error.message)): \(excerpt)")
                return
            }
        }
        if case .starting = phase {
            guard case .hello(let version, let kinds, let pluginVersion) = message else {
                fail(generation, "sent \"\(message.json["type"]?.stringValue ?? "?")\" before answering hello")
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
            invalidProblems[source] = nil
            validationWaiters.removeValue(forKey: source)?.resume(returning: .valid)
        case .invalid(let source, let problems):
            invalidProblems[source] = problems
            validationWaiters.removeValue(forKey: source)?.resume(returning: .invalid(problems))
        case .newData(let id?, _, let content, let etag, let lastModified):
            answer(id, .newData(content, etag: etag, lastModified: lastModified))
        case .newData(nil, let source?, let content, _, _):
            guard desiredOptions[source] != nil else { return }
            push(content, for: source)
        case .notModified(let id):
            answer(id, .notModified)
        case .error(let id?, _, var error):
            if let source = pendingLoads[id], let problems = invalidProblems[source] {
                error = SourceError(
                    message: "invalid options: " + problems.map { "\($0.pointer): \($0.message)" }.joined(separator: "; "),
                    code: "invalidOptions")
            }
            answer(id, .error(error))
        case .error(nil, let source?, let error):
            guard desiredOptions[source] != nil else { return }
            sealPushes(for: source)
            inbox.yield(.pushedError(source: source, error: error))
        case .cancelled(let id):
            pendingLoads[id] = nil
        case .newData(nil, nil, _, _, _), .error(nil, nil, _):
            fail(generation, "sent an answer with neither id nor source")
        }
    }

    private func answer(_ loadID: Int, _ outcome: LoadOutcome) {
        // An answer to a load the engine cancelled or timed out is no longer wanted.
        guard let source = pendingLoads.removeValue(forKey: loadID) else { return }
        sealPushes(for: source)
        inbox.yield(.loadFinished(source: source, loadID: loadID, outcome: outcome))
    }

    /// Hands a push to the engine, or, while its last one still waits there, puts it in that one's place.
    private func push(_ content: JSONValue, for source: String) {
        if let waiting = pushMailboxes[source], waiting.replace(with: content) { return }
        let mailbox = PushMailbox(content)
        pushMailboxes[source] = mailbox
        inbox.yield(.pushed(source: source, mailbox: mailbox))
    }

    /// Whatever comes next about the source goes after the pushes already waiting, not into their mailbox.
    private func sealPushes(for source: String) {
        pushMailboxes[source] = nil
    }

    private func send(_ request: LoadRequest) {
        configureIfNeeded(request.source)
        pendingLoads[request.loadID] = request.source
        process?.send(
            .load(
                source: request.source, id: request.loadID, etag: request.etag, lastModified: request.lastModified,
                timeout: Double(request.timeout.milliseconds) / 1000))
    }

    /// Sends `configure` when the process has not seen these options yet (first use, a restart, or a
    /// template whose input changed).
    private func configureIfNeeded(_ source: String, force: Bool = false) {
        guard case .ready = phase, let options = desiredOptions[source] else { return }
        guard force || sentOptions[source] != options else { return }
        sentOptions[source] = options
        process?.send(.configure(source: source, options: options))
    }

    func exited(generation: Int, status: String) {
        guard generation == self.generation else { return }
        process = nil
        // Commands it started and could not end (it was killed) are now hammock's children: end them.
        OrphanReaper.sweep()
        if case .shuttingDown = phase { return }
        // What it pushed before it ended comes before the news of its end.
        pushMailboxes.removeAll()
        let reason = "the \(kind) plugin \(failureReason ?? status)"
        let now = ContinuousClock.now
        crashTimes = crashTimes.filter { now - $0 < Self.crashWindow } + [now]

        for (loadID, source) in pendingLoads.sorted(by: { $0.key < $1.key }) {
            inbox.yield(.loadFinished(source: source, loadID: loadID, outcome: .error(SourceError(message: reason, code: "pluginFailed"))))
        }
        let failedSources = Set(pendingLoads.values).union(queuedLoads.map(\.source))
        pendingLoads.removeAll()
        // Sources with no load in flight hear of it too: their watches and streams are gone until reloaded.
        for source in desiredOptions.keys.sorted() where !failedSources.contains(source) {
            inbox.yield(.pushedError(source: source, error: SourceError(message: reason, code: "pluginFailed")))
        }
        for (_, waiter) in validationWaiters { waiter.resume(returning: .pluginFailed(reason)) }
        validationWaiters.removeAll()
        // Whoever waits for the plugin to be ready hears of the failure now, not after every restart.
        for waiter in readinessWaiters { waiter.resume(returning: reason) }
        readinessWaiters.removeAll()

        if crashTimes.count >= Self.maximumCrashes {
            let message = "\(reason); gave up after \(crashTimes.count) failures within \(Self.crashWindow.humanReadable)"
            logger.error("\(message)")
            phase = .gaveUp(message)
            for request in queuedLoads { fail(request, message: message, code: "pluginGaveUp") }
            queuedLoads.removeAll()
            return
        }
        // Loads that waited for this process (to start, or to restart) fail with it, like those it was sent:
        // otherwise a source would stay loading, its failures unseen, through every restart until the give-up.
        // The engine retries them by its own backoff.
        for request in queuedLoads { fail(request, message: reason, code: "pluginFailed") }
        queuedLoads.removeAll()
        let delay = Duration.milliseconds(250 * (1 << min(crashTimes.count - 1, 7)))
        logger.error("\(reason); restarting it in \(delay.humanReadable)")
        phase = .waitingToRestart
        Task {
            try? await Task.sleep(for: delay)
            self.restart(after: generation)
        }
    }

    private func restart(after generation: Int) {
        guard generation == self.generation, case .waitingToRestart = phase else { return }
        launch()
    }

    private func fail(_ request: LoadRequest, message: String, code: String) {
        inbox.yield(.loadFinished(source: request.source, loadID: request.loadID, outcome: .error(SourceError(message: message, code: code))))
    }
}

/// One running plugin process: its stdin as a queue of lines, its stdout and stderr read by tasks.
final class PluginProcessHandle: Sendable {
    private let outgoing: AsyncStream<[UInt8]>.Continuation
    /// Filled in by the launching task once the process exists.
    private let processID: ProcessIDBox
    /// Set once the process has exited and its end has been reported.
    private let finished: FinishedFlag
    private let task: Task<Void, Never>

    private init(
        outgoing: AsyncStream<[UInt8]>.Continuation, task: Task<Void, Never>, processID: ProcessIDBox, finished: FinishedFlag
    ) {
        self.outgoing = outgoing
        self.task = task
        self.processID = processID
        self.finished = finished
    }

    static func launch(
        command: [String], kind: String, host: PluginHost, generation: Int, standardError: StandardError
    ) -> PluginProcessHandle {
        let (lines, outgoing) = AsyncStream.makeStream(of: [UInt8].self)
        let pid = ProcessIDBox()
        LivePlugins.shared.launching(command)
        let finished = FinishedFlag()
        let task = Task {
            let status = await runPluginProcess(
                command, input: lines, inputContinuation: outgoing, maximumLineLength: PluginHost.maximumLineLength,
                started: { started in
                    pid.value = started
                    LivePlugins.shared.started(started)
                },
                standardErrorLine: { standardError.write(prefix: kind, line: $0) },
                receive: { await host.received($0, generation: generation) })
            if let ended = pid.value { LivePlugins.shared.ended(ended) }
            await host.exited(generation: generation, status: status)
            finished.value = true
        }
        return PluginProcessHandle(outgoing: outgoing, task: task, processID: pid, finished: finished)
    }

    func send(_ message: EngineMessage) { outgoing.yield(message.line) }

    func closeInput() { outgoing.finish() }

    /// SIGKILL to the plugin's process group.
    func kill() {
        guard let pid = processID.value, pid > 0 else { return }
        Glibc.kill(-pid, SIGKILL)
        Glibc.kill(pid, SIGKILL)
    }

    /// Whether it exited within `timeout`.
    ///
    /// Polls a flag rather than racing `task.value` against a timer in a task group: `Task.value` ignores
    /// cancellation, so the group would wait for the process however long it runs, and a plugin that ignores
    /// shutdown would hold hammock forever instead of being killed after the grace period.
    func waitForExit(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !finished.value {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }
}

/// Whether the plugin's task has ended, written once by that task and read by whoever waits for it.
private final class FinishedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = false
    var value: Bool {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// The plugin's pid, written once by the task that starts it and read by whoever must kill it.
private final class ProcessIDBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: pid_t?
    var value: pid_t? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
