import CHammockSystem
import FoundationEssentials
import Glibc

/// A thread of its own, outside the Swift concurrency pool, for work that blocks (a `read`, a `poll`, a
/// `write` to a slow pipe).
///
/// POSIX threads rather than Foundation's `Thread`: the plugins and the engine run on FoundationEssentials,
/// which has no threads, and full Foundation (with ICU) costs each process about 6 MiB and 3 ms of start.
public enum OwnThread {
    /// Starts `body` on a new detached thread named `name` (the kernel keeps 15 bytes of it).
    public static func start(named name: String, _ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Work(name: name, body: body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let created = pthread_create(&thread, &attributes, { context in
            let work = Unmanaged<Work>.fromOpaque(context!).takeRetainedValue()
            _ = hammock_name_thread(work.name)
            work.body()
            return nil
        }, context)
        pthread_attr_destroy(&attributes)
        // As Foundation's Thread does: a process that cannot make a thread cannot go on.
        precondition(created == 0, "cannot start the thread \(name): \(String(cString: strerror(created)))")
    }

    /// Runs `body` on a new thread named `name` and waits for it without holding one of the cooperative
    /// pool's threads (two on a small machine), which a blocked call would take away from every task.
    ///
    /// For blocking that lasts (stdin's reader, the clock's wait, the watch on a closed consumer) or comes
    /// once a run (the wait for stdout's end): short work that comes again and again goes to a
    /// `BlockingExecutor`, not a thread each.
    public static func run<Value: Sendable>(named name: String, _ body: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            start(named: name) { continuation.resume(returning: body()) }
        }
    }

    private final class Work: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
}

/// A mutex and a condition variable with `NSCondition`'s calls (`lock`, `wait`, `broadcast`), for the two
/// classes whose state is too spread out to move into a `LockedCondition` in one step: `OutputWriter` and
/// `WatchTerminal` (each says so). New code uses `LockedCondition`, which keeps the state behind the lock
/// so that its holder is checked `Sendable`. `wait(until:)` runs on the monotonic clock, as
/// `LockedCondition`'s does.
///
/// `@unchecked Sendable`: the pthread objects are made for use from many threads; they live at fixed
/// addresses (allocated here) for as long as the object does.
public final class ThreadCondition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
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

    public func lock() { pthread_mutex_lock(mutex) }

    public func unlock() { pthread_mutex_unlock(mutex) }

    /// With the lock held: releases it until a `broadcast` (or a spurious wake-up: wait in a loop).
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// With the lock held: as `wait()`, but returns false once `deadline` has passed.
    public func wait(until deadline: MonotonicDeadline) -> Bool {
        var time = deadline.timespec
        return pthread_cond_timedwait(condition, mutex, &time) != ETIMEDOUT
    }

    public func signal() { pthread_cond_signal(condition) }

    public func broadcast() { pthread_cond_broadcast(condition) }
}
