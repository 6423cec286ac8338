import HammockCore
import HammockJSON
import HammockTestSupport
import Testing

/// `run --once` over thousands of sources, in memory: the core's share of the work grows with the sources,
/// not with their square. The engine's other shares (configuration, stdout) are checked where they live
/// (`ConfigurationBoundsTests`, `OutputLines`), and the whole run end to end by `ScaleTests`.
@Suite("EngineCore at scale: --once in linear time")
struct EngineCoreScale {
    /// The shortest of 3 runs: start, then every load answered, until the core says `--once` is done. In the
    /// thread's CPU time, not the wall clock's: in a whole-suite run the wait for a core once made 8x the
    /// sources take 26 times as long.
    static func bestOnceTime(sources count: Int, view: Bool) -> Duration {
        let ids = (0..<count).map { SourceID("s\($0)") }
        let configuration = Configuration(
            sources: ids.map { fakeSource($0) }, views: view ? [ViewDefinition(id: "everything", sources: ids)] : [])
        var best = Duration.seconds(3600)
        for _ in 0..<3 {
            var core = EngineCore(configuration: configuration, mode: .once(deadline: .seconds(300)))
            let started = threadCPUTime()
            var loads: [(SourceID, LoadID)] = []
            for case .startLoad(let request) in core.start(now: at(0)) { loads.append((request.source, request.loadID)) }
            var finished = false
            for (index, (id, loadID)) in loads.enumerated() {
                let actions = core.loadFinished(
                    source: id, loadID: loadID, outcome: .newData(.number(JSONNumber(index))), now: at(ms: 1))
                finished = finished || actions.contains { if case .finish = $0 { true } else { false } }
            }
            best = min(best, threadCPUTime() - started)
            #expect(loads.count == count, "every source was loaded")
            #expect(finished, "--once finished once every source answered")
        }
        return best
    }

    static func checkLinear(base: Int, view: Bool) {
        let small = bestOnceTime(sources: base, view: view)
        let large = bestOnceTime(sources: 8 * base, view: view)
        let ratio = large / small
        print("EngineCore --once, \(view ? "one view over all" : "no view"): \(base) sources \(small), \(8 * base) sources \(large), ratio \(ratio)")
        // Linear is 8; the quadratic code this replaced gave 30 and more.
        #expect(ratio < 20, "eight times the sources took \(ratio) times as long (\(small), then \(large))")
    }

    @Test("one view over every source: eight times the sources take about eight times the time, not sixty-four")
    func oneViewOverEverySource() {
        Self.checkLinear(base: 500, view: true)
    }

    @Test("many sources and no view: eight times the sources take about eight times the time, not sixty-four")
    func manySources() {
        Self.checkLinear(base: 500, view: false)
    }
}
