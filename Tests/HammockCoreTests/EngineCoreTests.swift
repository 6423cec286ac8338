import HammockCore
import HammockJSON
import Testing

/// The orchestrating state machine, with time driven by hand.
@Suite struct EngineCoreLoading {
    func core(_ sources: [SourceDefinition], views: [ViewDefinition] = [], mode: EngineCore.Mode = .continuous) -> EngineCore {
        EngineCore(configuration: Configuration(sources: sources, views: views), mode: mode)
    }

    @Test func startSaysHelloThenRequestsEverySource() throws {
        var engine = core(
            [fakeSource("a", options: ["content": 1]), fakeSource("b", timeout: .seconds(3))],
            views: [ViewDefinition(id: "v", sources: ["a", "b"])])
        let actions = engine.start(now: at(0))
        #expect(
            actions.summaries == [
                #"hello ["a", "b"] ["v"]"#, "source a requested", "startLoad a #1", "source b requested",
                "startLoad b #2", "view v loading",
            ])
        guard case .emit(.hello(_, _, let version, _)) = actions[0] else { throw Failure("no hello") }
        #expect(version == hammockVersion)
        let requests = actions.loads
        #expect(requests[0].kind == "fake")
        #expect(requests[0].options == ["content": 1])
        #expect(requests[0].timeout == .seconds(10))
        #expect(requests[0].etag == nil)
        #expect(requests[1].timeout == .seconds(3))
        #expect(actions.states(of: "a") == [SourceState(isLoading: true)])
        #expect(engine.state(of: "a") == SourceState(isLoading: true))
        #expect(engine.state(of: "nope") == nil)
        #expect(engine.sourceIDs == ["a", "b"])
    }

    @Test func finishedLoadEmitsNewDataAndTheView() {
        var engine = core([fakeSource("a"), fakeSource("b")], views: [ViewDefinition(id: "v", sources: ["a", "b"])])
        _ = engine.start(now: at(0))
        let first = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(["n": 1]), now: at(1))
        // a has data but b is still loading: with ready: all the view stays "loading", so no view line.
        #expect(first.summaries == ["source a newData load"])
        #expect(first.states(of: "a") == [SourceState(content: ["n": 1], timestamp: at(1))])
        let second = engine.loadFinished(source: "b", loadID: 2, outcome: .newData("B"), now: at(2))
        #expect(second.summaries == ["source b newData load", "view v data"])
        #expect(second.viewStates("v").first?.content == ["a": ["n": 1], "b": "B"])
        #expect(engine.viewState(0).status == .data)
        // The default `timeout` plus the grace is the only thing left on the clock: no refresh, no error.
        #expect(engine.nextDeadline == nil)
    }

    @Test func aLoadAskedForWhileLoadingFollowsTheLoadInFlight() {
        var engine = core([fakeSource("a")])
        _ = engine.start(now: at(0))
        // Nothing to write yet: the source is loading already, and load #1 goes on.
        #expect(engine.handle(.load(.source("a")), now: at(1)).isEmpty)
        let first = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(2))
        #expect(first.summaries == ["source a newData load", "source a requested", "startLoad a #2"])
        #expect(engine.state(of: "a") == SourceState(content: 1, isLoading: true, timestamp: at(2)))
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .notModified, now: at(3))
        #expect(engine.state(of: "a") == SourceState(content: 1, isLoading: false, timestamp: at(3)))
    }

    @Test func aCancelledAnswerIsFollowedByTheLoadAskedForMeanwhile() {
        var engine = core([fakeSource("a", retry: .off)])
        _ = engine.start(now: at(0))
        _ = engine.handle(.load(.source("a")), now: at(1))
        let cancelled = engine.loadFinished(source: "a", loadID: 1, outcome: .cancelled, now: at(2))
        #expect(cancelled.summaries == ["source a requestCancelled", "source a requested", "startLoad a #2"])
        #expect(cancelled.states(of: "a") == [SourceState(), SourceState(isLoading: true)])
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .cancelled, now: at(3))
        #expect(engine.state(of: "a") == SourceState())
    }

    @Test func pushedErrorKeepsContentAndRetriesWhenARetryCanHelp() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a")]), seed: 5)
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData("c"), now: at(1))
        let error = SourceError(message: "the stream's command exited with status 1", exitStatus: 1)
        #expect(engine.pushedError(source: "a", error: error, now: at(2)).summaries == ["source a error"])
        #expect(engine.state(of: "a") == SourceState(content: "c", latestError: error, timestamp: at(2), failures: 1))
        let delay = RetryPolicy.standard.delay(afterFailures: 1, retryAfter: nil, unitRandom: unitRandoms(seed: 5, count: 1)[0])
        #expect(engine.nextDeadline == at(2) + delay)
        #expect(engine.pushedError(source: "nope", error: error, now: at(2)).isEmpty)
    }

    @Test func pushOrigin() {
        var engine = core([fakeSource("a")])
        _ = engine.start(now: at(0))
        #expect(engine.pushed(source: "a", content: "p", now: at(1)).summaries == ["source a newData push"])
        // the load is still in flight
        #expect(engine.state(of: "a")?.isLoading == true)
        #expect(engine.pushed(source: "nope", content: 1, now: at(2)).isEmpty)
    }

    @Test func cachedContentIsShownAtOnceThenLoadedAfresh() {
        var engine = core([fakeSource("a"), fakeSource("b")])
        let actions = engine.start(now: at(0), restored: ["a": "cached"])
        let summaries = actions.summaries
        #expect(summaries.first?.hasPrefix("hello") == true)
        #expect(summaries.dropFirst().first == "source a newData cache")
        #expect(actions.loads.map(\.source) == ["a", "b"])
        #expect(engine.state(of: "a")?.content == "cached")
        #expect(engine.state(of: "a")?.isLoading == true)
    }

    @Test func notModifiedWithoutContentIsAnError() {
        var engine = core([fakeSource("a", retry: .off)])
        _ = engine.start(now: at(0))
        let actions = engine.loadFinished(source: "a", loadID: 1, outcome: .notModified, now: at(1))
        #expect(actions.summaries == ["source a error"])
        #expect(engine.state(of: "a")?.latestError?.code == .notModifiedWithoutContent)
    }

    @Test func etagAndLastModifiedGoWithTheNextLoad() {
        var engine = core([fakeSource("a")])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(
            source: "a", loadID: 1, outcome: .newData(1, etag: "\"e1\"", lastModified: "Sun, 22 Nov 2026 10:00:00 GMT"),
            now: at(1))
        let request = engine.handle(.load(.source("a")), now: at(2)).loads.first
        #expect(request?.etag == "\"e1\"")
        #expect(request?.lastModified == "Sun, 22 Nov 2026 10:00:00 GMT")
        #expect(request?.loadID == 2)
    }
}

