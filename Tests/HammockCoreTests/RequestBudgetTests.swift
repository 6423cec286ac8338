import HammockCore
import HammockJSON
import Testing

/// Whether no window of `per` holds more than `requests` of `starts` (sorted): the budget's guarantee.
/// Every (requests + 1)th start after a start must be `per` or more after it.
func staysWithin(_ starts: [MonotonicInstant], requests: Int, per: Duration) -> Bool {
    guard starts.count > requests else { return true }
    return (0..<(starts.count - requests)).allSatisfy { starts[$0 + requests] - starts[$0] >= per }
}

/// The sliding-window log itself: exact counting, bounds, new numbers, and the queue's order.
@Suite struct RequestBudgetTests {
    @Test func admitsNInABurstThenTheNextWhenTheOldestLeavesTheWindow() {
        var budget = RequestBudget(limit: BudgetLimit(requests: 2, per: .seconds(1)))
        #expect(budget.admits(at: at(0)))
        budget.record(at(0))
        #expect(budget.admits(at: at(0)))
        budget.record(at(0))
        #expect(!budget.admits(at: at(0)))
        #expect(!budget.admits(at: at(ms: 999)))
        #expect(budget.nextStart(now: at(ms: 500)) == at(ms: 1000))
        #expect(budget.admits(at: at(ms: 1000)))
        budget.record(at(ms: 1000))
        // The second start at 0 still counts until 1000 as well: one more fits there, then none before 2000.
        #expect(budget.admits(at: at(ms: 1000)))
        budget.record(at(ms: 1000))
        #expect(budget.nextStart(now: at(ms: 1000)) == at(ms: 2000))
        #expect(budget.countedStarts == 2)
    }

    @Test func greedyStartsEveryMillisecondNeverPutNPlusOneInAWindow() {
        for (requests, per) in [(1, 1000), (2, 1000), (3, 250), (7, 1000), (5, 1)] as [(Int, Int64)] {
            var budget = RequestBudget(limit: BudgetLimit(requests: requests, per: .milliseconds(per)))
            var starts: [MonotonicInstant] = []
            // Asking at every millisecond (once more than the budget's number each time) for 5 s: as many starts as the budget gives.
            for ms in Int64(0)..<5000 {
                for _ in 0...requests where budget.admits(at: at(ms: ms)) {
                    budget.record(at(ms: ms))
                    starts.append(at(ms: ms))
                }
            }
            #expect(staysWithin(starts, requests: requests, per: .milliseconds(per)), "\(requests) per \(per) ms")
            // And it gives that many: requests in each window, no fewer (the log is not a leaky bucket).
            #expect(starts.count == requests * Int((5000 + per - 1) / per), "\(requests) per \(per) ms")
        }
    }

    @Test func oneRequestPerDay() {
        let day = BudgetLimit.longestPer
        var budget = RequestBudget(limit: BudgetLimit(requests: 1, per: day))
        budget.record(at(0))
        #expect(budget.nextStart(now: at(3600)) == at(86_400))
        #expect(!budget.admits(at: at(ms: 86_400_000 - 1)))
        #expect(budget.admits(at: at(86_400)))
    }

    @Test func aMillionRequestsAtTheBoundKeepsAMillionInstantsAndNoMore() {
        var budget = RequestBudget(limit: BudgetLimit(requests: BudgetLimit.maximumRequests, per: BudgetLimit.longestPer))
        for _ in 0..<BudgetLimit.maximumRequests { budget.record(at(0)) }
        #expect(budget.countedStarts == BudgetLimit.maximumRequests)
        #expect(!budget.admits(at: at(86_399)))
        #expect(budget.nextStart(now: at(1)) == at(86_400))
        budget.record(at(86_400))
        #expect(budget.countedStarts == BudgetLimit.maximumRequests)
        #expect(budget.admits(at: at(86_400)))
    }

    @Test func newNumbersKeepTheStartsAlreadyCounted() {
        var budget = RequestBudget(limit: BudgetLimit(requests: 3, per: .seconds(10)))
        for ms: Int64 in [0, 1000, 2000] { budget.record(at(ms: ms)) }
        budget.change(to: BudgetLimit(requests: 2, per: .seconds(10)))
        // The newest two (1 s and 2 s) decide: the next start at 11 s.
        #expect(budget.nextStart(now: at(3)) == at(11))
        budget.change(to: BudgetLimit(requests: 4, per: .seconds(10)))
        // Two counted of four: two more now, then the oldest kept (1 s) frees at 11 s.
        #expect(budget.admits(at: at(3)))
        budget.record(at(3))
        budget.record(at(3))
        #expect(budget.nextStart(now: at(3)) == at(11))
    }

