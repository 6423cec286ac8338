import Glibc
import HammockSystem
import Testing

@testable import HammockEngine
@testable import HammockPluginHost

@Suite struct ProcessControlTests {
    @Test func aKilledChildIsReapedAsItDiesAndALiveOneIsNotWaitedPastTheDeadline() throws {
        var pid: pid_t = 0
        let arguments = ["/bin/sleep", "30"]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        #expect(posix_spawn(&pid, "/bin/sleep", nil, nil, &argv, environ) == 0)
        #expect(!reapChild(pid, within: .milliseconds(50)))
        let stat = try #require(ProcessStat(pid: pid))
        #expect(stat.parent == getpid() && stat.state != "Z")
        kill(pid, SIGKILL)
        let start = ContinuousClock.now
        #expect(reapChild(pid, within: .seconds(30)))
        #expect(ContinuousClock.now - start < .seconds(20))
        #expect(ProcessStat(pid: pid) == nil)
        // Not a child (any more): no wait, no success.
        #expect(!reapChild(pid, within: .seconds(30)))
    }
}

/// The engine's clock calls it a jump (and every polled source loads at once) when a check finds the
/// clocks' offsets moved by more than 5 s: a suspend (boot time runs on, the monotonic clock does not) or a
/// step of the wall clock. The clocks' readings are passed in, as the clock's thread reads them.
@Suite struct ClockJumps {
    /// Readings 2 s apart on the monotonic clock (the check interval), the boot clock `suspended` ms more
    /// and the wall clock `stepped` ms more.
    func jumped(suspended: Int64, stepped: Int64 = 0) -> Bool {
        let before = ClockOffsets(monotonic: 50_000, realtime: 1_795_341_600_000, boot: 51_000)
        let after = ClockOffsets(monotonic: 52_000, realtime: 1_795_341_602_000 + stepped, boot: 53_000 + suspended)
        return after.differs(from: before)
    }

    @Test func aSuspendOfMoreThanFiveSecondsIsAJump() {
        #expect(jumped(suspended: 5_001))
        #expect(jumped(suspended: 3_600_000))
        #expect(!jumped(suspended: 5_000))
        #expect(!jumped(suspended: 4_999))
        #expect(!jumped(suspended: 0))
    }

    @Test func aWallClockStepOfMoreThanFiveSecondsEitherWayIsAJump() {
        #expect(jumped(suspended: 0, stepped: 5_001))
        #expect(jumped(suspended: 0, stepped: -5_001))
        #expect(!jumped(suspended: 0, stepped: 5_000))
        #expect(!jumped(suspended: 0, stepped: -300))
    }
}
