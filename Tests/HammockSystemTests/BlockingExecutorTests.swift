import Dispatch
import Glibc
import HammockSystem
import HammockTestSupport
import Synchronization
import Testing

/// `BlockingExecutor` and `LockedCondition` with real threads.
@Suite(.timeLimit(.minutes(1)))
struct BlockingExecutorTests {
    @Test("many calls, from many tasks at once, run one after another on one thread")
    func oneThreadForManyCalls() async {
        let executor = BlockingExecutor(name: "test.blocking")
        let threads = await withTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask { await executor.run { currentThreadID() } }
            }
            var threads = Set<String>()
            for await thread in group { threads.insert(thread) }
            return threads
        }
        #expect(threads.count == 1)
    }

    @Test("jobs run in the order they were handed over")
    func jobsKeepTheirOrder() async {
        let executor = BlockingExecutor(name: "test.blocking")
        let order = Mutex<[Int]>([])
        for index in 0..<200 { executor.submit { order.withLock { $0.append(index) } } }
        await executor.run {}
        #expect(order.withLock { $0 } == Array(0..<200))
    }

    @Test("the thread ends once the executor is gone and its last job has run")
    func threadEndsWithTheExecutor() async throws {
        var executor: BlockingExecutor? = BlockingExecutor(name: "test.blocking")
        let thread = await executor!.run { currentThreadID() }
        #expect(access("/proc/self/task/\(thread)", F_OK) == 0)
        executor = nil
        let deadline = ContinuousClock.now + .seconds(10)
        while access("/proc/self/task/\(thread)", F_OK) == 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(access("/proc/self/task/\(thread)", F_OK) != 0, "thread \(thread) still runs")
    }

    // The sleeps below block their thread: a thread of their own (`onOwnThread`), not one of the cooperative
    // pool's two, which every test of the run shares.

    @Test("a condition's sleeper wakes when another thread makes its state ready")
    func conditionWakesWhenReady() async throws {
        let condition = LockedCondition(0)
        let done = DispatchSemaphore(value: 0)
        OwnThread.start(named: "test.setter") {
            usleep(50_000)
            condition.withLock { $0 = 7 }
            condition.broadcast()
            done.signal()
        }
        let value = try await onOwnThread("the sleeper's wake-up") { () -> Int in
            let value = condition.withLock(when: { $0 != 0 }) { $0 }
            _ = done.wait(timeout: .now() + 10)
            return value
        }
        #expect(value == 7)
    }

    @Test("a timed sleep lasts until its monotonic deadline, no less, and says the state is not ready")
    func timedWaitEndsAtItsDeadline() async throws {
        let condition = LockedCondition(false)
        let (ready, waited) = try await onOwnThread("the timed sleep") { () -> (Bool, Duration) in
            let start = ContinuousClock.now
            let ready = condition.withLock(when: { $0 }, before: .after(.milliseconds(200))) { _, ready in ready }
            return (ready, ContinuousClock.now - start)
        }
        #expect(!ready)
        #expect(waited >= .milliseconds(190) && waited < .seconds(10), "waited \(waited)")
    }

    /// As the stdout writer's wait for its next bar refresh (none while paused) and `finish`'s for a
    /// line's grace: the deadline is asked of the state again after each wake-up.
    @Test("a sleep without a deadline ends at the one the state gives it later, not ready")
    func aDeadlineThatTheStateGivesLaterEndsTheSleep() async throws {
        struct State {
            var isReady = false
            var deadline: MonotonicDeadline?
        }
        let condition = LockedCondition(State())
        let done = DispatchSemaphore(value: 0)
        OwnThread.start(named: "test.setter") {
            usleep(50_000)
            condition.withLock { $0.deadline = .after(.milliseconds(100)) }
            condition.broadcast()
            done.signal()
        }
        let (ready, waited) = try await onOwnThread("the sleep given a deadline later") { () -> (Bool, Duration) in
            let start = ContinuousClock.now
            let ready = condition.withLock(when: \.isReady, before: \.deadline) { _, ready in ready }
            let waited = ContinuousClock.now - start
            _ = done.wait(timeout: .now() + 10)
            return (ready, waited)
        }
        #expect(!ready)
        #expect(waited >= .milliseconds(140) && waited < .seconds(10), "waited \(waited)")
    }
}

/// The kernel's id of the calling thread, from /proc/thread-self (→ "PID/task/TID").
private func currentThreadID() -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    let count = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard count > 0 else { return "?" }
    let link = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return String(link.split(separator: "/").last ?? "?")
}
