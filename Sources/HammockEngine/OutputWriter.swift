import FoundationEssentials
import Glibc
import HammockCore
import HammockLogging
import HammockProtocol
import HammockRendering
import HammockSystem

/// Writes output lines to stdout (any `OutputTransport`) from a thread of its own.
///
/// A consumer that stops reading must never stall the engine nor make it grow without bound, so lines wait
/// here in a queue where a newer state of a source or view *replaces* the older one still waiting: memory is
/// bounded by the number of ids, not by how long the consumer sleeps. Lines are numbered (`seq`) as they
/// leave, so numbers are strictly increasing in the order the consumer reads them.
///
/// Writing blocks when the pipe is full, which is why it runs on a dedicated thread rather than in the
/// Swift concurrency pool; a condition variable is the natural hand-off between the two: the queue and
/// everything the threads share is a `State` in a `LockedCondition`, reached only with its lock held.
///
/// A line is never cut in half, even when hammock exits while the consumer is not reading: lines go out in
/// writes that are atomic on a pipe (whole lines, at most `PIPE_BUF` bytes), and a longer line is written
/// only once the pipe has room to take it whole beside what is unread (`OutputTransport.waitForRoom`). So
/// whenever the writer waits for the consumer, what is in the pipe ends at a line's end, and exiting then
/// loses whole lines only.
public final class OutputWriter: Sendable {
    private let transport: any OutputTransport
    private let secrets: Secrets
    /// `--format waybar|polybar|text`: what the bar shows instead of the protocol's lines. The writing
    /// thread takes it and keeps it (a bar remembers what it last showed).
    private let bar: BarEncoder?

    /// What the engine's tasks, the writing thread and `finish`'s wait share.
    private struct State {
        var queue = OutputQueue()
        var isClosing = false
        var isDone = false
        /// After this, no new write is begun (`finish`'s deadline); `nil`: none.
        var stopStartingAt: MonotonicInstant?
        /// `interrupt()`: stop at once.
        var isInterrupted = false
        /// Lines that were queued and will never be written (the consumer left, or the deadline passed).
        var unwritten = 0
        /// The writer is inside a write that may already have put part of a line in the pipe.
        var isMidLine = false
        /// The writer has taken lines out of the queue and not finished writing them.
        var holdsBatch = false
        var onClosed: (@Sendable () -> Void)?
        /// The writer is done, or `finish` gave up on it: `run()` returns.
        var isEnded = false
        var endWaiter: CheckedContinuation<Void, Never>?
        /// i3bar hid the bar (its stop_signal): lines wait, coalescing as ever, until `resume`.
        var isPaused = false
        /// A reload's view definitions, for `bar` to take before its next batch.
        var reloadedViews: [ViewDefinition]?
        /// The writer sleeps until lines come: the next `send` wakes it (and clears this). While it writes,
        /// nobody wakes it: the lines that come meanwhile go in its next batch, for one wake-up.
        var wantsWake = true

        /// Whether a `send` that queued something must wake the writer; clears the wish.
        mutating func takeWakeWish(queued: Bool) -> Bool {
            guard queued && wantsWake else { return false }
            wantsWake = false
            return true
        }

        /// Puts `line` in the queue; false when it was dropped.
        mutating func enqueue(_ line: OutputLine, metrics: (any EngineObserver)?) -> Bool {
            !isClosing && queue.enqueue(line, metrics: metrics)
        }
    }

    private let state: LockedCondition<State>
    /// `--metrics`: lines written and lines coalesced; nil (one branch) without it.
    private let metrics: (any EngineObserver)?
    /// Where a bar's render problems go (stderr, as warnings), each once per change of its wording.
    private let reportProblem: @Sendable (String) -> Void

    /// Error lines without an `id` beyond this many waiting are dropped (`OutputQueue`).
    static let maximumWaitingUncoalescedLines = OutputQueue.maximumWaitingUncoalescedLines

    /// How long past `finish`'s deadline a write that has begun a line may go on before the wait ends anyway.
    static let midLineGrace: Duration = .seconds(1)