@Suite struct EngineCoreTimers {
    func core(_ sources: [SourceDefinition], seed: UInt64 = 0x5EED) -> EngineCore {
        EngineCore(configuration: Configuration(sources: sources), seed: seed)
    }

    /// Three sources polled every second whose loads end 7, 19 and 24 ms past a second come due at one instant, and
    /// stay there: one tick starts all three, as i3blocks's one-second tick runs all its blocks.
    @Test func sourcesWithTheSameRefreshComeDueTogether() {
        var engine = core(["a", "b", "c"].map { fakeSource($0, refresh: .seconds(1)) })
        _ = engine.start(now: at(0))
        for (id, ended): (SourceID, Int64) in [("a", 1_007), ("b", 1_019), ("c", 1_024)] {
            _ = engine.loadFinished(source: id, loadID: ["a": 1, "b": 2, "c": 3][id]!, outcome: .newData(1), now: at(ms: ended))
        }
        // Each is due a second after its load, moved to the nearest 50 ms: 2.0 s for all three.
        #expect(engine.nextDeadline == at(2))
        #expect(engine.tick(now: at(2)).summaries.filter { $0.hasPrefix("startLoad") } == ["startLoad a #4", "startLoad b #5", "startLoad c #6"])
        // Loads that take 12 ms keep them on the grid: the next poll is at 3.0 s, not 3.012 s.
        for (id, loadID): (SourceID, LoadID) in [("a", 4), ("b", 5), ("c", 6)] {
            _ = engine.loadFinished(source: id, loadID: loadID, outcome: .notModified, now: at(ms: 2_012))
        }
        #expect(engine.nextDeadline == at(3))
    }

    @Test func aPollMovesAtMostHalfAGridStep() {
        for interval in [Duration.milliseconds(40), .milliseconds(100), .seconds(1), .seconds(10), .seconds(3600)] {
            let step = min(interval.milliseconds / 20, 250)
            for end in stride(from: Int64(1_000_000), to: 1_000_000 + 2 * step + 3, by: 1) {
                let next = EngineCore.pollInstant(after: MonotonicInstant(milliseconds: end), every: interval)
                #expect(abs(next.milliseconds - (end + interval.milliseconds)) <= step / 2, "\(interval) after \(end)")
                #expect(next.milliseconds % step == 0, "\(interval) after \(end)")
            }
        }
        // Below 40 ms there is no grid, and no instant overflows.
        #expect(EngineCore.pollInstant(after: MonotonicInstant(milliseconds: 1_003), every: .milliseconds(30)).milliseconds == 1_033)
        #expect(EngineCore.pollInstant(after: MonotonicInstant(milliseconds: .max - 5), every: .seconds(1)).milliseconds == .max)
    }

