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
    ///
    /// For the threads a process cannot go on without (the engine's own, made at its start, and those of
    /// the system layer's primitives): as Foundation's Thread does, a thread that cannot be made stops the
    /// process. A caller that can report the failure instead (a plugin's start) calls `tryStart`.
    public static func start(named name: String, _ body: @escaping @Sendable () -> Void) {
        do throws(SystemCallError) {
            try tryStart(named: name, body)
        } catch {
            preconditionFailure("cannot start the thread \(name): \(error)")
        }
    }

    /// Starts `body` on a new detached thread named `name`, or throws `pthread_create`'s error (EAGAIN:
    /// the process or the user has as many threads as it may have; ENOMEM) without running `body`.
    public static func tryStart(named name: String, _ body: @escaping @Sendable () -> Void) throws(SystemCallError) {
        let context = Unmanaged.passRetained(Work(name: name, body: body))
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let created = pthread_create(&thread, &attributes, { context in
            let work = Unmanaged<Work>.fromOpaque(context!).takeRetainedValue()
            _ = hammock_name_thread(work.name)
            work.body()
            return nil
        }, context.toOpaque())
        pthread_attr_destroy(&attributes)
        guard created == 0 else {
            context.release()
            throw SystemCallError(code: created)
        }
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
