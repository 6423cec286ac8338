import Foundation
import HammockCore
import Synchronization

/// Wakes the engine loop at the core's next deadline, and tells it when the clocks jumped.
///
/// Deadlines are instants of `CLOCK_MONOTONIC`, so stepping the wall clock (NTP, a VM restore) moves none of
/// them. The wait is a relative timeout of `poll(2)` on a thread of its own, recomputed from the monotonic
/// clock every time round: no absolute timer on any other clock is involved, so nothing (a suspend, a
/// library that fakes the wall clock) can leave the engine waiting for a deadline that never comes. The
/// same thread compares the clocks every `checkInterval`: wall minus monotonic changes when the wall clock is
/// set, boot time minus monotonic when the machine slept; either, beyond `jumpThreshold`, is `.clockJumped`.
final class EngineClock: Sendable {
    static let checkInterval: Duration = .seconds(2)
    /// Less than this is NTP slewing or scheduling noise, not a jump.
    static let jumpThreshold: Duration = .seconds(5)

    private struct State {
        var deadline: MonotonicInstant?
        var isCancelled = false
    }

    /// A `Mutex` because the engine loop arms it and the clock thread reads it; each hold is a few loads.
    private let state = Mutex(State())
    /// A pipe written to wake the thread when the deadline changes or the clock is cancelled.
    private let wakeupRead: Int32
    private let wakeupWrite: Int32
    private let inbox: EngineInbox

    init(inbox: EngineInbox) {
        self.inbox = inbox
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) != 0 { fatalError("hammock: cannot create a pipe: \(String(cString: strerror(errno)))") }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        (wakeupRead, wakeupWrite) = (ends[0], ends[1])
        let thread = Thread { [self] in run() }
        thread.name = "hammock.clock"
        thread.start()
    }

    /// Arms the next tick (`nil`: none). The engine calls it after every input, so a tick that found
    /// nothing due (a deadline that moved) is always followed by a timer for what is due next.
    func schedule(_ deadline: MonotonicInstant?) {
        let changed = state.withLock { state in
            defer { state.deadline = deadline }
            return state.deadline != deadline
        }
        if changed { wake() }
    }

    func cancel() {
        state.withLock { $0.isCancelled = true }
        wake()
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeupWrite, &byte, 1)
    }

    private func run() {
        var lastOffsets = ClockOffsets.now
        var nextCheck = MonotonicInstant.current + Self.checkInterval
        while true {
            let (deadline, isCancelled) = state.withLock { ($0.deadline, $0.isCancelled) }
            // The pipe stays open: a `wake()` racing with the end must write into it, never into a descriptor
            // number that a close here would free for someone else. One engine, one pipe, for the process's life.
            if isCancelled { return }
            let now = MonotonicInstant.current
            if let deadline, deadline <= now {
                // Cleared before it is sent: the engine arms the next one after handling this tick.
                state.withLock { if $0.deadline == deadline { $0.deadline = nil } }
                inbox.yield(.tick)
                continue
            }
            if now >= nextCheck {
                let offsets = ClockOffsets.now
                if offsets.differs(from: lastOffsets, by: Self.jumpThreshold) { inbox.yield(.clockJumped) }
                lastOffsets = offsets
                nextCheck = now + Self.checkInterval
            }
            let until = min(deadline ?? nextCheck, nextCheck)
            var descriptor = pollfd(fd: wakeupRead, events: Int16(POLLIN), revents: 0)
            let wait = max(0, min((until - now).milliseconds + 1, Int64(Int32.max)))
            if poll(&descriptor, 1, Int32(wait)) > 0 {
                var drained = [UInt8](repeating: 0, count: 64)
                while read(wakeupRead, &drained, drained.count) > 0 {}
            }
        }
    }
}

/// How far the wall clock and the boot-time clock stand from the monotonic one.
private struct ClockOffsets {
    var wall: Int64
    var boot: Int64

    static var now: ClockOffsets {
        let monotonic = readClock(CLOCK_MONOTONIC)
        return ClockOffsets(wall: readClock(CLOCK_REALTIME) - monotonic, boot: readClock(CLOCK_BOOTTIME) - monotonic)
    }

    func differs(from other: ClockOffsets, by threshold: Duration) -> Bool {
        abs(wall - other.wall) > threshold.milliseconds || abs(boot - other.boot) > threshold.milliseconds
    }
}

/// Milliseconds on `clock`.
func readClock(_ clock: clockid_t) -> Int64 {
    var spec = timespec()
    clock_gettime(clock, &spec)
    return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
}

extension MonotonicInstant {
    static var current: MonotonicInstant { MonotonicInstant(milliseconds: readClock(CLOCK_MONOTONIC)) }
}

extension EngineTime {
    /// Both clocks, read only at the edge of the engine.
    static var current: EngineTime {
        EngineTime(instant: .current, wall: Timestamp(millisecondsSince1970: readClock(CLOCK_REALTIME)))
    }
}
