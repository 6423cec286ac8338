import HammockCore
import HammockJSON
import Testing

/// A loader that queues loads (its plugin said `queuesLoads`): a load's timeout counts from its `started`,
/// not from the send; while it waits in the queue only the generous `queuedLoadAllowance` bounds it.
@Suite struct QueuedLoad {
    func core(_ sources: [SourceDefinition]) -> EngineCore {
        var engine = EngineCore(configuration: Configuration(sources: sources))
        engine.loadTimeoutGrace = .seconds(1)
        engine.queuedLoadAllowance = .seconds(60)
        return engine
    }

    @Test func aQueuedLoadDoesNotTimeOutWhileItWaits() {
        var engine = core([fakeSource("a", timeout: .seconds(2))])
        _ = engine.start(now: at(0))
        #expect(engine.loadQueued(source: "a", loadID: 1, now: at(0)).isEmpty)
        #expect(engine.nextDeadline == at(63), "timeout + grace + the queue's allowance")
        #expect(engine.tick(now: at(30)).isEmpty, "long past the timeout, still waiting its turn")
        _ = engine.loadStarted(source: "a", loadID: 1, now: at(40))
        #expect(engine.nextDeadline == at(43), "the timeout counts from the start")
        let answered = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(42))
        #expect(answered.summaries.first == "source a newData load")
    }

    @Test func aStartedLoadTimesOutAfterItsTimeoutFromTheStart() {
        var engine = core([fakeSource("a", timeout: .seconds(2))])
        _ = engine.start(now: at(0))
        _ = engine.loadQueued(source: "a", loadID: 1, now: at(0))
        _ = engine.loadStarted(source: "a", loadID: 1, now: at(10))
        #expect(engine.tick(now: at(12)).isEmpty)
        let timedOut = engine.tick(now: at(13))
        #expect(timedOut.summaries.prefix(2) == ["cancelLoad a #1", "source a error"])
        #expect(engine.state(of: "a")?.latestError?.message == #"no answer from the "fake" loader within 2s"#)
    }

    @Test func aLoadThatNeverStartsFailsAtTheBackstop() {
        var engine = core([fakeSource("a", timeout: .seconds(2))])
        _ = engine.start(now: at(0))
        _ = engine.loadQueued(source: "a", loadID: 1, now: at(0))
        #expect(engine.tick(now: at(62)).isEmpty)
        let timedOut = engine.tick(now: at(63))
        #expect(timedOut.summaries.prefix(2) == ["cancelLoad a #1", "source a error"])
        let error = engine.state(of: "a")?.latestError
        #expect(error?.code == .timeout)
        #expect(error?.message == #"no answer from the "fake" loader: the load waited in its queue and never started"#)
    }

    @Test func withoutQueuedTheTimeoutCountsFromTheSendAsBefore() {
        var engine = core([fakeSource("a", timeout: .seconds(2))])
        _ = engine.start(now: at(0))
        #expect(engine.nextDeadline == at(3))
        #expect(engine.tick(now: at(3)).summaries.prefix(2) == ["cancelLoad a #1", "source a error"])
    }

    @Test func aStartedWithoutQueuedCountsFromTheStartAndNeverShortens() {
        var engine = core([fakeSource("a", timeout: .seconds(2))])
        _ = engine.start(now: at(0))
        _ = engine.loadStarted(source: "a", loadID: 1, now: at(1))
        #expect(engine.nextDeadline == at(4))
        // A second `started`, or a `queued` after the start, changes nothing.
        _ = engine.loadStarted(source: "a", loadID: 1, now: at(2))
        _ = engine.loadQueued(source: "a", loadID: 1, now: at(2))
        #expect(engine.nextDeadline == at(4))
    }

    @Test func wordsAboutLoadsNoLongerWantedAreIgnored() {
        var engine = core([fakeSource("a", timeout: .seconds(2))])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.loadQueued(source: "a", loadID: 1, now: at(1)).isEmpty)
        #expect(engine.loadStarted(source: "a", loadID: 1, now: at(1)).isEmpty)
        #expect(engine.loadStarted(source: "nope", loadID: 7, now: at(1)).isEmpty)
        #expect(engine.state(of: "a")?.isLoading == false)
    }
}

/// The numbers the README and docs/plugin-protocol.md quote, with the core's defaults (the suite above sets
/// its own): a load unanswered fails 2 s after its timeout; a load that waits in its loader's queue and
/// never starts fails after its timeout, the grace and 5 minutes more.
@Suite struct LoadDeadlineDefaults {
    @Test func anUnansweredLoadFailsTwoSecondsAfterItsTimeout() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a", timeout: .seconds(10))]))
        _ = engine.start(now: at(0))
        #expect(engine.tick(now: at(ms: 11_999)).isEmpty)
        #expect(engine.tick(now: at(12)).summaries.prefix(2) == ["cancelLoad a #1", "source a error"])
        #expect(engine.state(of: "a")?.latestError?.code == .timeout)
    }

    @Test func aQueuedLoadThatNeverStartsFailsFiveMinutesAfterTheTimeoutAndGrace() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a", timeout: .seconds(10))]))
        _ = engine.start(now: at(0))
        _ = engine.loadQueued(source: "a", loadID: 1, now: at(0))
        #expect(engine.tick(now: at(ms: 311_999)).isEmpty, "10 s + 2 s + 300 s")
        #expect(engine.tick(now: at(312)).summaries.prefix(2) == ["cancelLoad a #1", "source a error"])
        #expect(engine.state(of: "a")?.latestError?.message == #"no answer from the "fake" loader: the load waited in its queue and never started"#)
    }
}
