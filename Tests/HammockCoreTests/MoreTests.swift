import HammockCore
import HammockJSON
import Testing

/// Issue 29: `more`, in memory. It asks the source's loads for pages beyond those its meta says it holds, and
/// is answered when its load is done: an ack when the pages came, an error otherwise; never left waiting.
@Suite struct More {
    func engine() -> EngineCore {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a"), fakeSource("b")]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .described(.newData([1]), meta: ["pages": 1, "hasMore": true]), now: at(1))
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .newData([1]), now: at(1))
        return engine
    }

    @Test func moreAsksForPagesBeyondThoseHeldAndIsAnsweredAfterThem() {
        var engine = engine()
        let asked = engine.handle(.more(source: "a", count: 2), replyingTo: [.string("m")], now: at(2))
        #expect(asked.summaries == ["source a requested", "startLoad a #3"], "no ack before the pages")
        #expect(asked.loads.first?.pages == 3)
        // A second `more` while the first's load is in flight asks for the same pages: a follow-up, one ack each.
        #expect(engine.handle(.more(source: "a", count: 2), replyingTo: [.string("n")], now: at(2)).summaries.isEmpty)
        let done = engine.loadFinished(
            source: "a", loadID: 3, outcome: .described(.newData([1, 2, 3]), meta: ["pages": 3, "hasMore": true]), now: at(3))
        #expect(done.summaries == ["source a newData load", "source a requested", "startLoad a #4"], "the follow-up goes first")
        #expect(done.loads.first?.pages == 3)
        let last = engine.loadFinished(source: "a", loadID: 4, outcome: .described(.notModified, meta: ["pages": 3]), now: at(4))
        #expect(last.summaries.suffix(2) == [#"ack "m""#, #"ack "n""#])
        // Later polls keep the pages.
        #expect(engine.handle(.load(.source("a")), now: at(5)).loads.first?.pages == 3)
    }

    @Test func moreIsRefusedWhereThereIsNoMoreAndAnsweredWithAFailure() {
        var engine = engine()
        #expect(
            engine.handle(.more(source: "b", count: 1), replyingTo: [.number(1)], now: at(2)).summaries
                == [#"error 1 source "b" has no more pages to load (it has no meta yet); more loads the next pages of a paginated source whose server has them"#])
        _ = engine.handle(.more(source: "a", count: 1), replyingTo: [.number(2)], now: at(2))
        #expect(
            engine.loadFinished(source: "a", loadID: 3, outcome: .error(SourceError(message: "HTTP 500")), now: at(3)).summaries.last
                == #"error 2 more pages of source "a" did not come: HTTP 500"#)
        _ = engine.handle(.more(source: "a", count: 1), replyingTo: [.number(3)], now: at(4))
        #expect(
            engine.handle(.cancel(.source("a")), now: at(4)).summaries.contains(#"error 3 more pages of source "a" did not come: its load was cancelled"#))
    }

    @Test func aReloadThatRemovesOrChangesTheSourceAnswersItsWaitingMore() {
        var engine = engine()
        _ = engine.handle(.more(source: "a", count: 1), replyingTo: [.number(1)], now: at(2))
        let removed = engine.reconfigure(Configuration(sources: [fakeSource("b")]), now: at(3))
        #expect(removed.summaries.first == #"error 1 more pages of source "a" did not come: a reload removed the source"#)
    }

    /// With a shared budget (`limit:`), a `more` whose load waits for the budget's room is neither refused nor
    /// answered until its turn comes and the pages are in; a wipe that takes it out of the queue answers it.
    @Test func moreWaitsForItsBudgetAndIsAnsweredAfterThePages() {
        var limited = fakeSource("a")
        limited.limit = "shared"
        var engine = EngineCore(configuration: Configuration(sources: [limited], budgets: ["shared": BudgetLimit(requests: 1, per: .seconds(10))]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .described(.newData([1]), meta: ["pages": 1, "hasMore": true]), now: at(1))
        #expect(engine.handle(.more(source: "a", count: 1), replyingTo: [.number(1)], now: at(2)).summaries.isEmpty, "waits for the budget")
        let turn = engine.tick(now: at(10))
        #expect(turn.loads.first?.pages == 2)
        #expect(
            engine.loadFinished(source: "a", loadID: 2, outcome: .described(.newData([1, 2]), meta: ["pages": 2, "hasMore": true]), now: at(11))
                .summaries.last == "ack 1")
        _ = engine.handle(.more(source: "a", count: 1), replyingTo: [.number(2)], now: at(12))
        #expect(
            engine.handle(.wipe(.source("a")), now: at(12)).summaries.contains(
                #"error 2 more pages of source "a" did not come: a wipe forgot the pages it waited for"#))
    }

    /// Review finding: the pages held are the plugin's word, and a hostile one could overflow the count or ask
    /// for no page at all.
    @Test func theHeldPagesAreBoundedAndALoadAsksForOneAtLeast() {
        for hostile: JSONValue in [.number(JSONNumber(Int.max)), -5, 0, "7", 1e300] {
            for count in [1, 1000] {
                var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a")]))
                _ = engine.start(now: at(0))
                _ = engine.loadFinished(
                    source: "a", loadID: 1, outcome: .described(.newData([1]), meta: ["pages": hostile, "hasMore": true]), now: at(1))
                let pages = engine.handle(.more(source: "a", count: count), now: at(2)).loads.first?.pages
                #expect(pages.map { (2...1_000_000).contains($0) } == true, "\(hostile), \(count): \(pages.map(String.init) ?? "no load")")
            }
        }
    }

    @Test func atMost1024MoreWaitForOneSource() {
        var engine = engine()
        _ = engine.handle(.more(source: "a", count: 1), replyingTo: (0..<1024).map { ControlID.number(JSONNumber($0)) }, now: at(2))
        #expect(
            engine.handle(.more(source: "a", count: 1), replyingTo: [.string("x")], now: at(2)).summaries
                == [#"error "x" source "a" has 1024 more commands waiting for its pages already; wait for their answers"#])
    }

    @Test func aWipeForgetsThePagesAskedFor() {
        var engine = engine()
        _ = engine.handle(.more(source: "a", count: 4), now: at(2))
        _ = engine.loadFinished(source: "a", loadID: 3, outcome: .described(.newData([1]), meta: ["pages": 5, "hasMore": true]), now: at(3))
        _ = engine.handle(.wipe(.source("a")), now: at(4))
        #expect(engine.handle(.load(.source("a")), now: at(5)).loads.first?.pages == nil)
    }
}
