import HammockCore
import HammockJSON
import Testing

/// `--format i3bar`'s click events on stdin, and what a click does. docs/formats.md, "i3bar".
@Suite struct BarClicks {
    @Test func clickStreamLines() {
        #expect(BarClick.parse(Array("[".utf8)) == .framing)
        #expect(BarClick.parse(Array("  ".utf8)) == .framing)
        #expect(BarClick.parse(Array(#"{"name":"v","instance":"x","button":1,"x":10}"#.utf8)) == .click(BarClick(view: "v", button: 1)))
        #expect(BarClick.parse(Array(#",{"name":"w","button":3}"#.utf8)) == .click(BarClick(view: "w", button: 3)))
        #expect(BarClick.parse(Array(#"{"name":"w"}"#.utf8)) == .click(BarClick(view: "w", button: 1)))
        guard case .invalid(let noName) = BarClick.parse(Array(#"{"button":1}"#.utf8)) else {
            Issue.record("a click without a name was taken")
            return
        }
        #expect(noName.contains("without a \"name\""))
        guard case .invalid = BarClick.parse(Array("hello".utf8)) else {
            Issue.record("text was taken for a click")
            return
        }
    }

    private func core() -> EngineCore {
        EngineCore(
            configuration: Configuration(
                sources: [fakeSource("a", retry: .off), fakeSource("b", retry: .off)],
                views: [ViewDefinition(id: "v", sources: ["a", "b"])]),
            seed: 1)
    }

    @Test func aClickLoadsTheWholeViewWhenNothingFailed() throws {
        var engine = core()
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .newData(2), now: at(1))
        let clicked = engine.clicked(BarClick(view: "v", button: 1), now: at(2))
        let actions = try #require(clicked)
        #expect(actions.loads.map(\.source) == ["a", "b"])
    }

    @Test func aClickRetriesOnlyTheFailingSourcesOfAViewThatCanTryAgain() throws {
        var engine = core()
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .error(SourceError(message: "down")), now: at(1))
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .newData(2), now: at(1))
        let clicked = engine.clicked(BarClick(view: "v", button: 1), now: at(2))
        let actions = try #require(clicked)
        #expect(actions.loads.map(\.source) == ["a"])
    }

    @Test func otherButtonsDoNothingAndAnUnknownViewIsNil() {
        var engine = core()
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .newData(2), now: at(1))
        let right = engine.clicked(BarClick(view: "v", button: 3), now: at(2))
        #expect(right?.isEmpty == true)
        let unknown = engine.clicked(BarClick(view: "nope", button: 1), now: at(2))
        #expect(unknown == nil)
    }

    @Test func onClickChoosesTheActionOfEachButton() throws {
        var engine = EngineCore(
            configuration: Configuration(
                sources: [fakeSource("a", retry: .off), fakeSource("b", retry: .off)],
                views: [ViewDefinition(
                    id: "v", sources: ["a", "b"],
                    onClick: [1: .loadIfNeeded, 2: .load, 3: .run("notify-send hi"), 4: .retry])]),
            seed: 1)
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .newData(2), now: at(1))
        // Without on-click, button 1 would load both (nothing to retry); `loadIfNeeded` finds both fresh.
        let leftActions = engine.clicked(BarClick(view: "v", button: 1), now: at(2))
        let left = try #require(leftActions)
        #expect(left.loads.isEmpty)
        let scrollActions = engine.clicked(BarClick(view: "v", button: 4), now: at(2))
        let scroll = try #require(scrollActions)
        #expect(scroll.loads.isEmpty, "nothing failed: retry has nothing to load")
        let rightActions = engine.clicked(BarClick(view: "v", button: 3), now: at(2))
        let right = try #require(rightActions)
        #expect(right.summaries == ["run v 3 notify-send hi"])
        let middleActions = engine.clicked(BarClick(view: "v", button: 2), now: at(3))
        let middle = try #require(middleActions)
        #expect(middle.loads.map(\.source) == ["a", "b"])
        let unnamedActions = engine.clicked(BarClick(view: "v", button: 5), now: at(3))
        let unnamed = try #require(unnamedActions)
        #expect(unnamed.isEmpty)
    }
}
