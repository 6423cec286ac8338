import CoreMetrics
import FoundationEssentials
import Glibc
import HammockCore
import HammockEngine
import Prometheus
import Synchronization

/// `--metrics`: what hammock counts about itself, as swift-metrics instruments whose handlers live in a
/// swift-prometheus registry, which `MetricsServer` serves at /metrics.
///
/// Each instrument is made with its Prometheus help text through the registry (swift-metrics' factory has no
/// help text to give, and `promtool check metrics` wants one), then wrapped as a swift-metrics `Counter`,
/// `Meter` or `Timer`. Without `--metrics` none of this exists: the engine and the stdout writer hold `nil`
/// and skip every count with one branch.
///
/// The engine knows it only as an `EngineObserver` (a protocol the engine defines), so this module, with
/// swift-metrics, swift-prometheus and SwiftNIO, is linked by the `hammock` executable alone.
public final class EngineMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    let linesWritten: CoreMetrics.Counter
    let linesCoalesced: CoreMetrics.Counter
    /// Each source's series, in a table of hammock's own (see `SourceSeriesTable`).
    let sourceSeries = SourceSeriesTable()
    /// Instruments made so far, by name and labels: the registry fails on a family made twice with other
    /// help, and a scrape must not pay for making them again.
    private let made = Mutex<[String: any Sendable]>([:])

    public init() {
        registry = PrometheusCollectorRegistry()
        factory = PrometheusMetricsFactory(registry: registry)
        linesWritten = CoreMetrics.Counter(
            label: "hammock_stdout_lines_written_total", dimensions: [],
            handler: registry.makeCounter(
                descriptor: Self.descriptor("hammock_stdout_lines_written_total", help: "Lines written on stdout.")),
            factory: factory)
        linesCoalesced = CoreMetrics.Counter(
            label: "hammock_stdout_lines_coalesced_total", dimensions: [],
            handler: registry.makeCounter(
                descriptor: Self.descriptor(
                    "hammock_stdout_lines_coalesced_total",
                    help: "States on stdout replaced by a newer state of the same source or view before they were written.")),
            factory: factory)
        // Count reloads from zero, so that a rate over them has a start.
        _ = reloads(outcome: "success")
        _ = reloads(outcome: "failure")
    }

    /// A metric's whole name (its unit included) and its help text.
    private static func descriptor(_ name: String, help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// Makes these the process's metrics: plugin restarts count from now on (`InstalledEngineObserver`), and
    /// anything else that speaks swift-metrics lands in the same registry.
    public func install() {
        InstalledEngineObserver.install(self)
        MetricsSystem.bootstrap(factory)
    }

    private func instrument<Instrument: Sendable>(_ key: String, make: () -> Instrument) -> Instrument {
        made.withLock { made in
            if let existing = made[key] as? Instrument { return existing }
            let instrument = make()
            made[key] = instrument
            return instrument
        }
    }

    private func counter(_ name: String, help: String, labels: [(String, String)]) -> CoreMetrics.Counter {
        instrument(([name] + labels.map { "\($0)=\($1)" }).joined(separator: ",")) {
            CoreMetrics.Counter(
                label: name, dimensions: labels, handler: registry.makeCounter(descriptor: Self.descriptor(name, help: help), labels: labels),
                factory: factory)
        }
    }

    func reloads(outcome: String) -> CoreMetrics.Counter {
        counter(
            "hammock_reloads_total", help: "Configuration reloads, by outcome: success or failure (refused).",
            labels: [("outcome", outcome)])
    }

    func pluginRestarts(kind: String) -> CoreMetrics.Counter {
        counter(
            "hammock_plugin_restarts_total", help: "Restarts of a kind's plugin after it crashed or stopped answering.",
            labels: [("kind", kind)])
    }

    /// The Prometheus text format of every metric: the registry's, then each source's series.
    public func scrape() -> [UInt8] {
        var buffer = registry.emitToBuffer()
        sourceSeries.render(into: &buffer)
        return buffer
    }
}

