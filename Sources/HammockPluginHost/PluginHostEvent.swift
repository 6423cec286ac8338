import HammockCore
import HammockJSON
import Synchronization

/// What a `PluginHost` tells the engine of its plugin, through the `PluginHost.Report` the engine gives it.
///
/// A load may take minutes and a plugin may push at any time, so a host answers by event, never by return
/// value. These are the host's words only: the engine wraps each in one of its own inputs
/// (`EngineInput.plugin`) beside the ones the host knows nothing of (control lines, the clock, reloads).
package enum PluginHostEvent: Sendable {
    case loadFinished(source: SourceID, loadID: Int, outcome: LoadOutcome)
    /// The answers of one read of a plugin's output, in order: applied in one turn of the engine.
    case loadsFinished([FinishedLoad])
    /// The plugin holds the load back (it queues loads); `loadStarted` follows when it begins.
    case loadQueued(source: SourceID, loadID: Int)
    case loadStarted(source: SourceID, loadID: Int)
    case pushed(source: SourceID, mailbox: PushMailbox)
    case pushedError(source: SourceID, error: SourceError)
    /// The plugin said hello, with its template rules (`TemplateRules`): the engine may fill in its sources'
    /// templates from now on.
    case templateRulesLearned(kind: Kind)
    /// The plugin refused a source's options when it was configured for a load, with nobody checking them
    /// (under `hammock serve` a plugin starts with its kind's first load, so nothing checked them before):
    /// the load's error follows; the engine logs the problems at their line and column.
    case optionsRefused(source: SourceID, problems: [OptionProblem])
}

/// One `PluginHost` among every host a process makes, named in each of its events: a reload starts hosts
/// to check a configuration that may yet be refused, and until they are shut down their plugins may still
/// answer or push (a file plugin checking a new path watches it), which must not reach the running sources.
package struct PluginHostID: Hashable, Sendable, CustomStringConvertible {
    package let kind: Kind
    private let serial: Int

    private static let serials = Atomic<Int>(0)

    /// A new id, never given before in this process.
    package init(kind: Kind) {
        self.kind = kind
        serial = Self.serials.wrappingAdd(1, ordering: .relaxed).newValue
    }

    package var description: String { "\(kind.rawValue)#\(serial)" }
}

/// The end of one load: what `PluginHostEvent.loadFinished` says, for a batch of them.
package struct FinishedLoad: Sendable {
    package let source: SourceID
    package let loadID: Int
    package let outcome: LoadOutcome

    package init(source: SourceID, loadID: Int, outcome: LoadOutcome) {
        self.source = source
        self.loadID = loadID
        self.outcome = outcome
    }
}

/// Who counts this process's plugin restarts (`--metrics`), for the hosts, which the engine makes and
/// remakes on reloads without a path for it: set once at start-up (the engine's
/// `InstalledEngineObserver.install`), read only when a plugin restarts, on the restarting host's actor.
package enum PluginRestartObserver {
    package static let current = Mutex<(@Sendable (Kind) -> Void)?>(nil)
}

/// The newest push of one source that the engine has not taken yet.
///
/// A plugin may push faster than the engine shows content (a stream printing a million lines), and the
/// inbox is unbounded, so each push cannot be an input of its own. Instead a source has at most one
/// `pushed` input waiting, which carries this mailbox: pushes that arrive before the engine gets to it
/// replace its content, and the engine takes whatever is newest when it does. So the engine shows every
/// push while it keeps up, the newest one when it does not, and the inbox holds at most one push per source.
///
/// A lock, not an actor: the plugin host and the engine loop each touch it once per push, for the time
/// of a swap, and neither may wait for the other.
package final class PushMailbox: Sendable {
    /// Pushed content, and what the plugin said of it (its `meta`).
    package struct Push: Sendable, Equatable {
        package var content: JSONValue
        package var meta: JSONObject?

        package init(_ content: JSONValue, meta: JSONObject? = nil) {
            self.content = content
            self.meta = meta
        }
    }

    private let content: Mutex<Push?>

    package init(_ push: Push) { self.content = Mutex(push) }

    /// Puts newer content in the mailbox; false when the engine has already emptied it, and a new
    /// mailbox (with an input of its own) must carry the push.
    package func replace(with newer: Push) -> Bool {
        content.withLock { waiting in
            guard waiting != nil else { return false }
            waiting = newer
            return true
        }
    }

    /// The newest content; the engine calls this once, when it reaches the mailbox's input.
    package func take() -> Push? {
        content.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }
    }
}