    /// - Parameter bar: encodes for a status bar instead of writing JSON lines; `nil` for the protocol.
    /// - Parameter reportProblem: told each render problem of `bar` once per change of its wording.
    public convenience init(
        descriptor: Int32 = STDOUT_FILENO, secrets: Secrets, bar: BarEncoder? = nil, metrics: (any EngineObserver)? = nil,
        reportProblem: @escaping @Sendable (String) -> Void = { _ in }, onClosed: @escaping @Sendable () -> Void
    ) {
        self.init(
            transport: DescriptorOutput(descriptor: descriptor), secrets: secrets, bar: bar, metrics: metrics,
            reportProblem: reportProblem, onClosed: onClosed)
    }

    init(
        transport: any OutputTransport, secrets: Secrets, bar: BarEncoder? = nil, metrics: (any EngineObserver)? = nil,
        reportProblem: @escaping @Sendable (String) -> Void = { _ in }, onClosed: @escaping @Sendable () -> Void
    ) {
        self.transport = transport
        self.secrets = secrets
        self.bar = bar
        self.metrics = metrics
        self.reportProblem = reportProblem
        state = LockedCondition(State(onClosed: onClosed))
    }

    /// A reload is in force: the bar renders the selected views with their new templates from now on.
    public func viewsReloaded(_ views: [ViewDefinition]) {
        state.withLock { $0.reloadedViews = views }
    }

    /// Writes lines as they come until `finish` is done with them or the consumer is gone.
    ///
    /// The writing thread is not awaited: a consumer that never reads can keep it in `write` for good, and
    /// only the exit ends that. Once `finish` has returned (or the consumer left), this returns.
    public func run() async {
        OwnThread.start(named: "hammock.stdout") { [self] in
            writeLines()
            end()
        }
        async let watching: Void = OwnThread.run(named: "hammock.stdout.watch") { [self] in
            // Notices a consumer that closed its end while nothing is being written: a failed write notices
            // it too, but an engine with nothing new to say would otherwise run on for nobody.
            if transport.waitForClosedConsumer() { consumerIsGone(unwritten: 0) }
        }
        await withCheckedContinuation { continuation in
            let hasEnded = state.withLock { state in
                if !state.isEnded { state.endWaiter = continuation }
                return state.isEnded
            }
            if hasEnded { continuation.resume() }
        }
        transport.stopWatching()
        await watching
    }

    private func end() {
        let waiter = state.withLock { state in
            state.isEnded = true
            defer { state.endWaiter = nil }
            return state.endWaiter
        }
        waiter?.resume()
    }
    /// Writes nothing from now until `resume` (a hidden i3bar); a stop writes what waits all the same.
    public func pause() {
        state.withLock { $0.isPaused = true }
    }

    /// Writes what waited while paused, at once.
    public func resume() {
        state.withLock { $0.isPaused = false }
        state.broadcast()
    }

    public func send(_ line: OutputLine) {
        if state.withLock({ $0.takeWakeWish(queued: $0.enqueue(line, metrics: metrics)) }) { state.broadcast() }
    }

    /// Queues `lines` in order with one wake-up of the writer: the lines of one turn of the engine (a
    /// thousand answers of one read) cost the writer one wake-up, not one each.
    public func send(contentsOf lines: [OutputLine]) {
        guard !lines.isEmpty else { return }
        let wake = state.withLock { state in
            var queued = false
            for line in lines where state.enqueue(line, metrics: metrics) { queued = true }
            return state.takeWakeWish(queued: queued)
        }
        // A broadcast, not a signal: stdin's reader may sleep on the same condition (`waitForRoomForAnswers`),
        // and a signal that woke it instead would leave the writer asleep over queued lines.
        if wake { state.broadcast() }
    }

