import CHammockSystem
import Glibc
import HammockProtocol
import HammockSystem
import Synchronization

/// One thread that waits on every running command's pipes and end at once (epoll) and wakes the task that
/// reads that command; the task does the reading itself.
///
/// The plugin ran its commands through swift-subprocess before. A profile of 100 sources polling `cat
/// /proc/loadavg` every second showed what that cost per command: a fork that copies the page tables of a
/// process holding the Swift runtime (the child's share alone was a third of the command's CPU), and about
/// six hand-offs between threads (the spawn on a thread of its own, each pipe and the exit on others). Here
/// a command is a vfork from the load's own task and, when it answers, one hand-off to this thread and back.
///
/// One per plugin (`ShellPlugin.plugin`), given to its sources: no process-wide one, so that a test runs
/// its commands through a watcher of its own.
final class CommandWatcher: Sendable {

    private let epoll: Int32
    /// Made readable to wake the thread when a deadline comes before the one it sleeps until.
    private let rethink: Int32
    private static let rethinkToken: UInt64 = 0
    private struct Registry {
        var nextToken: UInt64 = 0
        var wakeups: [UInt64: Wakeup] = [:]
        /// When a command with a time limit must be woken, whatever its descriptors do: a load's timeout
        /// lives here rather than in a timer task of its own, which cost each poll a task and two wake-ups
        /// of libdispatch's timer thread.
        var deadlines: [UInt64: ContinuousClock.Instant] = [:]
        /// The deadline the thread's current wait ends at (nil: none).
        var sleepsUntil: ContinuousClock.Instant?
    }
    /// Looked up by this thread for each event: a command that has stopped watching is no longer found, so an
    /// event for it that was already on its way is dropped.
    private let registry = Mutex(Registry())

    init() {
        epoll = hammock_epoll_create()
        rethink = hammock_event_create()
        precondition(epoll >= 0 && rethink >= 0, "epoll or eventfd failed: \(String(cString: strerror(errno)))")
        precondition(hammock_epoll_watch(epoll, rethink, Self.rethinkToken) == 0, "epoll_ctl failed: \(String(cString: strerror(errno)))")
        OwnThread.start(named: "hammock.commands") { [self] in waitForEvents() }
    }

    /// Signals `wakeup` whenever one of `descriptors` becomes readable, reaches its end, or (a pidfd) its
    /// process ends, and once at `deadline`. Edge-triggered: the reader must read until `EAGAIN` before it
    /// waits again. Returns the token for `stopWatching`.
    func watch(_ descriptors: [Int32], wakeup: Wakeup, deadline: ContinuousClock.Instant? = nil) -> UInt64 {
        let (token, sooner) = registry.withLock { registry in
            registry.nextToken += 1
            registry.wakeups[registry.nextToken] = wakeup
            guard let deadline else { return (registry.nextToken, false) }
            registry.deadlines[registry.nextToken] = deadline
            return (registry.nextToken, registry.sleepsUntil.map { deadline < $0 } ?? true)
        }
        if sooner { hammock_event_post(rethink) }
        for descriptor in descriptors {
            // Fails only for a descriptor that is not open or cannot be polled, which would be a bug here.
            precondition(hammock_epoll_watch(epoll, descriptor, token) == 0,
                         "epoll_ctl failed: \(String(cString: strerror(errno)))")
        }
        return token
    }

    /// Stops watching `descriptor` and closes it. Never close a watched descriptor otherwise: another command
    /// may be given its number at once, and a later removal by number would then remove that command's.
    func close(_ descriptor: Int32) {
        _ = hammock_epoll_forget(epoll, descriptor)
        _ = Glibc.close(descriptor)
    }

    /// Forgets the wakeup of `watch`'s token, once its descriptors are closed.
    func stopWatching(_ token: UInt64) {
        registry.withLock { registry in
            registry.wakeups[token] = nil
            registry.deadlines[token] = nil
        }
    }

    private func waitForEvents() {
        var tokens = [UInt64](repeating: 0, count: 64)
        while true {
            let timeout = registry.withLock { registry -> Int32 in
                registry.sleepsUntil = registry.deadlines.values.min()
                return registry.sleepsUntil.map { milliseconds(until: $0) } ?? -1
            }
            let count = Int(hammock_epoll_wait(epoll, &tokens, Int32(tokens.count), timeout))
            precondition(count >= 0, "epoll_wait failed: \(String(cString: strerror(errno)))")
            if tokens[..<count].contains(Self.rethinkToken) { hammock_event_clear(rethink) }
            let woken = registry.withLock { registry in
                var woken = tokens[..<count].compactMap { registry.wakeups[$0] }
                let now = ContinuousClock.now
                for (token, deadline) in registry.deadlines where deadline <= now {
                    registry.deadlines[token] = nil
                    if let wakeup = registry.wakeups[token] { woken.append(wakeup) }
                }
                return woken
            }
            for wakeup in woken { wakeup.signal() }
        }
    }
}

/// epoll's timeout for `deadline`: whole milliseconds, rounded up so that the wait never ends before it.
private func milliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
    let (seconds, attoseconds) = (deadline - .now).components
    guard seconds >= 0 else { return 0 }
    let total = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    return Int32(clamping: total)
}

/// Said by the watcher's thread when something happened to a command, awaited by the command's task. A
/// signal that comes while nobody waits is kept for the next wait, so none is lost between the reader's last
/// `EAGAIN` and its wait.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns once something has happened since the last wait. Not cancellable: a command's run ends
    /// through its process group, whose end is itself an event.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if state.pending {
                    state.pending = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }
}
