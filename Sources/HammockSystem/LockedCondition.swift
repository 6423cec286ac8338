import Glibc

/// State behind a lock, with a condition that a thread sleeps on until another changes the state: what a
/// thread of its own needs to wait for work (a writer for lines, a worker for jobs) without an actor, whose
/// callers would have to suspend, and without spinning.
///
/// As `Mutex` (which has no condition), the state is reached only inside `withLock`, so the classes that
/// hold one are checked `Sendable`. Timed waits run on the monotonic clock: a change of the wall clock
/// neither ends one early nor makes it last.
///
/// `@unchecked Sendable`, so that its holders need not be: the state is touched only with the mutex held
/// (every access below takes it), and the pthread objects live at fixed addresses allocated here for as long
/// as the object does.
public final class LockedCondition<State>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var state: State

    public init(_ initial: sending State) {
        state = initial
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` with the lock held.
    public func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Sleeps, the lock released, until `isReady` holds (it is asked with the lock held, at first and after
    /// every wake-up), then runs `body` with the lock held.
    public func withLock<Result>(
        when isReady: (State) -> Bool, _ body: (inout State) throws -> Result
    ) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !isReady(state) { pthread_cond_wait(condition, mutex) }
        return try body(&state)
    }

    /// As `withLock(when:_:)`, but sleeps no later than `deadline`: `body` is told whether `isReady` held
    /// (false: the deadline came first).
    public func withLock<Result>(
        when isReady: (State) -> Bool, before deadline: MonotonicDeadline, _ body: (inout State, Bool) throws -> Result
    ) rethrows -> Result {
        try withLock(when: isReady, before: { _ in deadline }, body)
    }

    /// As `withLock(when:before:_:)`, for a deadline that moves with the state: `deadline` is asked with the
    /// lock held, at first and after every wake-up, and `nil` means none (sleep until a signal). For a wait
    /// whose end the state decides: a bar's next refresh, which a pause puts off; the grace that a write
    /// begun before a drain's deadline earns. `body` is told whether `isReady` held (false: the deadline as
    /// last asked came first).
    public func withLock<Result>(
        when isReady: (State) -> Bool, before deadline: (State) -> MonotonicDeadline?,
        _ body: (inout State, Bool) throws -> Result
    ) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !isReady(state) {
            guard let deadline = deadline(state) else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            if deadline.hasPassed { return try body(&state, false) }
            var time = deadline.timespec
            pthread_cond_timedwait(condition, mutex, &time)
        }
        return try body(&state, true)
    }

    /// Wakes one thread that sleeps in a `withLock(when:)`; call it after changing the state.
    public func signal() { pthread_cond_signal(condition) }

    /// Wakes every thread that sleeps in a `withLock(when:)`; call it after changing the state.
    public func broadcast() { pthread_cond_broadcast(condition) }
}

/// A point on the monotonic clock (CLOCK_MONOTONIC), for the deadlines of `LockedCondition`.
public struct MonotonicDeadline: Sendable, Comparable {
    /// Nanoseconds of CLOCK_MONOTONIC.
    public let nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static var now: MonotonicDeadline {
        var time = Glibc.timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return MonotonicDeadline(nanoseconds: Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec))
    }

    /// `duration` from now; saturates rather than trapping on a huge one.
    public static func after(_ duration: Duration) -> MonotonicDeadline {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (nanoseconds, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        let (sum, overflow3) = now.nanoseconds.addingReportingOverflow(nanoseconds)
        guard !overflow, !overflow2, !overflow3 else { return MonotonicDeadline(nanoseconds: duration < .zero ? 0 : .max) }
        return MonotonicDeadline(nanoseconds: max(0, sum))
    }

    public var hasPassed: Bool { MonotonicDeadline.now >= self }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    var timespec: Glibc.timespec {
        Glibc.timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    }
}
