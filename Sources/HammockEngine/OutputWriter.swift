import Foundation
import HammockCore

/// Writes output lines to a file descriptor (stdout) from a thread of its own.
///
/// A consumer that stops reading must never stall the engine nor make it grow without bound, so lines wait
/// here in a queue where a newer state of a source or view *replaces* the older one still waiting: memory is
/// bounded by the number of ids, not by how long the consumer sleeps. Lines are numbered (`seq`) as they
/// leave, so numbers are strictly increasing in the order the consumer reads them.
///
/// Writing blocks when the pipe is full, which is why it runs on a dedicated thread rather than in the
/// Swift concurrency pool; a condition variable is the natural hand-off between the two.
public final class OutputWriter: @unchecked Sendable {
    private let descriptor: Int32
    private let secrets: Secrets
    private let condition = NSCondition()
    // Everything below is guarded by `condition`.
    private var order: [Int] = []
    private var pending: [Int: OutputLine] = [:]
    private var slotByKey: [String: Int] = [:]
    private var nextSlot = 0
    private var uncoalescedCount = 0
    /// Slots in `order` whose line was replaced by a newer one.
    private var deadSlots = 0
    private var droppedErrorLines = 0
    private var seq = 0
    private var isClosing = false
    private var isDone = false
    private var onClosed: (@Sendable () -> Void)?

    /// Error lines beyond this many waiting are dropped (and counted), so a flood of bad control lines to a
    /// consumer that does not read cannot grow the queue.
    static let maximumWaitingUncoalescedLines = 1000

    public init(descriptor: Int32 = STDOUT_FILENO, secrets: Secrets, onClosed: @escaping @Sendable () -> Void) {
        self.descriptor = descriptor
        self.secrets = secrets
        self.onClosed = onClosed
        let thread = Thread { [self] in run() }
        thread.name = "hammock.stdout"
        thread.start()
        let watcher = Thread { [self] in watchForClosedConsumer() }
        watcher.name = "hammock.stdout.watch"
        watcher.start()
    }

    public func send(_ line: OutputLine) {
        condition.lock()
        defer { condition.unlock() }
        guard !isClosing else { return }
        if let key = line.coalescingKey {
            // The newer state replaces the waiting one and moves to the back of the queue, so lines keep
            // the order in which the states arose (a source's line before the view line it changed).
            if let slot = slotByKey[key], pending.removeValue(forKey: slot) != nil {
                deadSlots += 1
                compactOrderIfMostlyDead()
            }
            slotByKey[key] = nextSlot
        } else {
            if case .error = line, uncoalescedCount >= Self.maximumWaitingUncoalescedLines {
                droppedErrorLines += 1
                return
            }
            uncoalescedCount += 1
        }
        pending[nextSlot] = line
        order.append(nextSlot)
        nextSlot += 1
        condition.signal()
    }

    /// Drops the slots of replaced lines from the queue's order once they outnumber the live ones, so the
    /// order list stays as bounded as the lines themselves however long the consumer does not read.
    private func compactOrderIfMostlyDead() {
        guard deadSlots > max(64, pending.count) else { return }
        order = order.filter { pending[$0] != nil }
        deadSlots = 0
    }

    /// Queues `last`, then waits until everything is written or `timeout` passes (a consumer that does not
    /// read must not keep hammock from exiting).
    public func finish(with last: OutputLine?, timeout: Duration) {
        if let last { send(last) }
        condition.lock()
        isClosing = true
        condition.signal()
        let deadline = Date().addingTimeInterval(Double(timeout.milliseconds) / 1000)
        while !isDone && condition.wait(until: deadline) {}
        condition.unlock()
    }

    /// How many lines wait to be written; tests and benchmarks watch it stay bounded.
    public var waitingCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return pending.count
    }

    private func run() {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 16)
        while true {
            condition.lock()
            while order.isEmpty && !isClosing { condition.wait() }
            if order.isEmpty && isClosing {
                isDone = true
                condition.broadcast()
                condition.unlock()
                return
            }
            // Take everything that waits, then encode and write it outside the lock, with as few system
            // calls as possible.
            var batch: [OutputLine] = []
            batch.reserveCapacity(order.count + 1)
            if droppedErrorLines > 0 {
                batch.append(.error(message: "\(droppedErrorLines) error lines were dropped because stdout was not read"))
                droppedErrorLines = 0
            }
            for slot in order {
                guard let line = pending.removeValue(forKey: slot) else { continue }
                if let key = line.coalescingKey { slotByKey[key] = nil } else { uncoalescedCount -= 1 }
                batch.append(line)
            }
            order.removeAll(keepingCapacity: true)
            deadSlots = 0
            condition.unlock()

            buffer.removeAll(keepingCapacity: true)
            let redactor = secrets.redactor
            for line in batch {
                seq += 1
                line.encode(seq: seq, into: &buffer, redactor: redactor)
            }
            if !writeAll(buffer) {
                consumerIsGone()
                return
            }
        }
    }

    /// Notices a consumer that closed its end while nothing is being written: a failed write notices it too,
    /// but an engine with nothing new to say would otherwise run on for nobody. `poll` with no requested
    /// events sleeps until `POLLERR` (a pipe whose read end is closed) or `POLLHUP` (a socket or terminal
    /// hung up); for a regular file it sleeps for ever.
    private func watchForClosedConsumer() {
        var watched = pollfd(fd: descriptor, events: 0, revents: 0)
        while true {
            let ready = poll(&watched, 1, -1)
            if ready < 0 && errno == EINTR { continue }
            if ready > 0 && watched.revents & Int16(POLLERR | POLLHUP) != 0 { consumerIsGone() }
            return
        }
    }

    /// Drops whatever waits, stops accepting lines and tells the engine, once.
    private func consumerIsGone() {
        condition.lock()
        isClosing = true
        isDone = true
        pending.removeAll()
        order.removeAll()
        condition.broadcast()
        let notify = onClosed
        onClosed = nil
        condition.unlock()
        notify?()
    }

    private func writeAll(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    return false
                }
                offset += written
            }
            return true
        }
    }
}
