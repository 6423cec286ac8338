import HammockCore
import HammockJSON
import Testing

/// SPEC §2: merging sources into views.
@Suite struct Views {
    static let loading = SourceState(isLoading: true)
    static let data = SourceState(content: "d", timestamp: t0)
    static let failed = SourceState(latestError: SourceError(message: "down", httpStatus: 503), timestamp: t0, failures: 1)
    static let idle = SourceState()

    /// Evaluates a view over `a`, `b` (in that order) with the given states.
    func evaluate(
        _ a: SourceState, _ b: SourceState, ready: Readiness = .all, display: [DisplayRule]? = nil
    ) -> ViewState {
        let view = ViewDefinition(id: "v", sources: ["a", "b"], ready: ready, display: display)
        return view.evaluate { ["a": a, "b": b][$0]! }
    }

    @Test func eachRuleOnItsOwn() {
        // loading: any source is loading
        #expect(evaluate(Self.loading, Self.idle, display: [.loading]).status == .loading)
        #expect(evaluate(Self.idle, Self.idle, display: [.loading]).status == .idle)
        // error: any source has a latest error
        #expect(evaluate(Self.idle, Self.failed, display: [.error]).status == .error)
        #expect(evaluate(Self.idle, Self.data, display: [.error]).status == .idle)
        // anyData: any source has content, and the view has content
        #expect(evaluate(Self.idle, Self.data, ready: .any, display: [.anyData]).status == .data)
        #expect(evaluate(Self.idle, Self.data, ready: .all, display: [.anyData]).status == .idle)
        #expect(evaluate(Self.idle, Self.loading, ready: .any, display: [.anyData]).status == .idle)
        // allData
        #expect(evaluate(Self.data, Self.data, display: [.allData]).status == .data)
        #expect(evaluate(Self.data, Self.idle, display: [.allData]).status == .idle)
        // alwaysData: whenever the view has content
        #expect(evaluate(Self.idle, Self.data, ready: .any, display: [.alwaysData]).status == .data)
        #expect(evaluate(Self.idle, Self.data, ready: .all, display: [.alwaysData]).status == .idle)
        #expect(evaluate(Self.idle, Self.idle, ready: .any, display: [.alwaysData]).status == .idle)
        // no rules: idle
        #expect(evaluate(Self.loading, Self.failed, display: []).status == .idle)
    }

    @Test func presetsAreTheSpecsLists() {
        #expect(DisplayRule.presets["standard"] == [.anyData, .loading, .error])
        #expect(DisplayRule.presets["overlay"] == [.loading, .error, .anyData])
        #expect(DisplayRule.presets["noError"] == [.loading, .alwaysData])
        #expect(DisplayRule.presets["dataOnly"] == [.alwaysData])
        #expect(DisplayRule.presets.count == 4)
    }

    @Test func standardFavoursData() {
        let rules = DisplayRule.presets["standard"]!
        let staleAndFailing = SourceState(content: "old", latestError: SourceError(message: "x"), isLoading: true)
        #expect(evaluate(staleAndFailing, Self.data, display: rules).status == .data)
        #expect(evaluate(staleAndFailing, Self.idle, ready: .any, display: rules).status == .data)
        // ready: all over one source of two has no content yet: no data rule matches.
        #expect(evaluate(staleAndFailing, Self.idle, display: rules).status == .loading)
        #expect(evaluate(Self.loading, Self.failed, display: rules).status == .loading)
        #expect(evaluate(Self.idle, Self.failed, display: rules).status == .error)
        #expect(evaluate(Self.idle, Self.idle, display: rules).status == .idle)
    }

