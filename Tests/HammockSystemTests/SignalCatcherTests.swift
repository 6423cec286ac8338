import Dispatch
import Glibc
import HammockSystem
import Synchronization
import Testing

/// `SignalCatcher` with real signals sent to this process. SIGWINCH and SIGURG: ignored by default, so one
/// that reached the test process outside these tests would change nothing.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct SignalCatcherTests {
    @Test("a signal sent right after it is caught is delivered, each number to its own taker, in order")
    func caughtAtOnceAndDeliveredInOrder() {
        let received = Mutex<[String]>([])
        let arrived = DispatchSemaphore(value: 0)
        SignalCatcher.catchSignals([SIGWINCH]) { number in
            received.withLock { $0.append("winch \(number)") }
            arrived.signal()
        }
        SignalCatcher.catchSignals([SIGURG]) { number in
            received.withLock { $0.append("urg \(number)") }
            arrived.signal()
        }
        // No pause: the handler is in place when `catchSignals` returns.
        kill(getpid(), SIGWINCH)
        #expect(arrived.wait(timeout: .now() + 10) == .success)
        kill(getpid(), SIGURG)
        #expect(arrived.wait(timeout: .now() + 10) == .success)
        #expect(received.withLock { $0 } == ["winch \(SIGWINCH)", "urg \(SIGURG)"])
    }

    @Test("a later catch of the same signal takes it over")
    func laterCatchReplaces() {
        let first = Atomic<Int>(0)
        let arrived = DispatchSemaphore(value: 0)
        SignalCatcher.catchSignals([SIGWINCH]) { _ in first.add(1, ordering: .relaxed) }
        SignalCatcher.catchSignals([SIGWINCH]) { _ in arrived.signal() }
        kill(getpid(), SIGWINCH)
        #expect(arrived.wait(timeout: .now() + 10) == .success)
        #expect(first.load(ordering: .relaxed) == 0)
    }
}
