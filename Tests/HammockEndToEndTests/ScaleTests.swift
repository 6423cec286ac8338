import Foundation
import HammockTestSupport
import Testing

/// `run --once` with one view over all of its sources settles in time linear in the number of sources, end
/// to end (configuration, core, stdout). The check times 4x and 8x a size, best of 3 runs each, and allows 8x
/// up to 3 times the time of 4x: linear work gives at most 2 (less, with the start-up that both share),
/// quadratic work 4.
///
/// Before: one view over every source was evaluated whole after every event (2,000 sources 6 s, 5,000 39 s,
/// 10,000 179 s), and `--once` looked at every source after every answer to see whether it was done. The
/// core's two shares, without a view too, are checked in memory in `EngineCoreScale`, at less cost.
@Suite("Scale: --once in linear time", .serialized)
struct ScaleTests {
    /// `count` fake sources, and a view over all of them when `view`.
    static func config(_ count: Int, view: Bool) -> String {
        var yaml = "version: 1\nsources:\n"
        for index in 0..<count { yaml += "  s\(index): { kind: fake, content: \(index) }\n" }
        if view {
            yaml += "views:\n  everything:\n    sources: [" + (0..<count).map { "s\($0)" }.joined(separator: ", ") + "]\n"
        }
        return yaml
    }

    /// The time of one run of `run --once` over `config`, from the start of the run to its exit.
    static func onceTime(_ config: String, sources: Int) async throws -> Duration {
        do {
            let took = try await HammockProcess.withRunning(config: config, arguments: ["--once", "--deadline", "5m"]) { hammock in
                let termination = try await hammock.waitForExit(timeout: .seconds(300))
                let took = ContinuousClock.now - hammock.launchedAt
                #expect(termination == .exited(0), "\(hammock.stderrText.suffix(500))")
                try await hammock.waitUntilStdoutEnds()
                #expect(hammock.lines.filter { $0.event == "newData" }.count == sources)
                return took
            }
            return took
        }
    }

    /// The shortest of 3 runs at each size, the sizes taken in turn, so that a busy spell of the machine (the
    /// suites beside this one) weighs on both sizes alike rather than on the second size alone.
    static func checkLinear(base: Int, view: Bool) async throws {
        var four = Duration.seconds(3600)
        var eight = Duration.seconds(3600)
        for _ in 0..<3 {
            four = min(four, try await onceTime(config(4 * base, view: view), sources: 4 * base))
            eight = min(eight, try await onceTime(config(8 * base, view: view), sources: 8 * base))
        }
        let ratio = eight / four
        print("--once, \(view ? "one view over all" : "no view"): \(4 * base) sources \(four), \(8 * base) sources \(eight), ratio \(ratio)")
        #expect(ratio < 3, "twice the sources took \(ratio) times as long (\(four) for \(4 * base), \(eight) for \(8 * base))")
    }

    @Test("one view over every source: twice the sources take about twice the time, not four times")
    func oneViewOverEverySource() async throws {
        try await Self.checkLinear(base: 500, view: true)
    }
}