    @Test func pollsThatComeDueTogetherStartLeastRecentlyServedFirst() {
        var budget = RequestBudget(limit: BudgetLimit(requests: 1, per: .seconds(1)))
        budget.record(at(0), of: "a")
        budget.record(at(1), of: "c")
        budget.record(at(2), of: "b")
        // Queued in the configuration's order at one tick: c and a served before b, a longest ago.
        budget.enqueue("a", priority: .background)
        budget.enqueue("b", priority: .background)
        budget.enqueue("c", priority: .background)
        budget.enqueue("new", priority: .background)
        #expect(budget.queue == ["new", "a", "c", "b"])
        // A reload that takes a source away forgets its turn: back, it counts as never served.
        budget.forget("b")
        budget.enqueue("b", priority: .background)
        #expect(budget.queue == ["new", "b", "a", "c"])
    }

    @Test func theQueueHoldsASourceOnceAndPutsAPersonsAskFirst() {
        var budget = RequestBudget(limit: BudgetLimit(requests: 1, per: .seconds(1)))
        budget.enqueue("a", priority: .background)
        budget.enqueue("b", priority: .background)
        budget.enqueue("a", priority: .background)
        budget.enqueue("c", priority: .asked)
        budget.enqueue("b", priority: .asked)
        budget.enqueue("c", priority: .background)
        #expect(budget.queue == ["c", "b", "a"])
        let removed = budget.remove("b")
        let removedAgain = budget.remove("b")
        #expect(removed && !removedAgain)
        let first = budget.dequeue()
        #expect(first?.source == "c" && first?.priority == .asked)
        let second = budget.dequeue()
        #expect(second?.source == "a" && second?.priority == .background)
        #expect(budget.dequeue() == nil)
    }
}

/// Shared budgets in the engine's core (`limits:`, `limit:`), driven with the time passed in.
@Suite struct SharedBudgetTests {
    static func limited(_ id: SourceID, refresh: Duration? = nil, budget: BudgetName? = "shared") -> SourceDefinition {
        var definition = fakeSource(id, refresh: refresh)
        definition.limit = budget
        return definition
    }

    static func configuration(_ sources: [SourceDefinition], requests: Int, per: Duration) -> Configuration {
        Configuration(sources: sources, budgets: ["shared": BudgetLimit(requests: requests, per: per)])
    }

    /// Runs `engine` until `end` (ms after t0): each load answers at once with data, every deadline is
    /// ticked when it comes. Returns each load's start, by source, in order.
    static func run(
        _ engine: inout EngineCore, from start: Int64 = 0, until end: Int64, answerAfter delay: Int64 = 0,
        starting actions: [EngineAction] = []
    ) -> [(source: SourceID, at: MonotonicInstant)] {
        var starts: [(source: SourceID, at: MonotonicInstant)] = []
        var pending: [(request: LoadRequest, at: Int64)] = []
        func take(_ actions: [EngineAction], now: Int64) {
            for request in actions.loads {
                starts.append((request.source, at(ms: now)))
                pending.append((request, now + delay))
            }
        }
        take(actions, now: start)
        var now = start
        while true {
            let deadline = engine.nextDeadline.map { $0.milliseconds - m0.milliseconds }
            let answer = pending.map(\.at).min()
            guard let next = [deadline, answer].compactMap({ $0 }).min(), next <= end else { break }
            now = max(now, next)
            if let index = pending.firstIndex(where: { $0.at <= now }) {
                let (request, _) = pending.remove(at: index)
                take(
                    engine.loadFinished(
                        source: request.source, loadID: request.loadID, outcome: .newData(.number(1)), now: at(ms: now)),
                    now: now)
            } else {
                take(engine.tick(now: at(ms: now)), now: now)
            }
        }
        return starts
    }