    @Test func refreshPollsAfterEachLoad() {
        var engine = core([fakeSource("a", refresh: .seconds(10))])
        _ = engine.start(now: at(0))
        // While the load is in flight, the only deadline is the engine's own load timeout (10s + 2s grace).
        #expect(engine.nextDeadline == at(12))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.nextDeadline == at(11))
        #expect(engine.tick(now: at(ms: 10_999)).isEmpty)
        #expect(engine.tick(now: at(11)).summaries == ["source a requested", "startLoad a #2"])
        #expect(engine.nextDeadline == at(23))
        #expect(engine.tick(now: at(20)).isEmpty)
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .notModified, now: at(21))
        #expect(engine.nextDeadline == at(31))
    }

    @Test func pollingNeverRunsTwoLoadsAtOnce() {
        // Polls every 2s; every load takes 3s to answer. The next poll is 2s after an answer, never during a load.
        var engine = core([fakeSource("a", refresh: .seconds(2))])
        var inFlight: [(id: LoadID, answerAt: Int64)] = []
        var starts: [Int64] = []
        var maximumInFlight = 0
        func record(_ actions: [EngineAction], _ now: Int64) {
            for request in actions.loads {
                starts.append(now)
                inFlight.append((request.loadID, now + 3000))
            }
            maximumInFlight = max(maximumInFlight, inFlight.count)
        }
        record(engine.start(now: at(0)), 0)
        var now: Int64 = 0
        while now < 30_000 {
            now += 250
            for load in inFlight where load.answerAt <= now {
                inFlight.removeAll { $0.id == load.id }
                record(engine.loadFinished(source: "a", loadID: load.id, outcome: .newData(.number(JSONNumber(Int(now)))), now: at(ms: now)), now)
            }
            if let deadline = engine.nextDeadline, deadline <= at(ms: now) { record(engine.tick(now: at(ms: now)), now) }
        }
        #expect(maximumInFlight == 1)
        #expect(starts == [0, 5000, 10_000, 15_000, 20_000, 25_000, 30_000])
    }

    @Test func automaticRetryAtTheBackoffDelay() {
        let randoms = unitRandoms(seed: 7, count: 2)
        let firstDelay = RetryPolicy.standard.delay(afterFailures: 1, retryAfter: nil, unitRandom: randoms[0])
        let secondDelay = RetryPolicy.standard.delay(afterFailures: 2, retryAfter: nil, unitRandom: randoms[1])
        #expect(firstDelay > .milliseconds(750) && firstDelay <= .seconds(1))
        #expect(secondDelay > .milliseconds(1500) && secondDelay <= .seconds(2))

        var engine = core([fakeSource("a")], seed: 7)
        _ = engine.start(now: at(0))
        let failed = engine.loadFinished(
            source: "a", loadID: 1, outcome: .error(SourceError(message: "down")), now: at(1))
        #expect(failed.summaries == ["source a error"])
        let firstRetry = 1000 + firstDelay.milliseconds
        #expect(engine.nextDeadline == at(ms: firstRetry))
        #expect(engine.tick(now: at(ms: firstRetry - 1)).isEmpty)
        #expect(engine.tick(now: at(ms: firstRetry)).summaries == ["source a requested", "startLoad a #2"])
        let secondFailure = firstRetry + 100
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .error(SourceError(message: "down")), now: at(ms: secondFailure))
        #expect(engine.state(of: "a")?.failures == 2)
        #expect(engine.nextDeadline == at(ms: secondFailure + secondDelay.milliseconds))
        // Success resets the failures; without refresh nothing more is scheduled.
        _ = engine.tick(now: at(ms: secondFailure + secondDelay.milliseconds))
        _ = engine.loadFinished(source: "a", loadID: 3, outcome: .newData(1), now: at(ms: secondFailure + secondDelay.milliseconds))
        #expect(engine.state(of: "a")?.failures == 0)
        #expect(engine.nextDeadline == nil)
    }

    @Test func retryOffDoesNotRetry() {
        var engine = core([fakeSource("a", retry: .off)])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .error(SourceError(message: "down")), now: at(1))
        #expect(engine.nextDeadline == nil)
        #expect(engine.tick(now: at(3600)).isEmpty)
    }

    @Test func retryOffWithRefreshWaitsForTheNextPoll() {
        var engine = core([fakeSource("a", refresh: .seconds(30), retry: .off)])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .error(SourceError(message: "down")), now: at(1))
        #expect(engine.nextDeadline == at(31))
    }

    @Test func retryAfterSetsTheNextAttempt() {
        var engine = core([fakeSource("a", refresh: .seconds(5))])
        _ = engine.start(now: at(0))
        let error = SourceError(message: "slow down", httpStatus: 429, retryAfter: .seconds(120))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .error(error), now: at(1))
        #expect(engine.nextDeadline == at(121))
        #expect(engine.tick(now: at(120)).isEmpty)
        #expect(engine.tick(now: at(121)).loads.count == 1)
    }

    @Test func loadIfNeededJoinsALoadInFlight() {
        var engine = core([fakeSource("a")])
        _ = engine.start(now: at(0))
        #expect(engine.handle(.loadIfNeeded(.source("a")), now: at(ms: 500)).isEmpty)
    }

    @Test func loadIfNeededSkipsFreshDataAndLoadsStaleData() {
        var engine = core([fakeSource("a", expiration: .seconds(30))])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.handle(.loadIfNeeded(.source("a")), now: at(31)).isEmpty)
        #expect(
            engine.handle(.loadIfNeeded(.source("a")), now: at(ms: 31_001)).summaries
                == ["source a requested", "startLoad a #2"])
    }

    @Test func loadIfNeededAfterAnErrorWaitsForTheRetryDelay() {
        let delay = RetryPolicy.standard.delay(afterFailures: 1, retryAfter: nil, unitRandom: unitRandoms(seed: 3, count: 1)[0])
        var engine = core([fakeSource("a", retry: .off)], seed: 3)
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .error(SourceError(message: "x")), now: at(1))
        #expect(engine.handle(.loadIfNeeded(.source("a")), now: at(ms: 1000 + delay.milliseconds)).isEmpty)
        #expect(engine.handle(.loadIfNeeded(.source("a")), now: at(ms: 1000 + delay.milliseconds + 1)).loads.count == 1)
    }

    @Test func explicitLoadAndRetryAlwaysLoadEvenRightAfterAnError() {
        var engine = core([fakeSource("a")])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .error(SourceError(message: "x")), now: at(1))
        #expect(engine.handle(.load(.source("a")), now: at(1)).summaries == ["source a requested", "startLoad a #2"])
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .error(SourceError(message: "x")), now: at(1))
        #expect(engine.handle(.retry(.source("a")), now: at(1)).summaries == ["source a requested", "startLoad a #3"])
        // An explicit load cancels the pending automatic retry: it is the attempt.
        #expect(engine.nextDeadline == at(13))
    }

    @Test func cancelThenIgnoreTheLateAnswer() {
        var engine = core([fakeSource("a")])
        _ = engine.start(now: at(0))
        let cancelled = engine.handle(.cancel(.source("a")), now: at(1))
        #expect(cancelled.summaries == ["cancelLoad a #1", "source a requestCancelled"])
        #expect(cancelled.states(of: "a") == [SourceState()])
        #expect(engine.loadFinished(source: "a", loadID: 1, outcome: .newData("late"), now: at(2)).isEmpty)
        #expect(engine.state(of: "a") == SourceState())
        // Nothing in flight: cancelling again does nothing.
        #expect(engine.handle(.cancel(.source("a")), now: at(3)).isEmpty)
    }

    @Test func aLoaderThatNeverAnswersTimesOutAndKeepsContent() {
        var engine = core([fakeSource("a", timeout: .seconds(5))], seed: 11)
        engine.loadTimeoutGrace = .seconds(1)
        _ = engine.start(now: at(0))
        #expect(engine.nextDeadline == at(6))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData("old"), now: at(1))
        _ = engine.handle(.load(.source("a")), now: at(10))
        #expect(engine.nextDeadline == at(16))
        #expect(engine.tick(now: at(ms: 15_999)).isEmpty)
        let timedOut = engine.tick(now: at(16))
        #expect(timedOut.summaries == ["cancelLoad a #2", "source a error"])
        let error = SourceError(message: #"no answer from the "fake" loader within 5s"#, code: .timeout)
        #expect(engine.state(of: "a") == SourceState(content: "old", latestError: error, timestamp: at(16), failures: 1))
        // The answer that finally comes is no longer wanted, and the automatic retry is scheduled.
        #expect(engine.loadFinished(source: "a", loadID: 2, outcome: .newData("late"), now: at(17)).isEmpty)
        let delay = RetryPolicy.standard.delay(afterFailures: 1, retryAfter: nil, unitRandom: unitRandoms(seed: 11, count: 1)[0])
        #expect(engine.nextDeadline == at(16) + delay)
    }
}

