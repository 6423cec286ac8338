import Glibc

/// The CPU time the calling thread has used so far. For a test that times synchronous work on its own thread:
/// unlike the wall clock, it does not count the time the thread waited for a core while a whole-suite run
/// kept both busy.
public func threadCPUTime() -> Duration {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
}
