import HammockCore
import HammockJSON
import HammockPluginKit
import HammockProtocol
import HammockSystem

/// `mode: stream`: one long-running command whose every stdout line is new content.
///
/// The first load starts the command and is answered by its first line; later lines are pushes. A load
/// while it runs is answered by what the newest line said: its content, or its error if it did not parse,
/// so a load never clears an error the command has not taken back (only a new good line does). When the
/// command ends, the failure is pushed and the command starts again after a backoff (1s doubling to 60s,
/// back to 1s after a run of 30s or more); a load during that backoff starts it at once.
actor StreamSource: PluginSource {
    let options: ShellOptions
    private let plan: CommandPlan
    let push: PushChannel
    /// The plugin's, shared by all its sources.
    private let watcher: CommandWatcher

    private struct Waiter {
        var continuation: CheckedContinuation<PluginLoadResult, Never>
        var timer: Task<Void, Never>?
    }

    private var loop: Task<Void, Never>?
    private var current: ProcessGroupHandle?
    /// What the newest line of the current run said (its content, or why it did not parse); nil while no
    /// line has arrived.
    private var newestLine: PluginLoadResult?
    private var running = false
    private var waiting: [Int: Waiter] = [:]
    private var backoff: Task<Void, Never>?
    private var restartNow = false
    private var stopped = false

    static let initialDelay: Duration = .seconds(1)
    static let maximumDelay: Duration = .seconds(60)
    /// A run this long counts as healthy: the next restart waits the initial delay again.
    static let healthyRun: Duration = .seconds(30)

    init(options: ShellOptions, push: PushChannel, watcher: CommandWatcher) {
        self.options = options
        self.push = push
        self.watcher = watcher
        plan = CommandPlan(options)
    }

    func load(_ request: PluginLoadRequest) async -> PluginLoadResult {
        request.started()  // streams take no command slot: nothing holds the load back
        if stopped { return .error(SourceError(message: "the source was stopped", code: .stopped)) }
        if running, let newestLine { return newestLine }
        if loop == nil {
            // Unstructured: it outlives the load that starts it (the command runs on). `stop()` ends it and awaits it.
            loop = Task { await self.runLoop() }
        } else if !running {
            // Waiting out a backoff: an explicit load means "try now".
            restartNow = true
            backoff?.cancel()
        }
        let id = request.id
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                var timer: Task<Void, Never>?
                if let timeout = request.timeout {
                    // Unstructured: a load's deadline, cancelled by `resolve` when the load is answered first.
                    timer = Task {
                        guard (try? await Task.sleep(for: timeout)) != nil else { return }
                        self.resolve(
                            id,
                            .error(SourceError(message: "no output within \(timeout.humanReadable)", code: .timeout)))
                    }
                }
                waiting[id] = Waiter(continuation: continuation, timer: timer)
            }
        } onCancel: {
            // A cancellation handler is synchronous: one actor call, then the task ends.
            Task { await self.resolve(id, .error(SourceError(message: "cancelled", code: .cancelled))) }
        }
    }

    func stop() async {
        stopped = true
        backoff?.cancel()
        await current?.end(.stopped)
        await loop?.value
        answerWaiting(.error(SourceError(message: "the source was stopped", code: .stopped)))
    }

    // MARK: - The command's life

    private nonisolated func runLoop() async {
        var delay = Self.initialDelay
        while true {
            let handle = ProcessGroupHandle()
            guard await begin(handle) else { return }
            let started = ContinuousClock.now
            var splitter = LineSplitter(maximumLineLength: options.maxBytes, keepsEmptyLines: true)
            let result = await runCommand(plan, handle: handle, watcher: watcher) { bytes in
                // The lines before a too-long one are passed on; the command is ended at once, without
                // waiting for the end of a line it may never finish.
                var lines: [[UInt8]] = []
                var tooLong = false
                bytes.withUnsafeBytes { buffer in
                    splitter.feed(buffer) { piece in
                        switch piece {
                        case .line(let line) where !tooLong: lines.append(line)
                        case .line: break
                        case .tooLong: tooLong = true
                        }
                    }
                }
                if !lines.isEmpty { await self.received(lines) }
                guard !tooLong, !splitter.isDroppingLine else {
                    handle.endSoon(.lineTooLong)
                    return false
                }
                return true
            }
            if result.endReason != .lineTooLong {
                var last: [[UInt8]] = []
                splitter.finish { if case .line(let line) = $0 { last.append(line) } }
                if !last.isEmpty { await received(last) }
            }
            guard await ended(failure(of: result)) else { return }
            if ContinuousClock.now - started >= Self.healthyRun { delay = Self.initialDelay }
            await waitBeforeRestart(delay)
            delay = min(delay * 2, Self.maximumDelay)
        }
    }

    private nonisolated func failure(of result: CommandResult) -> SourceError {
        if result.endReason == .lineTooLong {
            return SourceError(
                message: "a line exceeded maxBytes (\(options.maxBytes) bytes); the command was ended",
                code: .outputTooLarge)
        }
        if let failure = result.failure() { return failure }
        let tail = result.stderrTail.isEmpty ? "" : ": \(result.stderrTail)"
        return SourceError(message: "exited with status 0\(tail)", exitStatus: 0)
    }

    private func begin(_ handle: ProcessGroupHandle) -> Bool {
        guard !stopped else { return false }
        current = handle
        running = true
        newestLine = nil
        restartNow = false
        return true
    }

    /// Takes the lines of one read. Every line is parsed, so a bad one is reported, but of good lines that
    /// arrived together only the last is passed on: the ones before it were replaced the moment they
    /// arrived, and pushing each would only make the engine show them for no time at all.
    private func received(_ lines: [[UInt8]]) async {
        var newest: JSONValue?
        for line in lines {
            guard !stopped, let parsed = options.parse.parse(line: line[...]) else { continue }
            switch parsed {
            case .success(let content):
                newest = content
            case .failure(let error):
                if let content = newest { await deliver(.newData(content)) }
                newest = nil
                await deliver(.error(error))
            }
        }
        if let content = newest, !stopped { await deliver(.newData(content)) }
    }

    /// Passes on what one line said.
    private func deliver(_ result: PluginLoadResult) async {
        newestLine = result
        guard waiting.isEmpty else {
            // The kit holds later pushes until this answer is out, so the order holds.
            answerWaiting(result)
            return
        }
        switch result {
        case .newData(let content, _, _): await push.newData(content)
        case .error(let error): await push.error(error)
        case .notModified, .fresh, .described, .notStored: break  // a stream has no validators to compare, and no server's word on freshness
        }
    }

    /// Reports the end of a run; false when the source is stopped and must not restart.
    private func ended(_ failure: SourceError) async -> Bool {
        running = false
        current = nil
        guard !stopped else { return false }
        if waiting.isEmpty { await push.error(failure) } else { answerWaiting(.error(failure)) }
        return !stopped
    }

    private func waitBeforeRestart(_ delay: Duration) async {
        guard !restartNow, !stopped else { return }
        // Unstructured so that a load or `stop()` can cut the backoff short (`backoff?.cancel()`); awaited here.
        let sleeper = Task { _ = try? await Task.sleep(for: delay) }
        backoff = sleeper
        await sleeper.value
        backoff = nil
    }

    // MARK: - Loads waiting for a line

    private func resolve(_ id: Int, _ result: PluginLoadResult) {
        guard let waiter = waiting.removeValue(forKey: id) else { return }
        waiter.timer?.cancel()
        waiter.continuation.resume(returning: result)
    }

    private func answerWaiting(_ result: PluginLoadResult) {
        for id in waiting.keys { resolve(id, result) }
    }
}