@Suite struct EngineCoreControl {
    func core() -> EngineCore {
        EngineCore(
            configuration: Configuration(
                sources: [fakeSource("a"), fakeSource("b")],
                views: [ViewDefinition(id: "v", sources: ["a", "b"], ready: .any)]))
    }

    @Test func overrideSetsContent() {
        var engine = core()
        _ = engine.start(now: at(0))
        let actions = engine.handle(.override(source: "a", content: ["x": 1]), now: at(1))
        #expect(actions.summaries == ["source a newData override", "view v data"])
        // The load of a is still in flight.
        #expect(engine.state(of: "a") == SourceState(content: ["x": 1], isLoading: true, timestamp: at(1)))
        #expect(actions.viewStates("v").first?.content == ["a": ["x": 1], "b": nil])
    }

    @Test func wipeForgetsContentErrorAndValidators() {
        var engine = core()
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1, etag: "e"), now: at(1))
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .error(SourceError(message: "x")), now: at(1))
        let wiped = engine.handle(.wipe(.view("v")), now: at(2))
        #expect(wiped.summaries == ["source a newData wipe", "source b newData wipe", "view v idle"])
        #expect(engine.state(of: "a") == SourceState())
        #expect(engine.state(of: "b") == SourceState())
        let reload = engine.handle(.loadIfNeeded(.source("a")), now: at(3)).loads
        #expect(reload.count == 1)
        #expect(reload.first?.etag == nil)
    }

    @Test func retryOfAViewLoadsOnlyItsFailingSources() {
        var engine = core()
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .error(SourceError(message: "x")), now: at(1))
        #expect(engine.viewState(0).canTryAgain)
        let retried = engine.handle(.retry(.view("v")), now: at(2))
        #expect(retried.loads.map(\.source) == ["b"])
        // b is still loading from the retry: its load follows that one instead of running beside it.
        #expect(engine.handle(.load(.view("v")), now: at(3)).loads.map(\.source) == ["a"])
    }

    @Test func snapshotWritesEveryStateAgain() {
        var engine = core()
        #expect(engine.snapshot().map(\.summary) == ["source a nil", "source b nil", "view v idle"])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        let actions = engine.handle(.snapshot, now: at(2))
        #expect(actions.summaries == ["source a newData load", "source b requested", "view v data"])
        #expect(actions.states(of: "a") == [SourceState(content: 1, timestamp: at(1))])
        #expect(actions.states(of: "b") == [SourceState(isLoading: true)])
    }

    @Test func unknownSourceOrViewIsAnErrorLineAndChangesNothing() {
        var engine = core()
        _ = engine.start(now: at(0))
        let before = (engine.state(of: "a"), engine.state(of: "b"), engine.nextDeadline)
        #expect(
            engine.handle(.load(.source("c")), now: at(1)).summaries
                == [#"error unknown source "c" (sources: a, b)"#])
        #expect(
            engine.handle(.override(source: "c", content: 1), now: at(1)).summaries
                == [#"error unknown source "c" (sources: a, b)"#])
        #expect(engine.handle(.wipe(.view("w")), now: at(1)).summaries == [#"error unknown view "w" (views: v)"#])
        #expect(engine.handle(.reload, now: at(1)).summaries == ["reload"])
        #expect(engine.state(of: "a") == before.0)
        #expect(engine.state(of: "b") == before.1)
        #expect(engine.nextDeadline == before.2)

        var viewless = EngineCore(configuration: Configuration(sources: [fakeSource("a")]))
        #expect(viewless.handle(.retry(.view("v")), now: at(0)).summaries == [#"error unknown view "v" (views: none)"#])
    }

    @Test func selectPicksTheValueAtThePointer() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a", select: "/data/0/name")]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(["data": [["name": "x"]]]), now: at(1))
        #expect(engine.state(of: "a")?.content == "x")
        _ = engine.handle(.load(.source("a")), now: at(2))
        let missing = engine.loadFinished(source: "a", loadID: 2, outcome: .newData(["data": []]), now: at(3))
        #expect(missing.summaries == ["source a error"])
        let error = SourceError(message: #"select "/data/0/name" matches nothing in the loaded content"#, code: .selectMissing)
        #expect(engine.state(of: "a") == SourceState(content: "x", latestError: error, timestamp: at(3), failures: 1))
        // A push goes through select too.
        _ = engine.pushed(source: "a", content: ["data": [["name": "pushed"]]], now: at(4))
        #expect(engine.state(of: "a")?.content == "pushed")
    }
}

@Suite struct EngineCoreOnce {
    func core(_ sources: [SourceDefinition], deadline: Duration = .seconds(30)) -> EngineCore {
        EngineCore(
            configuration: Configuration(sources: sources, views: [ViewDefinition(id: "v", sources: sources.map(\.id))]),
            mode: .once(deadline: deadline))
    }

    @Test func allLoadedExitsZero() {
        var engine = core([fakeSource("a", refresh: .seconds(1)), fakeSource("b")])
        _ = engine.start(now: at(0))
        #expect(engine.nextDeadline == at(12))
        #expect(engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1)).finishStatus == nil)
        let last = engine.loadFinished(source: "b", loadID: 2, outcome: .newData(2), now: at(2))
        #expect(last.summaries == ["source b newData load", "view v data", "bye once []", "finish 0"])
        #expect(engine.nextDeadline == nil)
        // Finished: nothing more is written, and `refresh` does not poll.
        #expect(engine.handle(.load(.source("a")), now: at(3)).lines.isEmpty)
        #expect(engine.tick(now: at(60)).lines.isEmpty)
    }

    @Test func oneFailedExitsOne() {
        var engine = core([fakeSource("a"), fakeSource("b")])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .error(SourceError(message: "x")), now: at(1))
        // No automatic retry in --once.
        #expect(engine.nextDeadline == at(12))
        let last = engine.loadFinished(source: "b", loadID: 2, outcome: .newData(2), now: at(2))
        #expect(last.summaries == ["source b newData load", "view v error", #"bye once ["a"]"#, "finish 1"])
    }

    @Test func stillLoadingAtTheDeadlineCountsAsFailed() {
        var engine = core([fakeSource("a"), fakeSource("b", timeout: .seconds(60))], deadline: .seconds(30))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.nextDeadline == at(30))
        #expect(engine.tick(now: at(ms: 29_999)).isEmpty)
        let last = engine.tick(now: at(30))
        #expect(last.summaries == [#"bye deadline ["b"]"#, "cancelLoad b #2", "finish 1"])
    }

    @Test func aLoadThatTimesOutFinishesAtOnce() {
        var engine = core([fakeSource("a"), fakeSource("b", timeout: .seconds(1))], deadline: .seconds(30))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.nextDeadline == at(3))
        let last = engine.tick(now: at(3))
        #expect(last.summaries == ["cancelLoad b #2", "source b error", "view v error", #"bye once ["b"]"#, "finish 1"])
    }
}

