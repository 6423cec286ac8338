import CHammockSystem
import Glibc
import HammockProtocol
import Synchronization

/// One thread that waits on every running command's pipes and end at once (epoll) and wakes the task that
/// reads that command; the task does the reading itself.
///
/// The plugin ran its commands through swift-subprocess before. A profile of 100 sources polling `cat
/// /proc/loadavg` every second showed what that cost per command: a fork that copies the page tables of a
/// process holding the Swift runtime (the child's share alone was a third of the command's CPU), and about
/// six hand-offs between threads (the spawn on a thread of its own, each pipe and the exit on others). Here
/// a command is a vfork from the load's own task and, when it answers, one hand-off to this thread and back.
final class CommandWatcher: Sendable {
    static let shared = CommandWatcher()

    private let epoll: Int32
    private struct Registry {
        var nextToken: UInt64 = 0
        var wakeups: [UInt64: Wakeup] = [:]
    }
    /// Looked up by this thread for each event: a command that has stopped watching is no longer found, so an
    /// event for it that was already on its way is dropped.
    private let registry = Mutex(Registry())

    private init() {
        epoll = hammock_epoll_create()
        precondition(epoll >= 0, "epoll_create1 failed: \(String(cString: strerror(errno)))")
        OwnThread.start(named: "hammock.commands") { [self] in waitForEvents() }
    }

    /// Signals `wakeup` whenever one of `descriptors` becomes readable, reaches its end, or (a pidfd) its
    /// process ends. Edge-triggered: the reader must read until `EAGAIN` before it waits again. Returns the
    /// token for `stopWatching`.
    func watch(_ descriptors: [Int32], wakeup: Wakeup) -> UInt64 {
        let token = registry.withLock { registry in
            registry.nextToken += 1
            registry.wakeups[registry.nextToken] = wakeup
            return registry.nextToken
        }
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
        _ = registry.withLock { $0.wakeups.removeValue(forKey: token) }
    }

    private func waitForEvents() {
        var tokens = [UInt64](repeating: 0, count: 64)
        while true {
            let count = Int(hammock_epoll_wait(epoll, &tokens, Int32(tokens.count)))
            precondition(count >= 0, "epoll_wait failed: \(String(cString: strerror(errno)))")
            let woken = registry.withLock { registry in
                tokens[..<count].compactMap { registry.wakeups[$0] }
            }
            for wakeup in woken { wakeup.signal() }
        }
    }
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
