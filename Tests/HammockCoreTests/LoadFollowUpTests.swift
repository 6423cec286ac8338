import HammockCore
import HammockJSON
import Testing

/// A source has at most one load in flight: a `load` or `retry` asked for while one runs cancels nothing and
/// becomes one follow-up, started when the load in flight ends, however many were asked for.
@Suite struct LoadFollowUp {
    func core(_ sources: [SourceDefinition], mode: EngineCore.Mode = .continuous) -> EngineCore {
        EngineCore(configuration: Configuration(sources: sources), mode: mode)
    }

    @Test func aFloodOfLoadsForALoadingSourceIsOneFollowUp() {
        var engine = core([fakeSource("a")])
        _ = engine.start(now: at(0))
        for index in 0..<2000 {
            let command: ControlCommand = index.isMultiple(of: 2) ? .load(.source("a")) : .retry(.source("a"))
            #expect(engine.handle(command, now: at(ms: Int64(index))).isEmpty, "load #1 runs: nothing starts, nothing is cancelled")
        }
        let answered = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(3))
        #expect(answered.summaries == ["source a newData load", "source a requested", "startLoad a #2"])
        let followUpAnswered = engine.loadFinished(source: "a", loadID: 2, outcome: .newData(2), now: at(4))
        #expect(followUpAnswered.loads.isEmpty, "one follow-up for any number of loads asked for")
        #expect(engine.state(of: "a") == SourceState(content: 2, timestamp: at(4)))
    }

    @Test func aLoadThatTimesOutIsFollowedByTheLoadAskedForMeanwhile() {
        var engine = core([fakeSource("a", timeout: .seconds(5))])
        engine.loadTimeoutGrace = .seconds(1)
        _ = engine.start(now: at(0))
        _ = engine.handle(.load(.source("a")), now: at(1))
        let timedOut = engine.tick(now: at(6))
        #expect(timedOut.summaries == ["cancelLoad a #1", "source a error", "source a requested", "startLoad a #2"])
    }

    @Test func cancelDropsTheFollowUp() {
        var engine = core([fakeSource("a")])
        _ = engine.start(now: at(0))
        _ = engine.handle(.load(.source("a")), now: at(1))
        #expect(engine.handle(.cancel(.source("a")), now: at(2)).summaries == ["cancelLoad a #1", "source a requestCancelled"])
        // The late answer is not wanted, and nothing follows it.
        #expect(engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(3)).isEmpty)
        #expect(engine.state(of: "a")?.isLoading == false)
    }

    @Test func withOnceAFollowUpIsWaitedForBeforeTheEnd() {
        var engine = core([fakeSource("a")], mode: .once(deadline: .seconds(30)))
        _ = engine.start(now: at(0))
        _ = engine.handle(.load(.source("a")), now: at(1))
        let first = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(2))
        #expect(!first.summaries.contains { $0.hasPrefix("finish") }, "the follow-up still runs: \(first.summaries)")
        let last = engine.loadFinished(source: "a", loadID: 2, outcome: .newData(2), now: at(3))
        #expect(last.summaries.suffix(2) == ["bye once []", "finish 0"])
    }
}