@Suite struct EngineCoreDependencies {
    static func user(_ url: String = "http://x/{{ post.userId }}") -> SourceDefinition {
        let template = try! Template.parse(url)!
        return fakeSource(
            "user", options: ["url": .string(url), "other": "{{ kept as written }}"],
            templates: [TemplatedOption(pointer: JSONPointer(tokens: ["url"]), template: template, percentEncode: true)])
    }

    @Test func waitsForItsInputThenLoadsAndReloadsOnlyWhenTheUsedValueChanges() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("post"), Self.user()]), templateRules: fakeTemplateRules)
        #expect(engine.start(now: at(0)).summaries == [#"hello ["post", "user"] []"#, "source post requested", "startLoad post #1"])
        #expect(engine.state(of: "user") == SourceState())

        let posted = engine.loadFinished(
            source: "post", loadID: 1, outcome: .newData(["userId": "a b/c", "title": "t1"]), now: at(1))
        #expect(posted.summaries == ["source post newData load", "source user requested", "startLoad user #2"])
        #expect(posted.loads.first?.options == ["url": "http://x/a%20b%2Fc", "other": "{{ kept as written }}"])
        _ = engine.loadFinished(source: "user", loadID: 2, outcome: .newData("U1"), now: at(2))

        // An unrelated part of post changes: user stays as it is.
        _ = engine.handle(.load(.source("post")), now: at(3))
        let retitled = engine.loadFinished(
            source: "post", loadID: 3, outcome: .newData(["userId": "a b/c", "title": "t2"]), now: at(4))
        #expect(retitled.summaries == ["source post newData load"])

        // The used value changes: user reloads with the new value.
        _ = engine.handle(.load(.source("post")), now: at(5))
        let moved = engine.loadFinished(source: "post", loadID: 4, outcome: .newData(["userId": 7]), now: at(6))
        // Another URL is another resource: the old user's content goes before the new one loads.
        #expect(moved.summaries == ["source post newData load", "source user newData wipe", "source user requested", "startLoad user #5"])
        #expect(moved.loads.first?.options["url"] == "http://x/7")

        // It changes again while user is loading: the stale load is cancelled for a new one.
        let again = engine.pushed(source: "post", content: ["userId": 8], now: at(7))
        #expect(
            again.summaries == [
                "source post newData push", "cancelLoad user #5", "source user requestCancelled", "source user requested",
                "startLoad user #6",
            ])
        #expect(engine.loadFinished(source: "user", loadID: 5, outcome: .newData("stale"), now: at(8)).isEmpty)
    }

    @Test func aPathWithNoValueIsAnErrorUntilTheInputChanges() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("post"), Self.user()]), templateRules: fakeTemplateRules)
        _ = engine.start(now: at(0))
        let posted = engine.loadFinished(source: "post", loadID: 1, outcome: .newData(["title": "t"]), now: at(1))
        #expect(posted.summaries == ["source post newData load", "source user error"])
        #expect(engine.state(of: "user")?.latestError?.code == .templateUnresolved)
        #expect(engine.state(of: "user")?.latestError?.message == #"{{ post.userId }} has no value in the content of "post""#)
        // Retrying will not help, so nothing is scheduled.
        #expect(engine.nextDeadline == nil)
        let fixed = engine.pushed(source: "post", content: ["userId": 1], now: at(2))
        #expect(fixed.loads.map(\.source) == ["user"])
        #expect(fixed.loads.first?.options["url"] == "http://x/1")
        _ = engine.loadFinished(source: "user", loadID: 2, outcome: .newData("U1"), now: at(3))
        // The value goes away and comes back unchanged: the source must not stay in error.
        _ = engine.pushed(source: "post", content: ["title": "t"], now: at(4))
        #expect(engine.state(of: "user")?.latestError?.code == .templateUnresolved)
        let back = engine.pushed(source: "post", content: ["userId": 1], now: at(5))
        #expect(back.loads.map(\.source) == ["user"])
        #expect(back.loads.first?.options["url"] == "http://x/1")
    }

    @Test func onceModeLoadsDependentsAfterTheirInputs() {
        var engine = EngineCore(
            configuration: Configuration(sources: [fakeSource("post"), Self.user()]), mode: .once(deadline: .seconds(30)), templateRules: fakeTemplateRules)
        _ = engine.start(now: at(0))
        let posted = engine.loadFinished(source: "post", loadID: 1, outcome: .newData(["userId": 1]), now: at(1))
        #expect(posted.finishStatus == nil)
        let done = engine.loadFinished(source: "user", loadID: 2, outcome: .newData("U"), now: at(2))
        #expect(done.summaries == ["source user newData load", "bye once []", "finish 0"])
    }

    @Test func onceModeDependentOfAFailedInputFails() {
        var engine = EngineCore(
            configuration: Configuration(sources: [fakeSource("post"), Self.user()]), mode: .once(deadline: .seconds(30)), templateRules: fakeTemplateRules)
        _ = engine.start(now: at(0))
        let failed = engine.loadFinished(source: "post", loadID: 1, outcome: .error(SourceError(message: "x")), now: at(1))
        #expect(failed.summaries == ["source post error", "source user error", #"bye once ["post", "user"]"#, "finish 1"])
        #expect(engine.state(of: "user")?.latestError == SourceError(message: #"not loaded: its input "post" has no content"#, code: .inputFailed))
    }
}

