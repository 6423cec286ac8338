import FoundationEssentials
import HammockConfig
import HammockCore
import HammockLogging
import HammockPluginHost
import Logging

/// What the engine loop reaches outside itself, in one value, so that a test can put its own in place of
/// each part and drive a whole engine in memory (`EmbeddedEngine` in `Tests/HammockEngineTests`), as
/// swift-nio's `EmbeddedChannel` stands in for a socket.
///
/// `system` is what `hammock run` uses: the clocks of the machine, the configuration file on disk, plugins
/// found by `PluginResolver` (and the built-in ones), the cache under `$HAMMOCK_CACHE_DIR` or its fallbacks,
/// on-click commands as processes, and the orphan sweep. The output, the control mailbox and the clock's
/// thread are not here: `Engine.run(signals:)` makes them over stdout and stdin, and a test passes its own
/// to `Engine.run(output:controls:clock:stop:whenStopping:)`.
struct EngineEnvironment: Sendable {
    /// Both clocks, read once for every input the loop takes (the core is given this `now`, never a clock).
    var now: @Sendable () -> EngineTime
    /// Makes what wakes the loop at the core's next deadline (`.tick` into the inbox).
    var makeClock: @Sendable (EngineInbox) -> any EngineDeadlines
    /// Reads the configuration again, as a reload does.
    var readConfiguration: @Sendable () -> Result<LoadedConfiguration, ConfigurationError>
    /// What runs each kind, and a host for it.
    var plugins: PluginCatalog
    /// The variables `CacheStore` reads to find its directory (`HAMMOCK_CACHE_DIR`, `XDG_CACHE_HOME`, `HOME`).
    var cacheEnvironment: [String: String]
    /// What runs on-click commands (`ClickCommands`: processes below hammock's guard).
    var makeClickCommands: @Sendable (Logger, StandardError) -> any ClickCommandRunner
    /// The last sweep for orphans, once every plugin is down (`OrphanReaper.sweep`).
    var sweepOrphans: @Sendable () -> Void
    /// The local time `at:` schedules are read in.
    var calendar: any LocalCalendar = UTCCalendar()

    /// hammock's own: the machine's clocks, `source` on disk, plugins built in or found by `PluginResolver`.
    static func system(source: ConfigurationSource) -> EngineEnvironment {
        EngineEnvironment(
            now: { .current },
            makeClock: { EngineClock(inbox: $0) },
            readConfiguration: { source.read() },
            plugins: .system,
            cacheEnvironment: ProcessInfo.processInfo.environment,
            makeClickCommands: { ClickCommands(logger: $0, standardError: $1) },
            sweepOrphans: { OrphanReaper.sweep() },
            calendar: SystemCalendar())
    }
}

/// What wakes the engine loop at the core's next deadline: `EngineClock` (a thread in `poll`), or a test's
/// manual clock, which ticks only when the test moves time on.
protocol EngineDeadlines: Sendable {
    /// Arms the next `.tick` (`nil`: none); the loop calls it after every input.
    func schedule(_ deadline: MonotonicInstant?)
    /// Ticks until cancelled.
    func run() async
}

extension EngineClock: EngineDeadlines {}

/// What runs on-click commands: `ClickCommands`, or a test's recorder.
protocol ClickCommandRunner: Sendable {
    /// Runs `click`'s command to its end.
    func run(_ click: ClickCommand) async
    /// Ends every command still running, and runs no more (the stop).
    func endAll() async
}

extension ClickCommands: ClickCommandRunner {}

/// Which plugin runs each kind, and the host that supervises it.
struct PluginCatalog: Sendable {
    /// What would start `kind`, given the `plugins:` of the configuration that names it; nil when no plugin
    /// is found (its sources fail). Looking for an executable is I/O, so the loop asks this, not
    /// `ReloadStateMachine`.
    var origin: @Sendable (_ kind: Kind, _ plugins: [Kind: PluginDefinition]) -> PluginOrigin?
    /// A host of what `origin` says runs `kind`, whose events go into `inbox` (as `EngineInput.plugin`); nil for
    /// a built-in origin of a kind hammock does not serve.
    var makeHost: @Sendable (
        _ kind: Kind, _ origin: PluginOrigin, _ inbox: EngineInbox, _ logger: Logger, _ standardError: StandardError
    ) -> PluginHost?

    /// Built-in kinds in process, every other kind a process found by a `PluginResolver` over the
    /// configuration's `plugins:`.
    static let system = PluginCatalog(
            origin: { kind, plugins in LoaderFactory.origin(of: kind, resolver: PluginResolver(configured: plugins)) },
            makeHost: { kind, origin, inbox, logger, standardError in
                PluginHost(
                    kind: kind, origin: origin, report: { inbox.yield(.plugin($0, from: $1)) }, logger: logger,
                    standardError: standardError)
            })

    /// One host for each kind `configuration` uses whose plugin is found.
    func makeHosts(
        for configuration: Configuration, inbox: EngineInbox, logger: Logger, standardError: StandardError
    ) -> [Kind: PluginHost] {
        var hosts: [Kind: PluginHost] = [:]
        for kind in configuration.kinds {
            guard let origin = origin(kind, configuration.plugins) else { continue }
            hosts[kind] = makeHost(kind, origin, inbox, logger, standardError)
        }
        return hosts
    }
}
