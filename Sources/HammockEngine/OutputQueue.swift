import HammockCore
import HammockLogging
import HammockRendering
import HammockSystem

/// The lines that wait for one consumer (stdout's `OutputWriter`, each client of `SocketWriter`): a newer
/// state of a source or view replaces the older one still waiting, so what waits is bounded by the number of
/// ids, not by how long the consumer sleeps.
///
/// A value, owned by whoever holds its writer's lock.
struct OutputQueue {
    private(set) var pending = CoalescingQueue<OutputLine>()
    /// Waiting lines that no newer line replaces (`error`, `removed`, ...).
    private(set) var uncoalescedCount = 0
    private var droppedErrorLines = 0

    /// Error lines without an `id` beyond this many waiting are dropped (and counted), so a flood of bad
    /// control lines to a consumer that does not read cannot grow the queue. Answers to lines with an `id`
    /// are never dropped (a consumer waits for each): such lines are not read meanwhile instead
    /// (`waitForRoomForAnswers`).
    static let maximumWaitingUncoalescedLines = 1000

    var isEmpty: Bool { pending.isEmpty }
    var count: Int { pending.count }
    /// Whether a control line with an `id` may be handed over now (its answer will have room).
    var hasRoomForAnswers: Bool { uncoalescedCount < Self.maximumWaitingUncoalescedLines }

    /// Puts `line` in the queue; false when it was dropped.
    mutating func enqueue(_ line: OutputLine, metrics: (any EngineObserver)?) -> Bool {
        let key = line.coalescingKey
        if key == nil {
            if case .error(_, nil) = line, !hasRoomForAnswers {
                droppedErrorLines += 1
                return false
            }
            uncoalescedCount += 1
        }
        // The newer state replaces the waiting one and moves to the back of the queue, so lines keep the
        // order in which the states arose (a source's line before the view line it changed). An answer to a
        // control line is a barrier: whoever reads it has read the newest state of what its op changed.
        if line.isAnswer {
            pending.appendBarrier(line)
        } else if pending.append(line, key: key) != nil {
            metrics?.coalescedLine()
        }
        return true
    }

    /// Everything that waits, in order, led by a line that counts the error lines dropped meanwhile;
    /// `reader` names who did not read (`stdout`, `this connection`).
    mutating func takeAll(reader: String) -> [OutputLine] {
        var batch: [OutputLine] = []
        if droppedErrorLines > 0 {
            batch.append(.error(message: "\(droppedErrorLines) error lines were dropped because \(reader) was not read"))
            droppedErrorLines = 0
        }
        batch += pending.removeAll()
        uncoalescedCount = 0
        return batch
    }

    /// Drops what waits; returns how many lines that was.
    mutating func discard() -> Int {
        let count = pending.count
        _ = pending.removeAll()
        uncoalescedCount = 0
        droppedErrorLines = 0
        return count
    }
}

/// Turns a consumer's batches of lines into the bytes it reads: the protocol's lines, numbered (`seq`) as
/// they leave so that numbers rise in the order the consumer reads them, or a status bar's text
/// (`--format waybar|polybar|text|tmux|i3bar`, which remembers what it last showed).
///
/// A value, owned by the one thread that writes to its consumer.
struct LineEncoding {
    private var bar: BarEncoder?
    private var seq = 0
    /// A bar whose templates use `ago` is rendered again each `BarEncoder.refreshInterval`, though no state
    /// changed: the time of the next such render, on the monotonic clock (which a stepped wall clock does
    /// not move); nil when none is due.
    private(set) var nextRefresh: MonotonicInstant?

    init(bar: BarEncoder?) {
        self.bar = bar
    }

    var isRefreshDue: Bool { nextRefresh.map { MonotonicInstant.current >= $0 } ?? false }

    /// Appends `batch` to `buffer`, each line's end to `ends`; a bar renders `reloaded` views from now on,
    /// and renders again (for `ago`) when `refresh`. A bar's render problems go to `report`.
    mutating func encode(
        _ batch: [OutputLine], reloaded: [ViewDefinition]?, refresh: Bool, redactor: Redactor,
        into buffer: inout [UInt8], ends: inout [Int], report: (String) -> Void
    ) {
        guard var encoder = bar else {
            for line in batch {
                seq += 1
                line.encode(seq: seq, into: &buffer, redactor: redactor)
                ends.append(buffer.count)
            }
            return
        }
        // Lines the bar has nothing to show for are not lines at all: no `seq`, nothing to write.
        if let reloaded { encoder.update(reloaded) }
        let now = EngineTime.current.wall
        for line in batch {
            guard let text = encoder.encode(line, now: now, redactor: redactor) else { continue }
            buffer.append(contentsOf: text.utf8)
            ends.append(buffer.count)
        }
        if refresh, let text = encoder.refresh(now: now, redactor: redactor) {
            buffer.append(contentsOf: text.utf8)
            ends.append(buffer.count)
        }
        nextRefresh = encoder.dependsOnTime ? MonotonicInstant.current + BarEncoder.refreshInterval : nil
        for problem in encoder.takeProblems() { report(problem) }
        bar = encoder
    }
}
