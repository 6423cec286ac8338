import NIOCore

/// Runs the jobs of a task that prefers it on one SwiftNIO event loop, the thread that the plugin's HTTP
/// client (`HTTP1Client`) answers on: a load's request, its answer and the parsing of it stay on that thread
/// instead of hopping to the concurrency pool and back at every `await` (each hop a thread switch in the
/// kernel).
///
/// SwiftNIO (2.101) offers an event loop as a `SerialExecutor` only, which a task cannot prefer; this is the
/// few lines that make it a `TaskExecutor`.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