    @Test func overlayShowsSpinnerThenErrorOverData() {
        let rules = DisplayRule.presets["overlay"]!
        #expect(evaluate(Self.data, Self.loading, display: rules).status == .loading)
        #expect(evaluate(Self.data, Self.failed, display: rules).status == .error)
        #expect(evaluate(Self.data, Self.idle, ready: .any, display: rules).status == .data)
        // ready: all over one source of two has no content: not data.
        #expect(evaluate(Self.data, Self.idle, display: rules).status == .idle)
        #expect(evaluate(Self.idle, Self.idle, display: rules).status == .idle)
    }

    @Test func noErrorNeverShowsAnError() {
        let rules = DisplayRule.presets["noError"]!
        #expect(evaluate(Self.failed, Self.loading, display: rules).status == .loading)
        let staleAndFailing = SourceState(content: "old", latestError: SourceError(message: "x"), timestamp: t0, failures: 1)
        #expect(evaluate(staleAndFailing, Self.failed, ready: .any, display: rules).status == .data)
        // Nothing to show: idle, never data without content (nor the error).
        #expect(evaluate(Self.failed, Self.failed, display: rules).status == .idle)
        #expect(evaluate(Self.idle, Self.idle, display: rules).status == .idle)
    }

    @Test func dataOnlyIsDataWheneverThereIsContent() {
        let rules = DisplayRule.presets["dataOnly"]!
        #expect(evaluate(Self.data, Self.loading, ready: .any, display: rules).status == .data)
        #expect(evaluate(Self.failed, Self.loading, display: rules).status == .idle)
        #expect(evaluate(Self.idle, Self.idle, display: rules).status == .idle)
    }

    /// `data` implies content, whatever the rules, the readiness and the sources' states: a consumer's
    /// `case .data:` may use the content without a check. (SPEC §2 has `alwaysData` match always; hammock's
    /// data rules match only while the view has content, as Siesta shows its content block only then.)
    @Test func dataAlwaysHasContent() {
        let samples = [
            Self.idle, Self.loading, Self.data, Self.failed, SourceState(content: .null, timestamp: t0),
            SourceState(content: "old", latestError: SourceError(message: "x"), isLoading: true, timestamp: t0, failures: 1),
            SourceState(content: "d", isLoading: true, timestamp: t0),
            SourceState(latestError: SourceError(message: "x"), isLoading: true, timestamp: t0, failures: 1),
        ]
        var ruleLists = Array(DisplayRule.presets.values) + Readiness.allCases.map(DisplayRule.defaultRules(for:))
        ruleLists += DisplayRule.allCases.map { [$0] }
        ruleLists += [DisplayRule.allCases, DisplayRule.allCases.reversed(), []]
        var checked = 0
        var dataSeen = 0
        var dataWithoutContent: [String] = []
        for count in 0...3 {
            let ids = (0..<count).map { SourceID("s\($0)") }
            // Every assignment of a sample state to each source.
            var assignments: [[SourceState]] = [[]]
            for _ in 0..<count { assignments = assignments.flatMap { prefix in samples.map { prefix + [$0] } } }
            for states in assignments {
                let byID = Dictionary(uniqueKeysWithValues: zip(ids, states))
                for ready in Readiness.allCases {
                    for rules in ruleLists {
                        let view = ViewDefinition(id: "v", sources: ids, ready: ready, display: rules)
                        let state = view.evaluate { byID[$0]! }
                        checked += 1
                        guard state.status == .data else { continue }
                        dataSeen += 1
                        if state.content == .null { dataWithoutContent.append("\(ready) \(rules) over \(states)") }
                    }
                }
            }
        }
        #expect(dataWithoutContent.isEmpty, "data without content in \(dataWithoutContent.count) cases, such as \(dataWithoutContent.prefix(3))")
        #expect(checked > 10_000)
        #expect(dataSeen > 1_000, "the property is about data states: some must come")
    }