extension EngineMetrics: EngineObserver {
    public func wroteLines(_ count: Int) { linesWritten.increment(by: count) }

    public func coalescedLine() { linesCoalesced.increment() }

    public func reloadEnded(succeeded: Bool) { reloads(outcome: succeeded ? "success" : "failure").increment() }

    public func pluginRestarted(kind: String) { pluginRestarts(kind: kind).increment() }

    public func lineObserver(sources: [SourceID]) -> any EngineLineObserver {
        SourceMetricsObserver(metrics: self, sources: sources)
    }
}

/// The per-source series: hammock's own table, rendered in Prometheus's text format by `render`, rather
/// than instruments in swift-prometheus's registry. The registry copies a whole metric family each time it
/// makes a series, so 10,000 sources took 39 s to start (quadratic), and it cannot forget a series, so the
/// sources a reload removed stayed in every scrape for ever (a stale failure counter kept an alert firing).
/// Here a series is made in constant time and `keep(only:)` drops those of sources no longer configured.
final class SourceSeriesTable: Sendable {
    /// The outcomes a load is counted by, in the order they are written.
    static let loadOutcomes = ["newData", "notModified", "error", "cancelled"]
    /// The load-duration histogram's upper bounds, and their `le` labels (as swift-prometheus wrote them).
    static let bucketBounds: [(seconds: Double, label: String)] = [
        (0.01, "0.01"), (0.05, "0.05"), (0.1, "0.1"), (0.25, "0.25"), (0.5, "0.5"), (1, "1.0"), (2.5, "2.5"),
        (5, "5.0"), (10, "10.0"), (30, "30.0"), (60, "60.0"),
    ]

    /// What one source has counted.
    struct Values: Sendable {
        var loads = [Int](repeating: 0, count: SourceSeriesTable.loadOutcomes.count)
        var buckets = [Int](repeating: 0, count: SourceSeriesTable.bucketBounds.count)
        var durationCount = 0
        var durationSum = 0.0
        var consecutiveFailures = 0
        var lastSuccess = 0.0
    }

    /// One source's series. The engine's loop writes it, a scrape on the server's thread reads it.
    final class Series: Sendable {
        let id: String
        let values = Mutex(Values())
        init(id: String) { self.id = id }
    }

    private let series = Mutex<[String: Series]>([:])

    /// The series of `ids`, made for those that have none; every other source's series is dropped.
    func keep(only ids: [String]) -> [String: Series] {
        series.withLock { series in
            var kept: [String: Series] = [:]
            kept.reserveCapacity(ids.count)
            for id in ids { kept[id] = series[id] ?? Series(id: id) }
            series = kept
            return kept
        }
    }

