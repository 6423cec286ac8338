import HammockCore
import HammockJSON
import Testing

/// A view's state read off counts moved one source at a time (`ViewTally`, what the engine uses) is the
/// state a full evaluation over every source gives (`ViewDefinition.evaluate`, the rules' one statement).
@Suite("ViewTally") struct ViewTallyTests {
    static let error503 = SourceError(message: "down", httpStatus: 503)
    static let error404 = SourceError(message: "gone", httpStatus: 404)
    /// Every combination of content, error and loading, two errors and two contents apart.
    static let pool: [SourceState] = {
        var states: [SourceState] = []
        for content in [nil, JSONValue.string("one"), .string("two"), .null] {
            for error in [nil, error503, error404] {
                for loading in [false, true] {
                    states.append(SourceState(content: content, latestError: error, isLoading: loading, failures: error == nil ? 0 : 1))
                }
            }
        }
        return states
    }()

    static let rules: [[DisplayRule]?] = [nil, .standard, .overlay, .noError, .dataOnly, [.error, .allData], []]

    @Test("moved one source at a time, every readiness and display rule, a source listed twice: the full evaluation's state at every step")
    func tallyMatchesTheFullEvaluation() {
        var random = SplitMix64(seed: 25)
        var steps = 0
        for ready in Readiness.allCases {
            for display in Self.rules {
                let view = ViewDefinition(id: "v", sources: ["a", "b", "c", "a", "d"], ready: ready, display: display)
                var states: [SourceID: SourceState] = [:]
                var tally = ViewTally(view) { states[$0] ?? SourceState() }
                for _ in 0..<300 {
                    let id: SourceID = ["a", "b", "c", "d", "elsewhere"].randomElement(using: &random)!
                    states[id] = Self.pool.randomElement(using: &random)!
                    tally.update(id, to: states[id]!)
                    let full = view.evaluate { states[$0] ?? SourceState() }
                    let counted = tally.evaluate { states[$0]?.content }
                    #expect(counted == full, "\(ready) \(String(describing: display)) after \(id) = \(states[id]!)")
                    #expect(counted.errors.map(\.source) == full.errors.map(\.source))
                    steps += 1
                }
            }
        }
        #expect(steps == 2 * Self.rules.count * 300)
    }

    @Test("a tally made over states already there starts where the full evaluation is")
    func tallyMadeOverExistingStates() {
        var random = SplitMix64(seed: 7)
        for _ in 0..<200 {
            let view = ViewDefinition(id: "v", sources: ["a", "b", "b"], ready: Bool.random(using: &random) ? .all : .any)
            let states: [SourceID: SourceState] = ["a": Self.pool.randomElement(using: &random)!, "b": Self.pool.randomElement(using: &random)!]
            let tally = ViewTally(view) { states[$0]! }
            #expect(tally.evaluate { states[$0]?.content } == view.evaluate { states[$0]! })
        }
    }

    /// The engine moves its tallies in `apply` and counts again after a reload: at every step of loads,
    /// errors, cancels, wipes and a reload that changes a source, its view states are the full evaluation's.
    @Test("the engine's view states are the full evaluation's through loads, errors, wipes, cancels and a reload")
    func engineViewsMatchTheFullEvaluation() {
        let ids = (0..<12).map { SourceID("s\($0)") }
        let views = [
            ViewDefinition(id: "all", sources: ids, ready: .all),
            ViewDefinition(id: "any", sources: Array(ids.prefix(5)) + ["s0"], ready: .any, display: .overlay),
        ]
        var configuration = Configuration(sources: ids.map { fakeSource($0) }, views: views)
        var core = EngineCore(configuration: configuration)
        var random = SplitMix64(seed: 99)
        var inFlight: [SourceID: LoadID] = [:]
        func take(_ actions: [EngineAction]) {
            for case .startLoad(let request) in actions { inFlight[request.source] = request.loadID }
        }
        func check(_ step: String) {
            for (index, view) in core.configuration.views.enumerated() {
                let full = view.evaluate { core.state(of: $0) ?? SourceState() }
                #expect(core.viewState(index) == full, "\(view.id) after \(step)")
            }
        }
        take(core.start(now: at(0)))
        check("start")
        for step in 1...400 {
            let now: EngineTime = at(ms: Int64(step) * 10)
            let id = ids.randomElement(using: &random)!
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                guard let loadID = inFlight.removeValue(forKey: id) else {
                    take(core.handle(.load(.source(id)), now: now))
                    break
                }
                let outcome: LoadOutcome = [
                    .newData(.string("v\(step)")), .error(Self.error503), .error(Self.error404), .notModified, .cancelled,
                ].randomElement(using: &random)!
                take(core.loadFinished(source: id, loadID: loadID, outcome: outcome, now: now))
            case 4..<6: take(core.handle(.load(.source(id)), now: now))
            case 6: take(core.handle(.wipe(.source(id)), now: now))
            case 7: take(core.handle(.cancel(.source(id)), now: now)); inFlight[id] = nil
            case 8: take(core.pushedError(source: id, error: Self.error503, now: now))
            default:
                // A reload that changes one source's options: its state is carried over, not loading.
                configuration.sources = configuration.sources.map { source in
                    source.id == id ? fakeSource(id, options: ["content": .string("\(step)")]) : source
                }
                inFlight[id] = nil
                take(core.reconfigure(configuration, now: now))
            }
            check("step \(step) on \(id)")
        }
    }
}
