import HammockEngine
import Testing

@testable import HammockMetrics

/// The engine reaches --metrics only through `EngineObserver`; each of its calls must land on the counter
/// the engine counted directly before the module split. The end-to-end `MetricsTests` hold the whole path.
@Suite("Metrics as the engine's observer")
struct EngineObserverTests {
    @Test("lines written and coalesced, reloads by outcome and plugin restarts by kind reach their counters")
    func callsReachTheirCounters() {
        let metrics = EngineMetrics()
        let observer: any EngineObserver = metrics
        observer.wroteLines(3)
        observer.wroteLines(2)
        observer.coalescedLine()
        observer.reloadEnded(succeeded: true)
        observer.reloadEnded(succeeded: false)
        observer.reloadEnded(succeeded: false)
        observer.pluginRestarted(kind: "shell")
        let text = String(decoding: metrics.scrape(), as: UTF8.self)
        #expect(text.contains("hammock_stdout_lines_written_total 5\n"), "\(text)")
        #expect(text.contains("hammock_stdout_lines_coalesced_total 1\n"))
        #expect(text.contains(#"hammock_reloads_total{outcome="success"} 1"#))
        #expect(text.contains(#"hammock_reloads_total{outcome="failure"} 2"#))
        #expect(text.contains(#"hammock_plugin_restarts_total{kind="shell"} 1"#))
    }

    @Test("the line observer keeps a series for each configured source, and a reload drops the others'")
    func lineObserverFollowsTheConfiguration() {
        let metrics = EngineMetrics()
        var lines = metrics.lineObserver(sources: ["kept", "dropped"])
        var text = String(decoding: metrics.scrape(), as: UTF8.self)
        #expect(text.contains(#"hammock_source_consecutive_failures{source="dropped"} 0.0"#), "\(text)")
        lines.configured(["kept"])
        text = String(decoding: metrics.scrape(), as: UTF8.self)
        #expect(text.contains(#"hammock_source_consecutive_failures{source="kept"} 0.0"#), "\(text)")
        #expect(!text.contains(#"source="dropped""#))
    }
}