    /// Every source's series, in the order of their ids, each family's lines together as the format wants.
    func render(into buffer: inout [UInt8]) {
        let all = series.withLock { Array($0.values) }
        guard !all.isEmpty else { return }
        // A copy of each source's values, so that the engine waits on no scrape.
        let rows = all.map { ($0.id, $0.values.withLock { $0 }) }.sorted { $0.0 < $1.0 }
        let labels = rows.map { "source=\"\(Self.escaped($0.0))\"" }

        func family(_ name: String, _ type: String, _ help: String) {
            buffer.append(contentsOf: "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n".utf8)
        }
        func line(_ name: String, _ labels: String, _ value: String) {
            buffer.append(contentsOf: "\(name){\(labels)} \(value)\n".utf8)
        }
        family(
            "hammock_source_loads_total", "counter",
            "Loads of a source, by outcome: newData, notModified, error (a push's error included), cancelled.")
        for (index, row) in rows.enumerated() {
            for (outcome, name) in Self.loadOutcomes.enumerated() {
                line("hammock_source_loads_total", labels[index] + ",outcome=\"\(name)\"", String(row.1.loads[outcome]))
            }
        }
        family(
            "hammock_source_load_duration_seconds", "histogram",
            "Time from a load's request to its answer (new data, not modified or an error).")
        for (index, row) in rows.enumerated() {
            for (bucket, bound) in Self.bucketBounds.enumerated() {
                line("hammock_source_load_duration_seconds_bucket", labels[index] + ",le=\"\(bound.label)\"", String(row.1.buckets[bucket]))
            }
            line("hammock_source_load_duration_seconds_bucket", labels[index] + ",le=\"+Inf\"", String(row.1.durationCount))
            line("hammock_source_load_duration_seconds_sum", labels[index], String(row.1.durationSum))
            line("hammock_source_load_duration_seconds_count", labels[index], String(row.1.durationCount))
        }
        family("hammock_source_consecutive_failures", "gauge", "Failed loads of a source since its last success.")
        for (index, row) in rows.enumerated() {
            line("hammock_source_consecutive_failures", labels[index], String(Double(row.1.consecutiveFailures)))
        }
        family(
            "hammock_source_last_success_timestamp_seconds", "gauge",
            "Unix time of a source's last new data or not-modified answer; 0 before the first.")
        for (index, row) in rows.enumerated() {
            line("hammock_source_last_success_timestamp_seconds", labels[index], String(row.1.lastSuccess))
        }
    }

    /// A label value as the text format wants it: backslash, double quote and line feed escaped.
    static func escaped(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") })
        else { return value }
        var escaped = ""
        for character in value.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }
}

/// The per-source side of the metrics, fed from the lines the engine writes; owned by the engine's loop.
struct SourceMetricsObserver: EngineLineObserver {
    let metrics: EngineMetrics
    /// By the id's text, the label the scrape shows.
    private var sources: [String: SourceSeriesTable.Series]
    private var requestedAt: [SourceID: ContinuousClock.Instant] = [:]

    init(metrics: EngineMetrics, sources ids: [SourceID]) {
        self.metrics = metrics
        sources = metrics.sourceSeries.keep(only: ids.map(\.rawValue))
    }

    /// A reload is in force: `ids` are the sources now. The others' series leave the scrape.
    mutating func configured(_ ids: [SourceID]) {
        sources = metrics.sourceSeries.keep(only: ids.map(\.rawValue))
        requestedAt = requestedAt.filter { sources[$0.key.rawValue] != nil }
    }

    mutating func observe(_ line: OutputLine) {
        // A source no longer configured gets no series back.
        guard case .source(let id, let event?, let state) = line, let source = sources[id.rawValue] else { return }
        var outcome: Int?
        var duration: Double?
        switch event {
        case .requested:
            requestedAt[id] = .now
            return
        case .requestCancelled:
            requestedAt[id] = nil
            source.values.withLock { $0.loads[3] += 1 }
            return
        case .newData(_, origin: .load): outcome = 0
        case .notModified: outcome = 1
        case .error: outcome = 2
        case .newData(_, origin: .push):
            outcome = nil  // no load, but a success all the same
        case .newData:
            return  // the cache, an override or a wipe: not the source's own doing
        }
        if outcome != nil, let start = requestedAt.removeValue(forKey: id) {
            let (seconds, attoseconds) = (ContinuousClock.now - start).components
            duration = Double(seconds) + Double(attoseconds) / 1e18
        }
        let success = state.latestError == nil ? Date().timeIntervalSince1970 : nil
        source.values.withLock { values in
            if let outcome { values.loads[outcome] += 1 }
            if let duration {
                for (index, bound) in SourceSeriesTable.bucketBounds.enumerated() where duration <= bound.seconds {
                    values.buckets[index] += 1
                }
                values.durationCount += 1
                values.durationSum += duration
            }
            values.consecutiveFailures = state.failures
            if let success { values.lastSuccess = success }
        }
    }
}

