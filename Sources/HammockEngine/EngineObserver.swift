import HammockCore
import HammockPluginHost

/// What the engine tells a feature that watches a run from outside, so that the feature lives in a module
/// of its own and the engine links none of what it needs. `--metrics` is the one such feature
/// (HammockMetrics' `EngineMetrics`, over swift-metrics, swift-prometheus and SwiftNIO): the engine target
/// imports none of those, as Hummingbird's core knows its features only through the protocols it defines.
///
/// Without the feature the engine holds `nil` (`Engine.Options.metrics`) and each place below costs one
/// branch. Each method is called on the thread that saw the event, so it must not block: a counter's
/// increment, a lock held for a few stores.
public protocol EngineObserver: Sendable {
    /// `hammock.stdout`, after a write: `count` whole lines reached stdout.
    func wroteLines(_ count: Int)
    /// The caller of `OutputWriter.send`, under the writer's lock: a state waiting on stdout was replaced by
    /// a newer state of the same source or view before it was written.
    func coalescedLine()
    /// The engine's loop: a reload ended, in force (`succeeded`) or refused.
    func reloadEnded(succeeded: Bool)
    /// A `PluginHost`'s actor: its plugin restarts after it crashed or stopped answering (the host finds this
    /// observer in `PluginRestartObserver`, which `InstalledEngineObserver.install` sets).
    func pluginRestarted(kind: String)
    /// The engine's loop, at the start of a run: what sees each line the loop emits, for the configured
    /// `sources`. The loop owns it and alone mutates it, so it needs no lock of its own.
    func lineObserver(sources: [SourceID]) -> any EngineLineObserver
}

/// Sees each line the engine's loop emits (`EngineObserver.lineObserver`); owned by the loop, like the
/// systemd notifier beside it.
public protocol EngineLineObserver {
    /// A reload is in force: `ids` are the configured sources now.
    mutating func configured(_ ids: [SourceID])
    /// A line the loop emits, before the stdout writer takes it.
    mutating func observe(_ line: OutputLine)
}

/// The observer of this process, for the plugin hosts, which the engine makes and remakes on reloads
/// without a path for it: set once at start-up (`--metrics`), read only when a plugin restarts.
public enum InstalledEngineObserver {
    /// Makes `observer` the process's: plugin restarts reach it from now on (through the plugin host's
    /// `PluginRestartObserver`, which knows nothing of the engine's observer).
    public static func install(_ observer: any EngineObserver) {
        PluginRestartObserver.current.withLock { $0 = { kind in observer.pluginRestarted(kind: kind.rawValue) } }
    }
}
