import FoundationEssentials
import Glibc
import HammockCore
import HammockSystem
import Synchronization

/// Wakes the engine loop at the core's next deadline, and tells it when the clocks jumped.
///
/// Deadlines are instants of `CLOCK_MONOTONIC`, so stepping the wall clock (NTP, a VM restore) moves none of
/// them. The wait is a relative timeout of `poll(2)` on a thread of its own, recomputed from the monotonic
/// clock every time round: no absolute timer on any other clock is involved, so nothing (a suspend, a
/// library that fakes the wall clock) can leave the engine waiting for a deadline that never comes. The
/// same thread compares the clocks every `checkInterval`: wall minus monotonic changes when the wall clock is
/// set, boot time minus monotonic when the machine slept; either, beyond `jumpThreshold`, is `.clockJumped`.
/// Not `Task.sleep`: its timers are absolute deadlines (a `timerfd` under libdispatch), which libfaketime
/// shifts, and the tests run hammock under libfaketime.
final class EngineClock: Sendable {
    static let checkInterval: Duration = .seconds(2)
    /// Less than this is NTP slewing or scheduling noise, not a jump.
    static let jumpThreshold: Duration = .seconds(5)

    private struct State {
        var deadline: MonotonicInstant?
        var isCancelled = false
    }

    /// A `Mutex` because the engine loop arms it and the clock's thread reads it; each hold is a few loads.
    private let state = Mutex(State())
    /// Written to wake the thread when the deadline changes or the clock is cancelled.
    private let wakeup = WakeupPipe()
    private let inbox: EngineInbox

    init(inbox: EngineInbox) {
        self.inbox = inbox
    }

    /// Ticks until cancelled. The wait is `poll`'s, on a thread of its own (see the type's comment).
    func run() async {
        await withTaskCancellationHandler {
            await OwnThread.run(named: "hammock.clock") { [self] in wakeAtDeadlines() }
        } onCancel: {
            cancel()
        }
    }

    /// Arms the next tick (`nil`: none). The engine calls it after every input, so a tick that found
    /// nothing due (a deadline that moved) is always followed by a timer for what is due next.
    func schedule(_ deadline: MonotonicInstant?) {
        let changed = state.withLock { state in
            defer { state.deadline = deadline }
            return state.deadline != deadline
        }
        if changed { wakeup.wake() }
    }

    private func cancel() {
        state.withLock { $0.isCancelled = true }
        wakeup.wake()
    }

    private func wakeAtDeadlines() {
        var lastOffsets = ClockOffsets.now
        var nextCheck = MonotonicInstant.current + Self.checkInterval
        while true {
            let (deadline, isCancelled) = state.withLock { ($0.deadline, $0.isCancelled) }
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
            var descriptor = pollfd(fd: wakeup.readEnd, events: Int16(POLLIN), revents: 0)
            let wait = max(0, min((until - now).milliseconds + 1, Int64(Int32.max)))
            if poll(&descriptor, 1, Int32(wait)) > 0 { wakeup.drain() }
        }
    }
}

/// How far the wall clock and the boot-time clock stand from the monotonic one. The monotonic clock stops
/// while the machine is suspended and the boot-time clock does not: a suspend moves their offset by its
/// length, a step of the wall clock moves the wall's.
struct ClockOffsets: Equatable {
    var wall: Int64
    var boot: Int64

    /// From readings of the three clocks, in milliseconds.
    init(monotonic: Int64, realtime: Int64, boot: Int64) {
        wall = realtime - monotonic
        self.boot = boot - monotonic
    }

    static var now: ClockOffsets {
        ClockOffsets(monotonic: readClock(CLOCK_MONOTONIC), realtime: readClock(CLOCK_REALTIME), boot: readClock(CLOCK_BOOTTIME))
    }

    /// Whether the clocks jumped between two checks: either offset moved by more than `threshold`.
    func differs(from other: ClockOffsets, by threshold: Duration = EngineClock.jumpThreshold) -> Bool {
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

extension MonotonicDeadline {
    /// The same point of CLOCK_MONOTONIC, for a thread that waits until the core's instant: once this has
    /// passed, `MonotonicInstant.current` has reached `instant` (saturates rather than trapping).
    init(_ instant: MonotonicInstant) {
        let (nanoseconds, overflow) = instant.milliseconds.multipliedReportingOverflow(by: 1_000_000)
        self.init(nanoseconds: overflow ? (instant.milliseconds < 0 ? 0 : .max) : max(0, nanoseconds))
    }
}

extension EngineTime {
    /// Both clocks, read only at the edge of the engine.
    static var current: EngineTime {
        EngineTime(instant: .current, wall: Timestamp(millisecondsSince1970: readClock(CLOCK_REALTIME)))
    }
}
