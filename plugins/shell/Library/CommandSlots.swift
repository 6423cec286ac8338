import FoundationEssentials
import Glibc
import HammockCore
import Synchronization

/// At most `limit` poll commands run at once in the plugin; loads beyond that wait, first come first served.
///
/// Thousands of sources that start together would otherwise fork thousands of processes at once, and on a
/// small machine each of them then takes longer than its timeout. A load's timeout counts from when its
/// command gets a slot (the plugin says `started` then), so waiting here costs it nothing.
///
/// A `Mutex`, not an actor: `release` runs in a `defer`, where nothing can be awaited, and each call is a
/// counter update or the hand-over of a slot to the next waiter.
final class CommandSlots: Sendable {
    let limit: Int
    private struct State {
        var free: Int
        var waiters: [(ticket: Int, resume: CheckedContinuation<Bool, Never>)] = []
        /// Index of the first waiter still in `waiters`: taking from the front is O(1), compacted now and then.
        var head = 0
        var nextTicket = 0
    }
    private let state: Mutex<State>

    init(limit: Int) {
        self.limit = max(1, limit)
        state = Mutex(State(free: max(1, limit)))
    }

    /// The environment variable that sets the limit for the plugin: a positive integer.
    static let limitVariable = "HAMMOCK_SHELL_CONCURRENCY"

    /// Four per processor, at least 8: a polled command mostly waits (on a disk, the network, a `sleep`), so
    /// more than one per core keeps the cores busy, while a storm of thousands stays a short queue rather
    /// than thousands of processes thrashing a small machine.
    static var defaultLimit: Int { defaultLimit(processors: ProcessInfo.processInfo.activeProcessorCount) }

    static func defaultLimit(processors: Int) -> Int { max(8, 4 * processors) }

    /// The limit `HAMMOCK_SHELL_CONCURRENCY` sets, else `defaultLimit`; a value that is not a positive
    /// integer is reported and ignored.
    static func configuredLimit(environment: [String: String] = ProcessInfo.processInfo.environment) -> (limit: Int, problem: String?) {
        guard let text = environment[limitVariable] else { return (defaultLimit, nil) }
        guard let value = Int(text.trimming { $0.isWhitespace && !$0.isNewline }), value > 0 else {
            return (defaultLimit, "\(limitVariable)=\"\(text)\" is not a positive integer; using \(defaultLimit)")
        }
        return (value, nil)
    }

    /// Waits for a slot. False when the task was cancelled while it waited (it holds no slot then).
    func acquire() async -> Bool {
        let ticket: Int? = state.withLock { state in
            if state.free > 0 {
                state.free -= 1
                return nil
            }
            state.nextTicket += 1
            return state.nextTicket
        }
        guard let ticket else { return true }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow: Bool? = state.withLock { state in
                    // Cancelled before the wait began: nothing will come for it.
                    if Task.isCancelled { return false }
                    state.waiters.append((ticket, continuation))
                    return nil
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard let index = state.waiters[state.head...].firstIndex(where: { $0.ticket == ticket }) else { return nil }
                return state.waiters.remove(at: index).resume
            }
            waiter?.resume(returning: false)
        }
    }

    /// How many loads wait for a slot now.
    var waiterCount: Int { state.withLock { $0.waiters.count - $0.head } }

    /// Gives a slot back: to the longest waiter if there is one.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard state.head < state.waiters.count else {
                state.free += 1
                return nil
            }
            let waiter = state.waiters[state.head].resume
            state.head += 1
            if state.head > 1024 && state.head * 2 > state.waiters.count {
                state.waiters.removeFirst(state.head)
                state.head = 0
            }
            return waiter
        }
        next?.resume(returning: true)
    }
}
