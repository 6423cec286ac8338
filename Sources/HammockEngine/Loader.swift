import HammockCore
import HammockJSON
import Synchronization

/// Something that loads the sources of one kind: the built-in `fake` kind, or a plugin process.
///
/// Loaders answer through the engine's inbox (`EngineInput`), never by return value, because a load may
/// take minutes and a plugin may push new data at any time.
protocol SourceLoader: Sendable {
    func start(_ request: LoadRequest) async
    func cancel(source: String, loadID: Int) async
    /// The source left the configuration: stop watching it, end its command.
    func remove(source: String) async
    /// Ends every load and any process the loader started; returns when they are gone.
    func shutdown() async
}

/// Everything that can wake the engine.
enum EngineInput: Sendable {
    case loadFinished(source: String, loadID: Int, outcome: LoadOutcome)
    case pushed(source: String, mailbox: PushMailbox)
    case pushedError(source: String, error: SourceError)
    case control([UInt8])
    case controlTooLong(Int)
    case tick
    /// The wall clock was stepped or the machine slept (`ClockWatch`).
    case clockJumped
    /// SIGHUP: read the configuration again.
    case reload
    case stop(reason: String)
}

typealias EngineInbox = AsyncStream<EngineInput>.Continuation

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
final class PushMailbox: Sendable {
    private let content: Mutex<JSONValue?>

    init(_ content: JSONValue) { self.content = Mutex(content) }

    /// Puts newer content in the mailbox; false when the engine has already emptied it, and a new
    /// mailbox (with an input of its own) must carry the push.
    func replace(with newer: JSONValue) -> Bool {
        content.withLock { waiting in
            guard waiting != nil else { return false }
            waiting = newer
            return true
        }
    }

    /// The newest content; the engine calls this once, when it reaches the mailbox's input.
    func take() -> JSONValue? {
        content.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }
    }
}