    @Test func threeSourcesPolledEvery100msShareTwoStartsPerSecond() {
        var engine = EngineCore(
            configuration: Self.configuration(
                ["a", "b", "c"].map { Self.limited($0, refresh: .milliseconds(100)) }, requests: 2, per: .seconds(1)))
        let first = engine.start(now: at(0))
        // Two start, the third waits for the budget: not loading, no `requested` line.
        #expect(first.loads.map(\.source) == ["a", "b"])
        #expect(!first.summaries.contains("source c requested"))
        #expect(engine.state(of: "c")?.isLoading == false)
        #expect(engine.isQueuedForBudget("c"))
        #expect(engine.nextDeadline == at(ms: 1000))
        let starts = Self.run(&engine, until: 30_000, answerAfter: 20, starting: first)
        #expect(staysWithin(starts.map(\.at), requests: 2, per: .seconds(1)))
        // Round robin: in 30 s of 2 per second, each of the three gets a third of the ~60 starts. (Before the
        // queue ordered polls that came due together by their last turn, a, first in the file, won every
        // tie: 31 starts against 16 and 15.)
        for id: SourceID in ["a", "b", "c"] {
            let count = starts.filter { $0.source == id }.count
            #expect((19...21).contains(count), "\(id) started \(count) times")
        }
        // At most 2 in each of the 31 windows [0 s, 1 s) … [30 s, 31 s) the run touches; the log lets no fewer
        // through than the starts the sources ask for, which are always more.
        #expect((58...62).contains(starts.count))
    }