    /// Blocks the calling thread (stdin's reader, about to hand over a control line with an `id`) while
    /// `maximumWaitingUncoalescedLines` lines that nothing replaces wait for a consumer that does not read:
    /// answers are never dropped, so a line that will need one waits here instead, then in stdin's pipe,
    /// and the consumer's writes block. Returns once the writer has taken what waits, or is closing.
    func waitForRoomForAnswers() {
        state.withLock(when: { $0.queue.hasRoomForAnswers || $0.isClosing }) { _ in }
    }

    /// How `finish` ended.
    public enum Completion: Sendable, Equatable {
        /// Every line, the last included, was written.
        case complete
        /// This many lines were not written (none was cut): the consumer left, or did not read before the
        /// deadline.
        case incomplete(unwritten: Int)
        /// `interrupt()` ended the wait; a line may have been cut.
        case interrupted
    }

    /// Queues `last`, then waits until everything is written. With a `deadline` (a consumer that does not
    /// read must not keep hammock from exiting), no write is begun after it, and the wait ends at the first
    /// line boundary after it (or `midLineGrace` later); without one, the wait lasts as long as the consumer
    /// takes to read. Either way it ends when the consumer closes its end, or at `interrupt()`.
    /// Then `run()` returns.
    public func finish(with last: OutputLine?, deadline timeout: Duration?) async -> Completion {
        if let last { send(last) }
        // The wait is a condition variable's, shared with the writing thread: on a thread of its own.
        let completion = await OwnThread.run(named: "hammock.stdout.finish") { [self] in waitForEnd(timeout) }
        end()
        return completion
    }

    private func waitForEnd(_ timeout: Duration?) -> Completion {
        // The writer's (in the core's milliseconds), and this wait's, counted in nanoseconds from now so
        // that the wait lasts the whole timeout, not up to a millisecond less.
        let deadline = timeout.map { MonotonicInstant.current + $0 }
        let waitEnds = timeout.map { (MonotonicDeadline.after($0), MonotonicDeadline.after($0 + Self.midLineGrace)) }
        state.withLock { state in
            state.isClosing = true
            state.stopStartingAt = deadline
        }
        state.broadcast()
        // On the monotonic clock, and asked again at each wake-up: a write that has begun a line may end it
        // within the grace (its end wakes this wait); after that, the deadline holds whatever the consumer
        // does (only a consumer that reads nothing can keep a write going). A stepped wall clock neither
        // shortens nor stretches the drain.
        return state.withLock(
            when: { $0.isInterrupted || $0.isDone },
            before: { state in waitEnds.map { state.isMidLine ? $0.1 : $0.0 } }
        ) { state, _ in
            if state.isInterrupted { return .interrupted }
            if state.isDone { return state.unwritten == 0 ? .complete : .incomplete(unwritten: state.unwritten) }
            // The writer may sit in an atomic write that has put nothing in the pipe yet: that line and
            // those after it are lost whole.
            return .incomplete(unwritten: state.unwritten + state.queue.count + 1)
        }
    }

    /// Ends `finish`'s wait at once (a second signal while hammock waits for its consumer).
    public func interrupt() {
        state.withLock { $0.isInterrupted = true }
        state.broadcast()
    }

    /// How many lines wait to be written; tests and benchmarks watch it stay bounded.
    public var waitingCount: Int {
        state.withLock { $0.queue.count }
    }

