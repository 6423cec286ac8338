import Glibc
import HammockCore
import Testing

@testable import HammockEngine

/// The stop's decisions, without a process: the order of its steps, how long the writer drains, and the exit
/// status with what stderr says (before issue 26 these lived in `Engine.finishOutput` and were seen only by
/// starting `hammock` with a consumer that leaves, a deadline, or a signal).
@Suite("Engine stop")
struct EngineStopTests {
    typealias Ending = EngineStop.Ending

    @Test("the steps: controls close, plugins end before the orphan sweep and the cache, bye next to last, the drain last")
    func order() {
        let steps = EngineStop.steps
        func index(_ step: EngineStop.Step) -> Int { steps.firstIndex(of: step)! }
        #expect(steps.first == .closeControls)
        #expect(steps.last == .finishOutput)
        #expect(index(.rerouteSignals) < index(.shutDownPlugins), "a second signal during the plugins' grace ends the wait")
        #expect(index(.endClickCommands) < index(.shutDownPlugins))
        #expect(index(.shutDownPlugins) < index(.waitForWork), "the shutdown ends the reload steps' waits on plugins")
        #expect(index(.waitForWork) < index(.sweepOrphans))
        #expect(index(.sweepOrphans) < index(.finishCache))
        #expect(index(.finishCache) < index(.bye), "nothing runs any more when bye is written")
        #expect(index(.logStopping) < index(.bye))
        #expect(index(.bye) == steps.count - 2)
        #expect(Set(steps).count == EngineStop.Step.allCases.count, "each step once")
    }

    @Test("--once that got to its end drains until its deadline; every other stop for the drain timeout")
    func drain() {
        #expect(EngineStop.drain(isFinished: true) == .untilOnceOutputDeadline)
        #expect(EngineStop.drain(isFinished: false) == .drainTimeout)
    }

    @Test("continuous mode exits 0 however it stopped; an unread stdout is noted unless the consumer closed it")
    func continuous() {
        for reason in [StopReason.signal, .interrupt, .quit] {
            let ending = Ending(once: false, isFinished: false, completion: .complete, stopReason: reason, stopSignal: SIGTERM)
            #expect(EngineStop.verdict(ending).status == 0)
            #expect(EngineStop.verdict(ending).records.isEmpty)
        }
        let unread = EngineStop.verdict(
            Ending(once: false, isFinished: false, completion: .incomplete(unwritten: 3), stopReason: .signal, stopSignal: SIGTERM))
        #expect(unread.status == 0)
        #expect(unread.records == [.init(level: .notice, message: "stdout was not read within 2s of the stop: the last lines and bye were not written")])
        let closed = EngineStop.verdict(
            Ending(once: false, isFinished: false, completion: .incomplete(unwritten: 3), stopReason: .stdoutClosed))
        #expect(closed.status == 0)
        #expect(closed.records.isEmpty, "a consumer that left is not told it did not read")
    }

    @Test("--once done: its own status when every line was read, else 1 (deadline or closed stdout), or 128 + the signal")
    func onceFinished() {
        func verdict(_ completion: OutputWriter.Completion, passed: Bool = false, signal: Int32? = nil) -> (status: Int32, records: [EngineStop.Record]) {
            EngineStop.verdict(
                Ending(once: true, isFinished: true, finishedStatus: 1, completion: completion, stopSignal: signal, outputDeadlinePassed: passed))
        }
        #expect(verdict(.complete).status == 1, "the core's status (a source failed) when every line was written")
        #expect(verdict(.complete).records.isEmpty)
        let late = verdict(.incomplete(unwritten: 4), passed: true)
        #expect(late.status == 1)
        #expect(late.records.map(\.message) == ["stdout was not read before --once's deadline (30s, and 2s to write): 4 lines not written, bye included"])
        let left = verdict(.incomplete(unwritten: 2))
        #expect(left.status == 1)
        #expect(left.records.map(\.message) == ["stdout was closed before --once had written every line: 2 not written, bye included"])
        #expect(verdict(.interrupted, signal: SIGINT).status == 128 + SIGINT)
        #expect(verdict(.interrupted).status == 128 + SIGTERM, "no signal recorded: SIGTERM's status")
        #expect(verdict(.interrupted, signal: SIGINT).records.map(\.level) == [.error])
    }

    @Test("--once stopped before its end: 128 + the signal, or 1 for a closed stdout; never 0")
    func onceCutShort() {
        let signalled = EngineStop.verdict(
            Ending(once: true, isFinished: false, completion: .complete, stopReason: .signal, stopSignal: SIGTERM))
        #expect(signalled.status == 128 + SIGTERM)
        #expect(signalled.records.map(\.message) == ["--once was stopped by signal 15 before every source was loaded"])
        let closed = EngineStop.verdict(
            Ending(once: true, isFinished: false, completion: .incomplete(unwritten: 1), stopReason: .stdoutClosed))
        #expect(closed.status == 1)
        #expect(closed.records.map(\.message) == ["stdout was closed before --once was done"])
    }
}
