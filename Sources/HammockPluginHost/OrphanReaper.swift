import CHammockSystem
import FoundationEssentials
import Glibc
import HammockSystem
import Synchronization

/// Ends the processes that reach hammock as orphans.
///
/// Each plugin runs below a guard (see `ProcessTransport`), which keeps whatever the plugin starts below
/// it and ends it all, so orphans rarely reach hammock. One does when a guard is itself killed (hammock
/// kills a guard's group that did not end in time; someone may `kill -9` it): the guard's plugin dies with
/// it (its parent-death signal), and what the plugin started is re-parented. So hammock makes itself a
/// *child subreaper*, and these come to hammock instead of init: it ends every child that is not a guard
/// it started, and reaps it.
package enum OrphanReaper {
    /// Call early; calling it again does no harm.
    package static func becomeSubreaper() {
        _ = hammock_become_child_subreaper()
    }

    /// Kills (with their process groups) and reaps hammock's children that are not live plugins' guards,
    /// and what they leave in turn, until none is left.
    ///
    /// Also reaps the orphans that died by themselves: as their subreaper, hammock must, or they stay
    /// zombies. The engine calls it when a plugin dies, every few seconds, and at exit.
    package static func sweep() {
        // Each orphan killed hands its own children to hammock: look again until a look finds none.
        for _ in 0..<20 {
            if sweepOnce() == 0 { return }
        }
    }

    /// One look at hammock's children; returns how many it killed.
    private static func sweepOnce() -> Int {
        let me = getpid()
        let plugins = LivePlugins.shared.snapshot()
        // Its own children when the kernel lists them (a few files, one per thread), else every process.
        guard let pids = ProcessStat.ownChildren() ?? ProcessStat.allPIDs() else { return 0 }
        var orphans: [pid_t] = []
        for pid in pids {
            guard pid != me, !plugins.guards.contains(pid), let stat = ProcessStat(pid: pid) else { continue }
            switch verdict(on: pid, stat, me: me, plugins: plugins) {
            case .spare:
                continue
            case .reap:
                reapChild(pid, within: .zero)
            case .kill:
                if !plugins.guards.contains(stat.group) { killProcessGroup(stat.group) }
                kill(pid, SIGKILL)
                orphans.append(pid)
            }
        }
        // Reap exactly these pids, each as it dies, within a second for them all.
        let deadline = SuspendingClock.now + .seconds(1)
        for pid in orphans { reapChild(pid, within: deadline - .now) }
        return orphans.count
    }

    enum Verdict: Equatable {
        /// Not an orphan of hammock's, or one that may be a guard being spawned.
        case spare
        /// An orphan that has ended by itself: reaped.
        case reap
        /// An orphan that runs: killed with its group, then reaped.
        case kill
    }

    /// What the sweep does with process `pid`, which `stat` describes.
    ///
    /// A guard being spawned right now is a child whose pid is not known yet: whatever started since the
    /// oldest spawn in flight began is spared, a zombie too (a guard that died at once is its spawner's to
    /// reap, for its status; reaped here, its spawner would learn nothing of how it ended). An orphan among
    /// them is ended by the next sweep.
    static func verdict(
        on pid: pid_t, _ stat: ProcessStat, me: pid_t, plugins: (guards: Set<pid_t>, oldestSpawnStart: UInt64?)
    ) -> Verdict {
        guard stat.parent == me, !plugins.guards.contains(pid) else { return .spare }
        if let spawnStart = plugins.oldestSpawnStart, stat.startTime + 1 >= spawnStart { return .spare }
        return stat.state == "Z" ? .reap : .kill
    }
}

/// The plugins' guards running now, across all kinds, and the spawns of guards in flight: what the orphan
/// sweep must never touch.
///
/// A lock, not an actor: the sweep that reads it is synchronous (it runs from the host's `exited`, the
/// engine's timer and the exit), and each hold is a few loads.
///
/// One registry for the process (`shared`), not one passed to each engine, because what it protects is
/// process-wide: being a child subreaper is the process's, so every orphan of every engine in the process
/// comes to the same sweep, and a sweep that knew only its own engine's guards would kill the guards of
/// another engine in the same process (the tests run many; a signal during start-up stops them all, see
/// `SignalRouter.stopStartUp`). Every guard spawned in the process registers here, whoever spawns it.
final class LivePlugins: Sendable {
    static let shared = LivePlugins()

    private struct State {
        var guards: Set<pid_t> = []
        /// When each spawn in flight began, in clock ticks since boot (the unit of /proc/PID/stat's starttime).
        var spawns: [Int: UInt64] = [:]
        var nextSpawn = 0
    }

    private let state = Mutex(State())

    /// A spawn is about to begin; pass what this returns to `started` and `ended`.
    func spawning() -> Int {
        let now = Self.ticksSinceBoot()
        return state.withLock { state in
            state.nextSpawn += 1
            state.spawns[state.nextSpawn] = now
            return state.nextSpawn
        }
    }

    func started(_ pid: pid_t, spawn: Int) {
        state.withLock { state in
            state.guards.insert(pid)
            state.spawns[spawn] = nil
        }
    }

    func ended(_ pid: pid_t?, spawn: Int) {
        state.withLock { state in
            if let pid { state.guards.remove(pid) }
            state.spawns[spawn] = nil
        }
    }

    func snapshot() -> (guards: Set<pid_t>, oldestSpawnStart: UInt64?) {
        state.withLock { ($0.guards, $0.spawns.values.min()) }
    }

    /// CLOCK_BOOTTIME in clock ticks, rounded down, as the kernel counts a process's start time.
    private static func ticksSinceBoot() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        let perSecond = UInt64(max(sysconf(Int32(_SC_CLK_TCK)), 1))
        return UInt64(now.tv_sec) * perSecond + UInt64(now.tv_nsec) * perSecond / 1_000_000_000
    }
}
