/// When to tell a service manager (systemd's `Type=notify`) what the engine is doing, decided from what the
/// engine does: pure, so that the order READY → RELOADING → READY → STOPPING is tested in memory. The
/// engine sends what it returns as one datagram each (`NotifySocket`, at the edge).
///
/// - `READY=1` once every source has had its first answer (new data from a load or a push, not modified,
///   or an error; content restored from the cache is no answer), or at the end of `--once`. A source that
///   waits for an input which answered without content never loads, so it counts as answered too.
/// - `RELOADING=1` with `MONOTONIC_USEC` when a reload starts, `READY=1` when it is in force or refused.
/// - `STOPPING=1` when the stop begins.
/// - `STATUS=` ("12 sources, 2 failing") whenever the counts change, at most with each of the above.
public struct ServiceNotifier: Sendable {
    private var inputs: [SourceID: [SourceID]]
    /// Sources that have had their first answer, and whether it left them without content.
    private var answered: [SourceID: Bool] = [:]
    private var failing: Set<SourceID> = []
    private var isReady = false
    private var isReloading = false
    private var isStopping = false
    private var lastStatus: String?

    public init(sources: [SourceDefinition]) {
        inputs = Dictionary(sources.map { ($0.id, $0.inputs) }, uniquingKeysWith: { first, _ in first })
    }

    /// A line the engine writes; a source's state line may make it ready or change the status.
    public mutating func observe(_ line: OutputLine) -> String? {
        // Any line may be the one: `hello` of a configuration without sources.
        if case .source(let id, let event?, let state) = line, inputs[id] != nil {
            switch event {
            case .newData(_, origin: .load), .newData(_, origin: .push), .notModified, .error:
                answered[id] = state.content == nil
            case .newData, .requested, .requestCancelled:
                break
            }
            if state.latestError != nil { failing.insert(id) } else { failing.remove(id) }
        }
        if !isReady && !isReloading && !isStopping && everySourceHasAnswered {
            isReady = true
            return message(["READY=1"])
        }
        return isReady && !isStopping ? message([]) : nil
    }

    /// A reload starts (SIGHUP, a `reload` control line, a changed file). `monotonicMicroseconds` is
    /// CLOCK_MONOTONIC, which systemd compares with its own to tell this reload from an earlier one.
    public mutating func reloadStarted(monotonicMicroseconds: UInt64) -> String? {
        guard !isReloading && !isStopping else { return nil }
        isReloading = true
        return message(["RELOADING=1", "MONOTONIC_USEC=\(monotonicMicroseconds)"], forceStatus: false)
    }

    /// The reload is in force (with `sources`, the configuration from now on) or was refused (nil).
    public mutating func reloadEnded(sources: [SourceDefinition]?) -> String? {
        guard isReloading else { return nil }
        isReloading = false
        if let sources {
            inputs = Dictionary(sources.map { ($0.id, $0.inputs) }, uniquingKeysWith: { first, _ in first })
            answered = answered.filter { inputs[$0.key] != nil }
            failing = failing.filter { inputs[$0] != nil }
        }
        guard !isStopping else { return nil }
        // Whether or not every source has answered: systemd waits for READY=1 to end the reload job, and
        // the engine serves (with the old configuration, or the new one as it loads) from now on.
        isReady = true
        return message(["READY=1"], forceStatus: true)
    }

    /// `--once` is done, by its deadline or because every source has settled: ready, if it was not.
    public mutating func finished() -> String? {
        guard !isReady && !isStopping else { return nil }
        isReady = true
        return message(["READY=1"], forceStatus: true)
    }

    /// The stop begins; nothing is said after it.
    public mutating func stopping() -> String? {
        guard !isStopping else { return nil }
        isStopping = true
        return "STOPPING=1"
    }

    public var status: String {
        let count = inputs.count
        return "\(count) source\(count == 1 ? "" : "s"), \(failing.count) failing"
    }

    private var everySourceHasAnswered: Bool {
        inputs.allSatisfy { id, sourceInputs in
            answered[id] != nil || sourceInputs.contains { answered[$0] == true }
        }
    }

    /// `fields` with a STATUS line when the status changed (or `forceStatus`); nil when there is nothing.
    private mutating func message(_ fields: [String], forceStatus: Bool = false) -> String? {
        var fields = fields
        let current = status
        if forceStatus || current != lastStatus {
            lastStatus = current
            fields.append("STATUS=\(current)")
        }
        return fields.isEmpty ? nil : fields.joined(separator: "\n")
    }
}