    @Test func aSlowPollerGetsItsTurnBesideAFastOne() {
        // a polls every 100 ms, b every 10 s, both on one start a second: b is never starved.
        var engine = EngineCore(
            configuration: Self.configuration(
                [Self.limited("a", refresh: .milliseconds(100)), Self.limited("b", refresh: .seconds(10))],
                requests: 1, per: .seconds(1)))
        let first = engine.start(now: at(0))
        let starts = Self.run(&engine, until: 60_000, starting: first)
        #expect(staysWithin(starts.map(\.at), requests: 1, per: .seconds(1)))
        let b = starts.filter { $0.source == "b" }.map(\.at)
        // b starts at 1 s (a took 0), then about every 10 s plus at most one turn behind a.
        #expect(b.count >= 6)
        for (earlier, later) in zip(b, b.dropFirst()) { #expect(later - earlier <= .seconds(12)) }
        #expect(starts.filter { $0.source == "a" }.count >= 50)
    }

    @Test func aPersonsLoadGoesAheadOfPollsAndIsAcknowledgedWhileItWaits() {
        var engine = EngineCore(
            configuration: Self.configuration(
                [Self.limited("a", refresh: .seconds(1)), Self.limited("b", refresh: .seconds(1)), Self.limited("c")],
                requests: 1, per: .seconds(10)))
        #expect(engine.start(now: at(0)).loads.map(\.source) == ["a"])
        #expect(engine.budget("shared")?.queue == ["b", "c"])
        let asked = engine.handle(.load(.source("c")), replyingTo: [.number(1)], now: at(1))
        // The ack comes at once; c's `requested` line only when it starts.
        #expect(asked.summaries == ["ack 1"])
        #expect(engine.budget("shared")?.queue == ["c", "b"])
        #expect(engine.tick(now: at(ms: 9999)).loads.isEmpty)
        let turn = engine.tick(now: at(10))
        #expect(turn.loads.map(\.source) == ["c"])
        #expect(turn.summaries.contains("source c requested"))
        #expect(engine.tick(now: at(20)).loads.map(\.source) == ["b"])
    }

    @Test func aWipeACancelAndNobodyWatchingTakeASourceOutOfTheQueue() {
        let sources = ["a", "b", "c", "d"].map { Self.limited(SourceID($0), refresh: .seconds(5)) }
        var engine = EngineCore(
            configuration: Self.configuration(sources, requests: 1, per: .seconds(10)),
            demand: .subscribed(sources: ["a", "b", "c", "d"], views: []))
        #expect(engine.start(now: at(0)).loads.map(\.source) == ["a"])
        #expect(engine.budget("shared")?.queue == ["b", "c", "d"])
        _ = engine.handle(.wipe(.source("b")), now: at(1))
        _ = engine.handle(.cancel(.source("c")), now: at(1))
        #expect(engine.budget("shared")?.queue == ["d"])
        // Taken out of the queue, they poll on: back in it at their next poll (6 s).
        _ = engine.tick(now: at(6))
        #expect(engine.budget("shared")?.queue == ["d", "b", "c"])
        _ = engine.demandChanged(to: .subscribed(sources: ["a", "b"], views: []), now: at(7))
        #expect(engine.budget("shared")?.queue == ["b"])
        #expect(engine.tick(now: at(10)).loads.map(\.source) == ["b"])
    }

    @Test func aReloadTakesRemovedAndChangedSourcesOutAndKeepsTheStartsCounted() {
        let old = Self.configuration(
            [Self.limited("a"), Self.limited("b"), Self.limited("c"), Self.limited("d")], requests: 2, per: .seconds(10))
        var engine = EngineCore(configuration: old)
        let first = engine.start(now: at(0)).loads
        #expect(first.map(\.source) == ["a", "b"])
        #expect(engine.budget("shared")?.queue == ["c", "d"])
        // c is removed; d leaves the budget; the budget grows to 3: one more fits (two already counted).
        var new = old
        new.sources = [Self.limited("a"), Self.limited("b"), Self.limited("d", budget: nil), Self.limited("e")]
        new.budgets["shared"] = BudgetLimit(requests: 3, per: .seconds(10))
        let reloaded = engine.reconfigure(new, now: at(1))
        #expect(Set(reloaded.loads.map(\.source)) == ["d", "e"])
        #expect(engine.budget("shared")?.queue == [])
        #expect(engine.budget("shared")?.countedStarts == 3)
        #expect(!engine.isQueuedForBudget("d"))
        // Shrunk to 1 per 10 s: the newest start (e at 1 s) still counts, so a's load waits until 11 s.
        new.budgets["shared"] = BudgetLimit(requests: 1, per: .seconds(10))
        _ = engine.reconfigure(new, now: at(2))
        _ = engine.loadFinished(source: "a", loadID: first[0].loadID, outcome: .newData(1), now: at(2))
        #expect(engine.handle(.load(.source("a")), now: at(3)).loads.isEmpty)
        #expect(engine.nextDeadline == at(11))
        #expect(engine.tick(now: at(11)).loads.map(\.source) == ["a"])
    }

    @Test func aConsumerStartingToWatchIsAPersonsAskAheadOfPolls() {
        // hammock serve: a and b are watched and poll; c is watched from 1 s on, by a client that waits for it.
        var engine = EngineCore(
            configuration: Self.configuration(
                [Self.limited("a", refresh: .seconds(1)), Self.limited("b", refresh: .seconds(1)), Self.limited("c")],
                requests: 1, per: .seconds(10)),
            demand: .subscribed(sources: ["a", "b"], views: []))
        #expect(engine.start(now: at(0)).loads.map(\.source) == ["a"])
        _ = engine.demandChanged(to: .subscribed(sources: ["a", "b", "c"], views: []), now: at(1))
        #expect(engine.budget("shared")?.queue == ["c", "b"])
        #expect(engine.tick(now: at(10)).loads.map(\.source) == ["c"])
    }

    @Test func onceFinishesWhenTheQueuedLoadsHaveHadTheirTurn() {
        var engine = EngineCore(
            configuration: Self.configuration(["a", "b", "c"].map { Self.limited($0) }, requests: 1, per: .seconds(1)),
            mode: .once(deadline: .seconds(30)))
        var actions = engine.start(now: at(0))
        var finished: Int32?
        for second in Int64(0)..<5 where finished == nil {
            if second > 0 { actions = engine.tick(now: at(second)) }
            for request in actions.loads {
                finished = finished
                    ?? engine.loadFinished(source: request.source, loadID: request.loadID, outcome: .newData(1), now: at(second))
                    .finishStatus
            }
        }
        // One load a second: c, the third, answered at 2 s, and then --once was done.
        #expect(finished == 0)
        #expect(engine.nextDeadline == nil)
    }

    @Test func aSourceWithoutALimitIsNotHeldBack() {
        var engine = EngineCore(
            configuration: Self.configuration(
                [Self.limited("a"), Self.limited("b"), Self.limited("free", budget: nil)], requests: 1, per: .seconds(60)))
        #expect(engine.start(now: at(0)).loads.map(\.source) == ["a", "free"])
        #expect(engine.budget("shared")?.queue == ["b"])
        #expect(!engine.isQueuedForBudget("free"))
    }
}
