import CoreMetrics
import FoundationEssentials
import Glibc
import HammockCore
import Prometheus
import Synchronization

/// `--metrics`: what hammock counts about itself, as swift-metrics instruments whose handlers live in a
/// swift-prometheus registry, which `MetricsServer` serves at /metrics.
///
/// Each instrument is made with its Prometheus help text through the registry (swift-metrics' factory has no
/// help text to give, and `promtool check metrics` wants one), then wrapped as a swift-metrics `Counter`,
/// `Meter` or `Timer`. Without `--metrics` none of this exists: the engine and the stdout writer hold `nil`
/// and skip every count with one branch.
public final class EngineMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    let linesWritten: CoreMetrics.Counter
    let linesCoalesced: CoreMetrics.Counter
    /// Instruments made so far, by name and labels: the registry fails on a family made twice with other
    /// help, and a scrape must not pay for making them again.
    private let made = Mutex<[String: any Sendable]>([:])

    /// The metrics of this process, for the plugin hosts, which the engine makes and remakes on reloads
    /// without a path for them: set once, when `--metrics` is given; read only when a plugin restarts.
    static let installed = Mutex<EngineMetrics?>(nil)

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

    /// Makes these the process's metrics: plugin restarts count from now on, and anything else that speaks
    /// swift-metrics lands in the same registry.
    public func install() {
        Self.installed.withLock { $0 = self }
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

    private func gauge(_ name: String, help: String, labels: [(String, String)]) -> CoreMetrics.Meter {
        instrument(([name] + labels.map { "\($0)=\($1)" }).joined(separator: ",")) {
            CoreMetrics.Meter(
                label: name, dimensions: labels, handler: registry.makeGauge(descriptor: Self.descriptor(name, help: help), labels: labels),
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

    /// The outcomes a load is counted by.
    static let loadOutcomes = ["newData", "notModified", "error", "cancelled"]

    /// The instruments of one source, made at its first sight.
    struct Source {
        var loads: [String: CoreMetrics.Counter]
        var duration: CoreMetrics.Timer
        var consecutiveFailures: CoreMetrics.Meter
        var lastSuccess: CoreMetrics.Meter
    }

    func source(_ id: String) -> Source {
        let labels = [("source", id)]
        let loads = Dictionary(uniqueKeysWithValues: Self.loadOutcomes.map { outcome in
            (outcome, counter(
                "hammock_source_loads_total",
                help: "Loads of a source, by outcome: newData, notModified, error (a push's error included), cancelled.",
                labels: labels + [("outcome", outcome)]))
        })
        let duration = instrument("hammock_source_load_duration_seconds,source=\(id)") {
            CoreMetrics.Timer(
                label: "hammock_source_load_duration_seconds", dimensions: labels,
                handler: registry.makeDurationHistogram(
                    descriptor: Self.descriptor(
                        "hammock_source_load_duration_seconds",
                        help: "Time from a load's request to its answer (new data, not modified or an error)."),
                    labels: labels,
                    buckets: [
                        .milliseconds(10), .milliseconds(50), .milliseconds(100), .milliseconds(250),
                        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30),
                        .seconds(60),
                    ]),
                factory: factory)
        }
        return Source(
            loads: loads, duration: duration,
            consecutiveFailures: gauge(
                "hammock_source_consecutive_failures", help: "Failed loads of a source since its last success.",
                labels: labels),
            lastSuccess: gauge(
                "hammock_source_last_success_timestamp_seconds",
                help: "Unix time of a source's last new data or not-modified answer; 0 before the first.",
                labels: labels))
    }

    /// The Prometheus text format of every metric.
    public func scrape() -> [UInt8] { registry.emitToBuffer() }
}

/// The per-source side of the metrics, fed from the lines the engine writes; owned by the engine's loop.
struct SourceMetricsObserver {
    let metrics: EngineMetrics
    private var sources: [String: EngineMetrics.Source] = [:]
    private var requestedAt: [String: ContinuousClock.Instant] = [:]

    init(metrics: EngineMetrics, sources ids: [String]) {
        self.metrics = metrics
        for id in ids { sources[id] = metrics.source(id) }
    }

    mutating func observe(_ line: OutputLine) {
        guard case .source(let id, let event?, let state) = line else { return }
        let source = sources[id] ?? metrics.source(id)
        sources[id] = source
        let outcome: String
        switch event {
        case .requested:
            requestedAt[id] = .now
            return
        case .requestCancelled:
            requestedAt[id] = nil
            source.loads["cancelled"]?.increment()
            return
        case .newData(_, origin: .load): outcome = "newData"
        case .notModified: outcome = "notModified"
        case .error: outcome = "error"
        case .newData(_, origin: .push):
            outcome = ""  // no load, but a success all the same
        case .newData:
            return  // the cache, an override or a wipe: not the source's own doing
        }
        if !outcome.isEmpty {
            source.loads[outcome]?.increment()
            if let start = requestedAt.removeValue(forKey: id) { source.duration.recordInterval(since: start) }
        }
        source.consecutiveFailures.set(state.failures)
        if state.latestError == nil {
            source.lastSuccess.set(Date().timeIntervalSince1970)
        }
    }
}

extension CoreMetrics.Timer {
    func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        let (seconds, attoseconds) = elapsed.components
        recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
