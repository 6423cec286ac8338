import HammockCore
import HammockJSON

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
    case pushed(source: String, content: JSONValue)
    case pushedError(source: String, error: SourceError)
    case control([UInt8])
    case controlTooLong(Int)
    case tick
    /// SIGHUP: read the configuration again.
    case reload
    case stop(reason: String)
}

typealias EngineInbox = AsyncStream<EngineInput>.Continuation