extension EngineCoreDependencies {
    static func dependent(_ id: SourceID, on input: SourceID) -> SourceDefinition {
        let text = "{{ \(input).id }}"
        return fakeSource(
            id, options: ["content": .string(text)],
            templates: [TemplatedOption(pointer: JSONPointer(tokens: ["content"]), template: try! Template.parse(text)!, percentEncode: false)])
    }

    @Test func onceModeFailsAWholeChainAtOnceWhateverTheOrder() {
        // c reads b, b reads a; c is declared first, so b only fails after c has been looked at.
        var engine = EngineCore(
            configuration: Configuration(sources: [Self.dependent("c", on: "b"), Self.dependent("b", on: "a"), fakeSource("a")]),
            mode: .once(deadline: .seconds(30)), templateRules: fakeTemplateRules)
        #expect(engine.start(now: at(0)).loads.map(\.source) == ["a"])
        let failed = engine.loadFinished(source: "a", loadID: 1, outcome: .error(SourceError(message: "x")), now: at(1))
        #expect(failed.summaries == ["source a error", "source b error", "source c error", #"bye once ["c", "b", "a"]"#, "finish 1"])
        #expect(engine.state(of: "c")?.latestError?.message == #"not loaded: its input "b" has no content"#)
    }

    @Test func onceModeLoadsAChainInDependencyOrder() {
        var engine = EngineCore(
            configuration: Configuration(sources: [Self.dependent("c", on: "b"), Self.dependent("b", on: "a"), fakeSource("a")]),
            mode: .once(deadline: .seconds(30)), templateRules: fakeTemplateRules)
        _ = engine.start(now: at(0))
        let a = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(["id": 1]), now: at(1))
        #expect(a.loads.map(\.source) == ["b"])
        #expect(a.loads.first?.options == ["content": "1"])
        let b = engine.loadFinished(source: "b", loadID: 2, outcome: .newData(["id": 2]), now: at(2))
        #expect(b.loads.map(\.source) == ["c"])
        let c = engine.loadFinished(source: "c", loadID: 3, outcome: .newData("C"), now: at(3))
        #expect(c.summaries == ["source c newData load", "bye once []", "finish 0"])
    }
}