    private func writeLines() {
        var encoding = LineEncoding(bar: bar)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 16)
        var ends: [Int] = []
        while true {
            // Only a writer with nothing to write asks to be woken by the next line.
            state.withLock { $0.wantsWake = $0.queue.isEmpty || $0.isPaused }
            // Take everything that waits (or learn that nothing will), then encode and write it outside the
            // lock, with as few system calls as possible.
            // A pause puts a bar's next render for `ago` off until `resume`.
            let taken = state.withLock(
                when: { (!$0.queue.isEmpty && !$0.isPaused) || $0.isClosing },
                before: { state in state.isPaused ? nil : encoding.nextRefresh.map(MonotonicDeadline.init) }
            ) { state, isReady -> (batch: [OutputLine], reloaded: [ViewDefinition]?, isRefreshDue: Bool)? in
                if state.queue.isEmpty && state.isClosing {
                    state.isDone = true
                    return nil
                }
                let batch = state.queue.takeAll(reader: "stdout")
                let reloaded = state.reloadedViews
                state.reloadedViews = nil
                state.holdsBatch = true
                state.wantsWake = false
                // Not ready: the refresh's time came first.
                return (batch, reloaded, !isReady)
            }
            // `finish` may wait for the end, stdin's reader for room for answers.
            state.broadcast()
            guard let taken else { return }
            let (batch, reloaded, isRefreshDue) = taken

            buffer.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
            encoding.encode(
                batch, reloaded: reloaded, refresh: isRefreshDue, redactor: secrets.redactor, into: &buffer, ends: &ends,
                report: reportProblem)
            switch write(buffer, lineEnds: ends) {
            case .written:
                if let metrics, !ends.isEmpty { metrics.wroteLines(ends.count) }
                state.withLock { $0.holdsBatch = false }
            case .stopped(let remaining):
                stop(unwritten: remaining)
                return
            case .failed(let remaining):
                consumerIsGone(unwritten: remaining, byWriter: true)
                return
            }
        }
    }

    private enum WriteResult {
        case written
        /// The deadline passed or `interrupt()` came; this many lines were not begun.
        case stopped(remaining: Int)
        /// The consumer is gone; this many lines were not (wholly) written.
        case failed(remaining: Int)
    }

    /// Writes the encoded lines in chunks of whole lines, checking before each chunk whether to go on.
    private func write(_ buffer: [UInt8], lineEnds: [Int]) -> WriteResult {
        var line = 0
        var start = 0
        while line < lineEnds.count {
            // As many whole lines as fit in one atomic write, or one line longer than that alone.
            var last = line
            while last + 1 < lineEnds.count && lineEnds[last + 1] - start <= transport.atomicWrite { last += 1 }
            let end = lineEnds[last]
            let isLong = end - start > transport.atomicWrite
            if isLong && transport.knowsUnreadBytes {
                // Waits (outside the lock) until the pipe can take the line whole, so that a consumer who
                // stops reading mid-line cannot leave half of it in the pipe.
                let ready = transport.waitForRoom(end - start) { [self] in shouldStop() }
                if !ready { return shouldStop() ? .stopped(remaining: lineEnds.count - line) : .failed(remaining: lineEnds.count - line) }
            }
            if shouldStop() { return .stopped(remaining: lineEnds.count - line) }
            setMidLine(isLong)
            let written = buffer.withUnsafeBytes { transport.writeAll(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
            setMidLine(false)
            guard written else { return .failed(remaining: lineEnds.count - line) }
            start = end
            line = last + 1
        }
        return .written
    }

    private func shouldStop() -> Bool {
        state.withLock { state in
            if state.isInterrupted { return true }
            if let stopStartingAt = state.stopStartingAt, MonotonicInstant.current >= stopStartingAt { return true }
            return false
        }
    }

    private func setMidLine(_ value: Bool) {
        state.withLock { $0.isMidLine = value }
        if !value { state.broadcast() }  // `finish`'s wait may give the line its grace
    }

    /// The deadline passed: the lines not begun are given up.
    private func stop(unwritten remaining: Int) {
        state.withLock { state in
            state.unwritten += remaining + state.queue.discard()
            state.holdsBatch = false
            state.isDone = true
        }
        state.broadcast()
    }

    /// Drops whatever waits, stops accepting lines and tells the engine, once. While the writer holds lines,
    /// it is the one to say it is done (its next write fails), so that they are counted as unwritten.
    private func consumerIsGone(unwritten remaining: Int, byWriter: Bool = false) {
        let notify = state.withLock { state in
            state.isClosing = true
            if byWriter { state.holdsBatch = false }
            if !state.holdsBatch { state.isDone = true }
            state.unwritten += remaining + state.queue.discard()
            defer { state.onClosed = nil }
            return state.onClosed
        }
        state.broadcast()
        notify?()
    }
}

