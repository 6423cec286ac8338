import HammockCore
import HammockJSON
import Testing

/// What the core decides that the runtime used to work out for itself: what the offline cache keeps, the
/// last `bye`, and that a reload is the runtime's to do.
@Suite struct EngineCoreDecisions {
    func cached(_ id: SourceID, options: JSONObject = [:]) -> SourceDefinition {
        var source = fakeSource(id, options: options)
        source.cache = true
        return source
    }

    @Test func aCachedSourceIsPersistedWithEveryNewContentAndForgottenOnWipe() {
        var engine = EngineCore(configuration: Configuration(sources: [cached("a"), fakeSource("b")]))
        #expect(engine.cachedSourceIDs == ["a"])
        _ = engine.start(now: at(0))
        #expect(
            engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1)).summaries
                == ["source a newData load", "persist a"])
        let persisted = engine.handle(.override(source: "a", content: 2), now: at(2)).compactMap { action in
            if case .persist("a", let content) = action { content } else { nil }
        }
        #expect(persisted == [2])
        #expect(engine.pushed(source: "a", content: 3, now: at(3)).summaries == ["source a newData push", "persist a"])
        #expect(engine.handle(.wipe(.source("a")), now: at(4)).summaries == ["source a newData wipe", "persist a nil"])
        // An error keeps the content, and the cache keeps it too: nothing to write.
        _ = engine.handle(.load(.source("a")), now: at(5))
        #expect(
            !engine.loadFinished(source: "a", loadID: 3, outcome: .error(SourceError(message: "down")), now: at(6))
                .summaries.contains { $0.hasPrefix("persist") })
        // Not cached: never persisted.
        #expect(engine.loadFinished(source: "b", loadID: 2, outcome: .newData(1), now: at(7)).summaries == ["source b newData load"])
    }

    @Test func contentRestoredFromTheCacheIsNotWrittenBack() {
        var engine = EngineCore(configuration: Configuration(sources: [cached("a")]))
        let actions = engine.start(now: at(0), restored: ["a": "kept"])
        #expect(actions.summaries.contains("source a newData cache"))
        #expect(!actions.summaries.contains { $0.hasPrefix("persist") })
    }

    @Test func stopSaysByeOnceAndNothingFollows() {
        var engine = EngineCore(configuration: Configuration(sources: [cached("a")]))
        _ = engine.start(now: at(0))
        #expect(engine.stop(reason: .signal).summaries == ["bye signal []"])
        #expect(engine.stop(reason: .interrupt).isEmpty)
        // An answer after the stop writes (and persists) nothing, and no timer is armed.
        #expect(engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1)).isEmpty)
        #expect(engine.nextDeadline == nil)
    }

    @Test func afterOnceHasSaidByeStopSaysNothing() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a")]), mode: .once(deadline: .seconds(30)))
        _ = engine.start(now: at(0))
        #expect(
            engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1)).summaries
                == ["source a newData load", "bye once []", "finish 0"])
        #expect(engine.stop(reason: .signal).isEmpty)
    }

    @Test func reloadIsAnActionForTheRuntimeAndChangesNothing() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a")]))
        _ = engine.start(now: at(0))
        let before = (engine.state(of: "a"), engine.nextDeadline)
        #expect(engine.handle(.reload, now: at(1)).summaries == ["reload"])
        #expect(engine.state(of: "a") == before.0)
        #expect(engine.nextDeadline == before.1)
    }
}
