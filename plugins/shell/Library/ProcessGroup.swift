import Glibc
import HammockSystem
import Synchronization

/// Why a command was ended before it finished by itself; the first reason given is the one reported.
enum EndReason: Sendable, Equatable {
    case timeout(Duration)
    case cancelled
    case outputTooLarge
    case lineTooLong
    case stopped
}

/// Ends one command's process group, whoever asks and whenever: before the command has even started,
/// while it runs, or after its leader is gone but a child it left behind still holds on.
///
/// Every command runs in a process group of its own, so a signal to the group reaches the children a
/// script starts (`sleep 100 & ...`) and not the plugin itself.
final class ProcessGroupHandle: Sendable {
    private struct State {
        var groupID: pid_t?
        var reason: EndReason?
        var ending: Task<Void, Never>?
        var finished = false
        /// `end` calls that came while the command was being spawned: `attach` or `finish` resumes them.
        var waitingForStart: [CheckedContinuation<Void, Never>] = []
    }

    /// A `Mutex`, not an actor: `end` may come from any task while the command's own task attaches and
    /// finishes, each hold is a few loads, and `endSoon` must not wait (it is called from the output reader).
    private let state = Mutex(State())
    static let gracePeriod: Duration = .seconds(2)

    /// The reason the group was ended, if it was.
    var endReason: EndReason? { state.withLock { $0.reason } }

    /// Called once the command is running. An end asked for while it was starting begins now.
    func attach(_ groupID: pid_t) {
        let waiting = state.withLock { state in
            state.groupID = groupID
            if state.reason != nil && state.ending == nil { state.ending = Self.startEnding(groupID) }
            defer { state.waitingForStart = [] }
            return state.waitingForStart
        }
        for waiter in waiting { waiter.resume() }
    }

    /// Asks the group to end (TERM, then KILL after the grace period), and waits until it is gone.
    /// Runs apart from the caller's task, so that a cancelled caller still waits for the end.
    func end(_ reason: EndReason) async {
        // Unstructured on purpose (a child would share the caller's cancellation); awaited here.
        await Task { await self.endAndWait(reason) }.value
    }

    private func endAndWait(_ reason: EndReason) async {
        // Still being spawned: `attach` will start the end, or `finish` say there is nothing left to end.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isStarted = state.withLock { state in
                if state.reason == nil { state.reason = reason }
                guard !state.finished && state.groupID == nil else { return true }
                state.waitingForStart.append(continuation)
                return false
            }
            if isStarted { continuation.resume() }
        }
        let ending: Task<Void, Never>? = state.withLock { state in
            guard !state.finished, let groupID = state.groupID else { return nil }
            if state.ending == nil { state.ending = Self.startEnding(groupID) }
            return state.ending
        }
        await ending?.value
    }

    /// Asks the group to end without waiting, for callers that must not block (the output reader).
    func endSoon(_ reason: EndReason) {
        // Unstructured: the caller cannot wait. It ends when the group is gone; the command's run awaits the
        // same ending in `finish`.
        Task { await self.end(reason) }
    }

    /// Called after the command's leader has been reaped: nothing it started may outlive it, so whatever
    /// is left in its group is ended too, and later calls to `end` have nothing to do.
    func finish() async {
        let ending: Task<Void, Never>? = state.withLock { state in
            guard !state.finished else { return nil }
            if state.ending == nil, let groupID = state.groupID, groupHasLiveMembers(groupID) {
                state.ending = Self.startEnding(groupID)
            }
            return state.ending
        }
        await ending?.value
        let waiting = state.withLock { state in
            state.finished = true
            defer { state.waitingForStart = [] }
            return state.waitingForStart
        }
        for waiter in waiting { waiter.resume() }
    }

    /// An unstructured task, so that a cancelled caller cannot cut the sequence short and leave a
    /// process behind.
    private static func startEnding(_ groupID: pid_t) -> Task<Void, Never> {
        // Kept in the handle's state; `end` and `finish` await it, and it ends when the group is gone.
        Task { await terminateGroup(groupID, grace: gracePeriod) }
    }
}

/// TERM to the whole group, then KILL to whatever is left after `grace`; returns when none is left.
func terminateGroup(_ groupID: pid_t, grace: Duration) async {
    guard groupHasLiveMembers(groupID) else { return }
    killpg(groupID, SIGTERM)
    if await waitUntilGroupIsGone(groupID, within: grace) { return }
    killpg(groupID, SIGKILL)
    _ = await waitUntilGroupIsGone(groupID, within: .seconds(5))
}

/// Polls, for want of an event: the group's members need not be the plugin's children (a script's
/// background job, a daemon that forked), so neither a pidfd nor `waitpid` can say when the last one is gone.
private func waitUntilGroupIsGone(_ groupID: pid_t, within limit: Duration) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while groupHasLiveMembers(groupID) {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return true
}

/// Whether any process of the group is still running. Zombies do not count: a dead leader waits for its
/// reaper, and orphans wait for init, which in a container may never reap them.
func groupHasLiveMembers(_ groupID: pid_t) -> Bool {
    if killpg(groupID, 0) != 0 && errno == ESRCH { return false }
    // Unreadable /proc: assume it lives, as the caller then waits out its grace and sends SIGKILL.
    guard let pids = ProcessStat.allPIDs() else { return true }
    return pids.contains { pid in
        guard let stat = ProcessStat(pid: pid) else { return false }
        return stat.group == groupID && stat.isLive
    }
}
