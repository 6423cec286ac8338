import HammockCore
import HammockJSON
import Testing

/// Loading driven by demand (issue 27): a source loads and polls while someone watches it, a subscriber to
/// it, to a view that uses it, or to a source whose template reads it; `keep: true` watches regardless.
@Suite struct DemandDrivenLoading {
    static let nobody = Demand.subscribed(sources: [], views: [])

    static func watching(sources: Set<SourceID> = [], views: Set<ViewID> = []) -> Demand {
        .subscribed(sources: sources, views: views)
    }

    /// A source whose `url` option reads `input`'s content through a template.
    static func reading(_ id: SourceID, from input: SourceID, refresh: Duration? = nil) -> SourceDefinition {
        let url = "http://x/{{ \(input) }}"
        return fakeSource(
            id, refresh: refresh, options: ["url": .string(url)],
            templates: [TemplatedOption(pointer: JSONPointer("/url")!, template: try! Template.parse(url)!, percentEncode: true)])
    }

    func core(
        _ sources: [SourceDefinition], views: [ViewDefinition] = [], demand: Demand = nobody
    ) -> EngineCore {
        EngineCore(
            configuration: Configuration(sources: sources, views: views), templateRules: fakeTemplateRules,
            demand: demand)
    }

    @Test func theDefaultWatchesEverythingAsRunDoes() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a"), fakeSource("b", refresh: .seconds(10))]))
        #expect(engine.watchedSources == ["a", "b"])
        #expect(engine.start(now: at(0)).loads.map(\.source) == ["a", "b"])
        // `--once` watches everything whatever the demand: it ends when every source has had its load.
        let once = EngineCore(
            configuration: Configuration(sources: [fakeSource("a")]), mode: .once(deadline: .seconds(5)),
            demand: Self.nobody)
        #expect(once.watchedSources == ["a"])
    }

    @Test func nothingLoadsAtStartWithAnEmptySubscription() {
        var engine = core([fakeSource("a", refresh: .seconds(10)), fakeSource("b")])
        #expect(engine.watchedSources.isEmpty)
        #expect(engine.start(now: at(0)).summaries == [#"hello ["a", "b"] []"#])
        #expect(engine.nextDeadline == nil)
        #expect(engine.tick(now: at(60)).loads.isEmpty)
    }

    @Test func subscribingToAViewLoadsItsSourcesAndNoOthers() {
        var engine = core(
            [fakeSource("a"), fakeSource("b"), fakeSource("c")], views: [ViewDefinition(id: "v", sources: ["a", "b"])])
        _ = engine.start(now: at(0))
        let subscribed = engine.demandChanged(to: Self.watching(sources: ["ghost"], views: ["v", "gone"]), now: at(1))
        #expect(subscribed.loads.map(\.source) == ["a", "b"])
        #expect(engine.watchedSources == ["a", "b"])
        #expect(!engine.isWatched("c"))
    }

    @Test func aSubscribedSourcesTemplateInputsLoadToo() {
        // c reads b, which reads a: watching c watches all three; d is nobody's.
        var engine = core(
            [fakeSource("a"), Self.reading("b", from: "a"), Self.reading("c", from: "b"), fakeSource("d")],
            demand: Self.watching(sources: ["c"]))
        #expect(engine.watchedSources == ["a", "b", "c"])
        #expect(engine.start(now: at(0)).loads.map(\.source) == ["a"], "b and c wait for their inputs")
        #expect(engine.loadFinished(source: "a", loadID: 1, outcome: .newData("x"), now: at(1)).loads.map(\.source) == ["b"])
        #expect(engine.loadFinished(source: "b", loadID: 2, outcome: .newData("y"), now: at(2)).loads.map(\.source) == ["c"])
    }

    @Test func unsubscribingStopsThePolls() {
        var engine = core([fakeSource("a", refresh: .seconds(10))], demand: Self.watching(sources: ["a"]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.nextDeadline == at(11))
        #expect(engine.demandChanged(to: Self.nobody, now: at(2)).isEmpty)
        #expect(engine.nextDeadline == nil)
        for seconds in stride(from: Int64(11), through: 61, by: 10) {
            #expect(engine.tick(now: at(seconds)).loads.isEmpty)
        }
        // Its state stays, for the next watcher.
        #expect(engine.state(of: "a")?.content == 1)
    }

    @Test func resubscribingWhileFreshLoadsNothingAndThePollResumesOnSchedule() {
        var engine = core([fakeSource("a", refresh: .seconds(10), expiration: .seconds(30))], demand: Self.watching(sources: ["a"]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        _ = engine.demandChanged(to: Self.nobody, now: at(2))
        #expect(engine.demandChanged(to: Self.watching(sources: ["a"]), now: at(15)).loads.isEmpty)
        // Polled every 10 s since its load at 1 s: the poll missed at 11 s is not made up, the next is at 21 s.
        #expect(engine.nextDeadline == at(21))
        #expect(engine.tick(now: at(21)).loads.map(\.source) == ["a"])
    }

    @Test func resubscribingPastTheExpirationLoadsAtOnce() {
        var engine = core([fakeSource("a", refresh: .seconds(10), expiration: .seconds(30))], demand: Self.watching(sources: ["a"]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        _ = engine.demandChanged(to: Self.nobody, now: at(2))
        #expect(engine.demandChanged(to: Self.watching(sources: ["a"]), now: at(40)).loads.map(\.source) == ["a"])
    }

    @Test func aLoadInFlightWhenTheLastWatcherLeavesIsAppliedAndSchedulesNothing() {
        var engine = core([fakeSource("a", refresh: .seconds(10))], views: [ViewDefinition(id: "v", sources: ["a"])], demand: Self.watching(views: ["v"]))
        _ = engine.start(now: at(0))
        #expect(engine.demandChanged(to: Self.nobody, now: at(ms: 500)).isEmpty, "the load goes on: nothing is cancelled")
        let answered = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(answered.summaries == ["source a newData load", "view v data"])
        #expect(engine.state(of: "a")?.content == 1)
        #expect(engine.nextDeadline == nil)
    }

    @Test func keepPollsWithNoSubscriber() {
        var kept = fakeSource("k", refresh: .seconds(10))
        kept.keep = true
        var engine = core([kept, fakeSource("other", refresh: .seconds(10))])
        #expect(engine.watchedSources == ["k"])
        #expect(engine.start(now: at(0)).loads.map(\.source) == ["k"])
        _ = engine.loadFinished(source: "k", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.tick(now: at(11)).loads.map(\.source) == ["k"])
        // A subscription that comes and goes does not stop it.
        _ = engine.demandChanged(to: Self.watching(sources: ["k"]), now: at(12))
        _ = engine.demandChanged(to: Self.nobody, now: at(13))
        #expect(engine.isWatched("k"))
    }

    @Test func theLoadEverythingSignalsAndAClockJumpSkipUnwatchedSources() {
        var engine = core([fakeSource("a", refresh: .seconds(10)), fakeSource("b", refresh: .seconds(10))], demand: Self.watching(sources: ["a"]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .error(SourceError(message: "down")), now: at(1))
        _ = engine.pushedError(source: "b", error: SourceError(message: "down"), now: at(1))
        #expect(engine.loadEverySource(failingOnly: true, now: at(2)).loads.map(\.source) == ["a"])
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .newData(1), now: at(3))
        #expect(engine.loadEverySource(failingOnly: false, now: at(4)).loads.map(\.source) == ["a"])
        _ = engine.loadFinished(source: "a", loadID: 3, outcome: .newData(1), now: at(5))
        #expect(engine.clockJumped(now: at(6)).loads.map(\.source) == ["a"])
        _ = engine.loadFinished(source: "a", loadID: 4, outcome: .newData(1), now: at(7))
        // Named, an unwatched source still loads once: someone asked.
        #expect(engine.handle(.load(.source("b")), now: at(7)).loads.map(\.source) == ["b"])
        _ = engine.loadFinished(source: "b", loadID: 5, outcome: .newData(2), now: at(8))
        #expect(engine.tick(now: at(60)).loads.map(\.source) == ["a"], "b polls no more after its one load")
    }

    @Test func aReloadLoadsANewSourceOnlyIfWatched() {
        var engine = core([fakeSource("a")], demand: Self.watching(sources: ["a", "n"]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        let reloaded = engine.reconfigure(Configuration(sources: [fakeSource("a"), fakeSource("n"), fakeSource("u")]), now: at(2))
        #expect(reloaded.loads.map(\.source) == ["n"], "n was subscribed to before it existed; u is nobody's")
        #expect(engine.watchedSources == ["a", "n"])
    }

    @Test func aReloadThatLeavesASourceUnwatchedStopsItsPolls() {
        let view = ViewDefinition(id: "v", sources: ["a"])
        var engine = core([fakeSource("a", refresh: .seconds(10))], views: [view], demand: Self.watching(views: ["v"]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.nextDeadline == at(11))
        // The view goes; a, unchanged, keeps its state but nobody watches it.
        _ = engine.reconfigure(Configuration(sources: [fakeSource("a", refresh: .seconds(10))]), now: at(2))
        #expect(engine.watchedSources.isEmpty)
        #expect(engine.nextDeadline == nil)
        #expect(engine.tick(now: at(11)).loads.isEmpty)
        #expect(engine.state(of: "a")?.content == 1)
        // It comes back: a is fresh, so it loads nothing and polls on its schedule.
        let back = engine.reconfigure(Configuration(sources: [fakeSource("a", refresh: .seconds(10))], views: [view]), now: at(12))
        #expect(back.loads.isEmpty)
        #expect(engine.nextDeadline == at(21))
    }

    @Test func anInputThatChangedWhileNobodyWatchedReloadsTheDependentWhenWatched() {
        var engine = core([fakeSource("a"), Self.reading("b", from: "a")], demand: Self.watching(sources: ["b"]))
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData("x"), now: at(1))
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .newData("for x"), now: at(2))
        _ = engine.demandChanged(to: Self.nobody, now: at(3))
        #expect(engine.handle(.override(source: "a", content: "y"), now: at(4)).summaries == ["source a newData override"])
        let watched = engine.demandChanged(to: Self.watching(sources: ["b"]), now: at(5))
        #expect(watched.loads.map(\.source) == ["b"], "a is fresh; b's options changed")
        #expect(watched.loads.first?.options["url"] == "http://x/y")
    }
}
