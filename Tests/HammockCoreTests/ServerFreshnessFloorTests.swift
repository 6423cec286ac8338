import HammockCore
import HammockJSON
import Testing

/// What the server says of its answer's freshness (`LoadOutcome.fresh`) is a floor under `refresh` (issue 29).
@Suite struct ServerFreshnessFloorTests {
    func core(_ sources: [SourceDefinition]) -> EngineCore {
        EngineCore(configuration: Configuration(sources: sources), mode: .continuous)
    }

    /// Broken on purpose (the floor not applied in `scheduleNextAttempt`), the poll came at 6 s.
    @Test func aPollComesNoSoonerThanTheServerSaid() {
        var engine = core([fakeSource("a", refresh: .seconds(5))])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .fresh(.newData(1), for: .seconds(60)), now: at(1))
        #expect(engine.nextDeadline == at(61))
        #expect(engine.tick(now: at(60)).isEmpty)
        #expect(engine.tick(now: at(61)).loads.count == 1)
        // A 304 that says so holds the next one back as well.
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .fresh(.notModified, for: .seconds(30)), now: at(62))
        #expect(engine.nextDeadline == at(92))
        // An answer that says nothing: the refresh again.
        _ = engine.tick(now: at(92))
        _ = engine.loadFinished(source: "a", loadID: 3, outcome: .newData(2), now: at(93))
        #expect(engine.nextDeadline == at(98))
    }

    @Test func aShorterFloorThanTheRefreshChangesNothing() {
        var engine = core([fakeSource("a", refresh: .seconds(60))])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .fresh(.newData(1), for: .seconds(10)), now: at(1))
        #expect(engine.nextDeadline == at(61))
    }

    @Test func respectServerFalsePollsAsRefreshSays() {
        var definition = fakeSource("a", refresh: .seconds(5))
        definition.respectsServer = false
        var engine = core([definition])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .fresh(.newData(1), for: .seconds(60)), now: at(1))
        #expect(engine.nextDeadline == at(6))
    }

    @Test func aFloorIsADayAtMost() {
        var engine = core([fakeSource("a", refresh: .seconds(5))])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .fresh(.newData(1), for: .seconds(10_000_000)), now: at(1))
        #expect(engine.nextDeadline == at(1 + 86_400))
    }

    @Test func loadIfNeededKeepsDataTheServerCallsFreshAndAnExplicitLoadGoes() {
        var engine = core([fakeSource("a", expiration: .seconds(30))])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .fresh(.newData(1), for: .seconds(120)), now: at(1))
        // Past its expiration, within what the server said.
        #expect(engine.handle(.loadIfNeeded(.source("a")), now: at(100)).isEmpty)
        #expect(engine.handle(.loadIfNeeded(.source("a")), now: at(122)).loads.count == 1)
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .fresh(.newData(2), for: .seconds(120)), now: at(123))
        // A person's `load` is theirs to ask for.
        #expect(engine.handle(.load(.source("a")), now: at(124)).loads.count == 1)
    }

    @Test func anErrorRetriesAsItsPolicySaysAndAWipeForgetsTheFloor() {
        var engine = core([fakeSource("a", refresh: .seconds(5), retry: .off)])
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .fresh(.newData(1), for: .seconds(60)), now: at(1))
        _ = engine.handle(.wipe(.source("a")), now: at(2))
        _ = engine.handle(.load(.source("a")), now: at(3))
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .newData(2), now: at(4))
        #expect(engine.nextDeadline == at(9))
    }
}

@Suite struct RetryAtTests {
    /// Broken on purpose (retryAt not set in `apply`), the error carried no time.
    @Test func anErrorWithRetryAfterSaysWhenOnItsLine() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a", refresh: .seconds(5))]), mode: .continuous)
        _ = engine.start(now: at(0))
        let error = SourceError(message: "used up", code: SourceError.Code("rateLimited"), retryAfter: .seconds(120))
        let actions = engine.loadFinished(source: "a", loadID: 1, outcome: .error(error), now: at(1))
        let written = actions.states(of: "a").last?.latestError
        #expect(written?.retryAt == at(1).wall + .seconds(120))
        #expect(written?.json["retryAt"]?.stringValue == (at(1).wall + .seconds(120)).rfc3339)
        // An error that says nothing of when: no retryAt.
        _ = engine.tick(now: at(121))
        let plain = engine.loadFinished(source: "a", loadID: 2, outcome: .error(SourceError(message: "down")), now: at(122))
        #expect(plain.states(of: "a").last?.latestError?.retryAt == nil)
    }
}
