import HammockPluginKit
import NIOCore
import Synchronization

/// Cancels the loads of one event loop whose deadline has passed, with one timer of that loop for all of
/// them.
///
/// A timer per load is what this replaces: `Task.sleep` puts each on libdispatch's timer thread (a thread
/// switch to arm it and another when it is cancelled), and a scheduled task of the event loop costs a
/// linear search of the loop's timer heap when cancelled, which a client with a timer per request fills
/// with a deadline per request. Here a load's deadline is an entry in a dictionary; the one timer is armed for the
/// earliest and moved only when a sooner one comes, and when it fires it cancels what is due and arms
/// itself for the next.
final class LoadDeadlines: Sendable {
    private struct Watched {
        let deadline: NIODeadline
        let work: Task<PluginLoadResult, Never>
    }

    private struct State {
        var watched: [Int: Watched] = [:]
        var nextKey = 0
        var armed: (at: NIODeadline, timer: Scheduled<Void>)?
    }

    let eventLoop: any EventLoop
    /// A lock held for a few dictionary operations; the loads of this loop and its timer take it, so it is
    /// seldom contended.
    private let state = Mutex(State())

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Cancels `work` at `deadline` unless `unwatch` comes first; returns the key to unwatch it by.
    func watch(_ work: Task<PluginLoadResult, Never>, until deadline: NIODeadline) -> Int {
        state.withLock { state in
            let key = state.nextKey
            state.nextKey += 1
            state.watched[key] = Watched(deadline: deadline, work: work)
            if let armed = state.armed, armed.at <= deadline { return key }
            state.armed?.timer.cancel()
            state.armed = (deadline, arm(at: deadline))
            return key
        }
    }

    /// The load ended: its deadline no longer matters. The timer stays where it is (moving it is what
    /// costs); when it fires for nothing it only arms itself for the next deadline.
    func unwatch(_ key: Int) {
        _ = state.withLock { $0.watched.removeValue(forKey: key) }
    }

    private func arm(at deadline: NIODeadline) -> Scheduled<Void> {
        eventLoop.scheduleTask(deadline: deadline) { [self] in fire() }
    }

    private func fire() {
        let now = NIODeadline.now()
        let due = state.withLock { state in
            state.armed = nil
            var due: [Task<PluginLoadResult, Never>] = []
            var next: NIODeadline?
            for (key, watched) in state.watched {
                if watched.deadline <= now {
                    due.append(watched.work)
                    state.watched[key] = nil
                } else if next.map({ watched.deadline < $0 }) ?? true {
                    next = watched.deadline
                }
            }
            if let next { state.armed = (next, arm(at: next)) }
            return due
        }
        for work in due { work.cancel() }
    }
}
