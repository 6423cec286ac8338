/// One thread of its own that runs short blocking work (a cache file's write, a control line's write to a
/// pipe) in the order it is handed over, instead of a new thread for each call.
///
/// A thread rather than the Swift concurrency pool: a blocked call there takes one of its few threads (two
/// on a small machine) from every task. One thread rather than one per call: starting a thread costs more
/// than a small write, and a burst of calls would start as many threads.
///
/// The thread starts with the first job and ends once the executor is gone and its last job has run. The
/// queue is as long as the jobs handed over and not yet run: `run` waits for its job, so each caller holds
/// at most one; `submit` (fire and forget) is for callers that bound themselves (the client's control
/// writer, whose caller waits for each acknowledgement).
///
/// Long-lived blocking readers (stdin, a pipe from a plugin, inotify) keep a thread each (`OwnThread`): they
/// block for the life of what they read, and would hold this one for ever.
public final class BlockingExecutor: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var isStarted = false
        var isClosed = false
    }

    private let state = LockedCondition(State())
    private let name: String

    /// `name` names the thread (the kernel keeps 15 bytes of it).
    public init(name: String) {
        self.name = name
    }

    deinit {
        state.withLock { $0.isClosed = true }
        state.signal()
    }

    /// An executor whose thread is made now rather than at the first job, for an owner that reports a
    /// thread it cannot make (a plugin's start) instead of stopping the process, as `submit` would.
    public static func started(name: String) throws(SystemCallError) -> BlockingExecutor {
        let executor = BlockingExecutor(name: name)
        executor.state.withLock { $0.isStarted = true }
        try OwnThread.tryStart(named: name) { [state = executor.state] in Self.work(state) }
        return executor
    }

    /// Runs `body` after every job handed over before, and returns what it returns.
    public func run<Value: Sendable>(_ body: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: body()) }
        }
    }

    /// Runs `body` after every job handed over before; returns at once.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        let starts = state.withLock { state in
            state.jobs.append(body)
            defer { state.isStarted = true }
            return !state.isStarted
        }
        state.signal()
        if starts { OwnThread.start(named: name) { [state] in Self.work(state) } }
    }

    private static func work(_ state: LockedCondition<State>) {
        while true {
            let (jobs, isClosed) = state.withLock(when: { !$0.jobs.isEmpty || $0.isClosed }) { state in
                defer { state.jobs.removeAll() }
                return (state.jobs, state.isClosed)
            }
            for job in jobs { job() }
            if isClosed && jobs.isEmpty { return }
        }
    }
}