    @Test func defaultsDependOnReadiness() {
        #expect(ViewDefinition(id: "v", sources: ["a"]).ready == .all)
        #expect(ViewDefinition(id: "v", sources: ["a"]).display == [.allData, .loading, .error])
        #expect(ViewDefinition(id: "v", sources: ["a"], ready: .any).display == [.anyData, .loading, .error])
        #expect(ViewDefinition(id: "v", sources: ["a"], ready: .any, display: [.error]).display == [.error])
        // ready: all with one source loaded and one still loading shows the spinner, not half the data.
        #expect(evaluate(Self.data, Self.loading).status == .loading)
        #expect(evaluate(Self.data, Self.loading, ready: .any).status == .data)
        #expect(evaluate(Self.data, Self.data).status == .data)
        #expect(evaluate(Self.data, Self.failed).status == .error)
        #expect(evaluate(Self.idle, Self.idle).status == .idle)
    }

    @Test func contentForReadyAll() {
        #expect(evaluate(Self.data, Self.idle).content == .null)
        #expect(evaluate(Self.idle, Self.idle).content == .null)
        let b = SourceState(content: ["x": 1], timestamp: t0)
        let state = evaluate(Self.data, b)
        #expect(state.content == ["a": "d", "b": ["x": 1]])
        #expect(state.content.jsonString == #"{"a":"d","b":{"x":1}}"#)
    }

    @Test func contentForReadyAnyHasNullForMissingSources() {
        #expect(evaluate(Self.idle, Self.loading, ready: .any).content == .null)
        let state = evaluate(Self.failed, Self.data, ready: .any)
        #expect(state.content.jsonString == #"{"a":null,"b":"d"}"#)
    }

    @Test func contentIsInTheViewsOrder() {
        let view = ViewDefinition(id: "v", sources: ["b", "a"])
        let state = view.evaluate { ["a": SourceState(content: 1), "b": SourceState(content: 2)][$0]! }
        #expect(state.content.jsonString == #"{"b":2,"a":1}"#)
    }

    @Test func jsonNullContentCountsAsData() {
        let nullData = SourceState(content: .null, timestamp: t0)
        let state = evaluate(nullData, Self.data)
        #expect(state.status == .data)
        #expect(state.content.jsonString == #"{"a":null,"b":"d"}"#)
    }

    @Test func latestErrorIsTheFirstFailingSourceInViewOrder() {
        let first = SourceError(message: "first", code: SourceError.Code("a"))
        let second = SourceError(message: "second", httpStatus: 404)
        let state = evaluate(SourceState(latestError: second), SourceState(latestError: first))
        #expect(state.latestError == second)
        #expect(state.errors.map(\.source) == ["a", "b"])
        #expect(state.errors.map(\.error) == [second, first])
        #expect(state.canTryAgain)
    }

    @Test func noErrorsNothingToTryAgain() {
        let state = evaluate(Self.data, Self.loading)
        #expect(state.latestError == nil)
        #expect(state.errors.isEmpty)
        #expect(!state.canTryAgain)
    }

    @Test func sourceThatFailsAfterItHadData() {
        let stale = SourceState(
            content: "old", latestError: SourceError(message: "gone"), timestamp: at(5), failures: 1)
        // Default rules for ready: all → allData wins, the stale data is shown and the error travels along.
        let all = evaluate(stale, Self.data)
        #expect(all.status == .data)
        #expect(all.content.jsonString == #"{"a":"old","b":"d"}"#)
        #expect(all.latestError?.message == "gone")
        #expect(all.canTryAgain)
        // overlay puts the error over the data.
        #expect(evaluate(stale, Self.data, display: DisplayRule.presets["overlay"]!).status == .error)
        // [loading, error] without a data rule: error.
        #expect(evaluate(stale, Self.data, display: [.loading, .error]).status == .error)
        // standard: data, once the view has content (ready: any; with ready: all, b has none yet: error).
        #expect(evaluate(stale, Self.idle, ready: .any, display: DisplayRule.presets["standard"]!).status == .data)
        #expect(evaluate(stale, Self.idle, display: DisplayRule.presets["standard"]!).status == .error)
    }

}