struct Failure: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

@Suite struct EngineCoreReload {
    @Test func unchangedSourcesKeepStateChangedOnesReloadRemovedOnesGo() {
        let keep = SourceDefinition(id: "keep", kind: "fake", options: ["content": 1])
        let change = SourceDefinition(id: "change", kind: "fake", options: ["content": "old"])
        let drop = SourceDefinition(id: "drop", kind: "shell", options: ["command": ["echo"]])
        var engine = EngineCore(configuration: Configuration(sources: [keep, change, drop], views: [ViewDefinition(id: "v", sources: ["keep"])]), templateRules: fakeTemplateRules)
        let started = engine.start(now: at(ms: 0))
        for request in started.loads {
            _ = engine.loadFinished(
                source: request.source, loadID: request.loadID, outcome: .newData(.string("loaded \(request.source)")),
                now: at(ms: 10))
        }
        var changed = change
        changed.options = ["content": "new"]
        let added = SourceDefinition(id: "added", kind: "fake")
        let next = Configuration(sources: [keep, changed, added], views: [ViewDefinition(id: "v", sources: ["keep"])])
        let actions = engine.reconfigure(next, now: at(ms: 20))

        #expect(actions.summaries.contains("removeSource drop"))
        #expect(actions.summaries.contains("removed source drop"))
        #expect(actions.summaries.contains("reloaded [\"keep\", \"change\", \"added\"] [\"v\"]"))
        #expect(actions.loads.map(\.source) == ["change", "added"])
        #expect(actions.loads.first?.options == ["content": "new"])
        // The changed source's options name another resource: its old content is wiped before it loads
        // again; the unchanged one is untouched.
        #expect(actions.summaries.contains("source change newData wipe"))
        #expect(engine.state(of: "change")?.content == nil)
        #expect(engine.state(of: "change")?.isLoading == true)
        #expect(engine.state(of: "keep")?.isLoading == false)
        #expect(engine.state(of: "drop") == nil)
        // The unchanged view's line did not change, so it is not written again.
        #expect(!actions.summaries.contains { $0.hasPrefix("view v") })
    }

    /// A kind whose plugin the reload replaced: its unchanged sources load again, on the new plugin, and
    /// keep their content meanwhile (the same request, so nothing is wiped); other kinds' are untouched.
    @Test func unchangedSourcesOfAReplacedKindLoadAgainKeepingTheirContent() {
        let shell = SourceDefinition(id: "s", kind: "shell", options: ["command": ["date"]])
        let fake = SourceDefinition(id: "f", kind: "fake", options: ["content": 1])
        let configuration = Configuration(sources: [shell, fake])
        var engine = EngineCore(configuration: configuration)
        for request in engine.start(now: at(ms: 0)).loads {
            _ = engine.loadFinished(
                source: request.source, loadID: request.loadID, outcome: .newData(.string("loaded")), now: at(ms: 10))
        }
        let actions = engine.reconfigure(configuration, replacingKinds: ["shell"], now: at(ms: 20))

        #expect(actions.loads.map(\.source) == ["s"])
        #expect(!actions.summaries.contains { $0.contains("wipe") })
        #expect(engine.state(of: "s")?.content == .string("loaded"))
        #expect(engine.state(of: "s")?.isLoading == true)
        #expect(engine.state(of: "f")?.isLoading == false)
    }
}

/// Issue 10: a different request is a different resource; retry only where it helps; a push cures an
/// error; deadlines on the monotonic clock.
@Suite struct EngineCoreTrust {
    func core(_ sources: [SourceDefinition], seed: UInt64 = 0x5EED) -> EngineCore {
        EngineCore(configuration: Configuration(sources: sources), seed: seed, templateRules: fakeTemplateRules)
    }

    static func user() -> SourceDefinition {
        fakeSource(
            "user", retry: .standard, options: ["url": "http://x/users/{{ who }}"],
            templates: [TemplatedOption(pointer: JSONPointer("/url")!, template: try! Template.parse("http://x/users/{{ who }}")!, percentEncode: true)])
    }

    @Test func anotherURLDropsTheOldContentAndValidatorsBeforeItLoads() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("who"), Self.user()]), templateRules: fakeTemplateRules)
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "who", loadID: 1, outcome: .newData("alice"), now: at(1))
        _ = engine.loadFinished(source: "user", loadID: 2, outcome: .newData(["name": "Alice"], etag: #""all""#), now: at(2))
        // Same URL again: the validator goes with it.
        let same = engine.handle(.load(.source("user")), now: at(3))
        #expect(same.loads.first?.etag == #""all""#)
        _ = engine.loadFinished(source: "user", loadID: 3, outcome: .notModified, now: at(4))

        let switched = engine.handle(.override(source: "who", content: "bob"), now: at(5))
        #expect(switched.summaries == [
            "source who newData override", "source user newData wipe", "source user requested", "startLoad user #4",
        ])
        #expect(switched.loads.first?.options["url"] == "http://x/users/bob")
        #expect(switched.loads.first?.etag == nil, "alice's ETag must not be sent for bob")
        #expect(engine.state(of: "user")?.content == nil)
        // Bob is a 404: the error stands alone, with no alice beside it.
        _ = engine.loadFinished(source: "user", loadID: 4, outcome: .error(SourceError(message: "HTTP 404", httpStatus: 404)), now: at(6))
        #expect(engine.state(of: "user")?.content == nil)
        #expect(engine.state(of: "user")?.latestError?.httpStatus == 404)
    }

    @Test func aMissingTemplatePathWritesOneErrorNotOnePerUnrelatedChange() {
        let dependent = fakeSource(
            "d", options: ["url": "http://x/{{ in.id }}"],
            templates: [TemplatedOption(pointer: JSONPointer("/url")!, template: try! Template.parse("http://x/{{ in.id }}")!, percentEncode: true)])
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("in"), dependent]), templateRules: fakeTemplateRules)
        _ = engine.start(now: at(0))
        #expect(engine.loadFinished(source: "in", loadID: 1, outcome: .newData(["x": 1]), now: at(1)).summaries == ["source in newData load", "source d error"])
        for step in 2...5 {
            let unrelated = engine.handle(.override(source: "in", content: ["x": .number(JSONNumber(step))]), now: at(Int64(step)))
            #expect(unrelated.summaries == ["source in newData override"])
        }
        #expect(engine.state(of: "d")?.failures == 1)
        // The path appears: it loads.
        #expect(engine.handle(.override(source: "in", content: ["id": 7]), now: at(6)).loads.map(\.source) == ["d"])
    }

    @Test func onlyFailuresARetryCanCureAreRetried() {
        var engine = core([fakeSource("a"), fakeSource("b"), fakeSource("c", retry: RetryPolicy(retriesEveryError: true))], seed: 1)
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .error(SourceError(message: "HTTP 404", httpStatus: 404)), now: at(1))
        #expect(engine.nextDeadline != nil, "b and c still loading")
        _ = engine.loadFinished(source: "c", loadID: 3, outcome: .error(SourceError(message: "HTTP 404", httpStatus: 404)), now: at(1))
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .error(SourceError(message: "HTTP 503", httpStatus: 503)), now: at(1))
        // a waits; b (503) and c (retry on any) retry within the first backoff step.
        var retried: [SourceID] = []
        for ms in stride(from: Int64(1000), through: 3000, by: 100) {
            retried += engine.tick(now: at(ms: ms)).loads.map(\.source)
        }
        #expect(retried.sorted() == ["b", "c"])
    }

    @Test func aGoodPushClearsTheFailuresAndCancelsTheRetry() {
        var engine = core([fakeSource("s", refresh: .seconds(60))], seed: 2)
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "s", loadID: 1, outcome: .error(SourceError(message: "exit 1", exitStatus: 1)), now: at(1))
        #expect(engine.nextDeadline! < at(3), "a retry within the first backoff step")
        _ = engine.pushed(source: "s", content: "fine", now: at(2))
        #expect(engine.state(of: "s")?.failures == 0)
        #expect(engine.state(of: "s")?.latestError == nil)
        #expect(engine.nextDeadline == at(62), "only the usual poll is left")
        #expect(engine.tick(now: at(10)).isEmpty)
    }

    @Test func deadlinesFollowTheMonotonicClockAndTimestampsTheWallClock() {
        var engine = core([fakeSource("s", refresh: .seconds(5))])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "s", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.nextDeadline == at(6))
        // The wall clock is stepped back an hour while the monotonic one goes on: the poll is still due at 6 s.
        let stepped = EngineTime(instant: at(6), wall: at(-3594))
        #expect(engine.tick(now: stepped).loads.map(\.source) == ["s"])
        _ = engine.loadFinished(source: "s", loadID: 2, outcome: .newData(2), now: stepped)
        #expect(engine.state(of: "s")?.timestamp == at(-3594), "the timestamp is the wall clock's")
        #expect(engine.nextDeadline == at(11))
    }

    @Test func aClockJumpRefreshesEveryPolledSourceAtOnce() {
        var engine = core([fakeSource("polled", refresh: .seconds(3600)), fakeSource("once")])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "polled", loadID: 1, outcome: .newData(1), now: at(1))
        _ = engine.loadFinished(source: "once", loadID: 2, outcome: .newData(1), now: at(1))
        #expect(engine.clockJumped(now: at(2)).loads.map(\.source) == ["polled"])
        // Never two loads of one source: a second jump while it loads starts nothing.
        #expect(engine.clockJumped(now: at(3)).loads.isEmpty)
    }
}
