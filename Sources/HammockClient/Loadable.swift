import Foundation
import HammockCore
import Synchronization

/// A failure as a consumer sees it: the engine's `latestError`, or the client's own (content that does not
/// decode into the consumer's type, a control line the engine refused).
public struct LoadError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var httpStatus: Int?
    public var exitStatus: Int?
    /// The engine's machine-readable cause (`timeout`, `fileMissing`, …), or `decodingFailed` for content
    /// of the wrong shape.
    public var code: String?
    /// When the failing side said it may be asked again (a `Retry-After`, a rate limit's reset): the engine
    /// retries no sooner (`retryAt` on the wire).
    public var retryAt: Date?

    public init(message: String, httpStatus: Int? = nil, exitStatus: Int? = nil, code: String? = nil, retryAt: Date? = nil) {
        self.message = message
        self.httpStatus = httpStatus
        self.exitStatus = exitStatus
        self.code = code
        self.retryAt = retryAt
    }

    public var description: String { message }

    /// The code of a state whose content did not decode into the consumer's type.
    public static let decodingFailed = "decodingFailed"
}

/// What produced a hammock source's latest state: the line's `event`, and for `newData` its `origin`
/// (docs/protocol.md). Siesta's `ResourceEvent`, less `observerAdded` (every stream starts with the current
/// state anyway).
public enum LoadableEvent: Sendable, Hashable {
    /// A load started.
    case requested
    /// A load in flight was cancelled.
    case requestCancelled
    /// New content (or none, for `wipe`), and where it came from.
    case newData(DataOrigin)
    /// The data has not changed; `timestamp` moved.
    case notModified
    /// The load failed: see `latestError`.
    case error

    /// Where a `newData` came from.
    public enum DataOrigin: String, Sendable, Hashable {
        /// The answer to a load.
        case load
        /// The plugin noticed a change by itself (a watched file, a streamed line).
        case push
        /// Restored from the offline cache at start.
        case cache
        /// Set by a control line (`override`).
        case override
        /// Cleared by a control line, or because the source's request changed.
        case wipe
    }

    /// The wire's `event` and `origin`; `nil` for a `null` event (a snapshot of a source with no event yet)
    /// and for names this version does not know (a newer engine's).
    init?(event: String?, origin: String?) {
        switch event {
        case "requested": self = .requested
        case "requestCancelled": self = .requestCancelled
        case "notModified": self = .notModified
        case "error": self = .error
        case "newData":
            guard let origin = origin.flatMap(DataOrigin.init(rawValue:)) else { return nil }
            self = .newData(origin)
        default: return nil
        }
    }
}

/// Siesta's resource state on the consumer's side: the latest content, the latest error (which never
/// clears the content: stale data stays on screen while the error is shown), whether a load is in flight,
/// when the latest answer came, and how many loads failed in a row.
public struct LoadableState<Content: Sendable>: Sendable {
    public var content: Content?
    public var latestError: LoadError?
    public var isLoading: Bool
    /// Time of the latest data, not-modified answer or error; `nil` before any.
    public var timestamp: Date?
    /// Consecutive failed loads.
    public var failures: Int
    /// What produced this state, for a hammock source (its line's `event` and `origin`); `nil` before its
    /// first event, and for views, groups and the app's own sequences, which have no events.
    public var latestEvent: LoadableEvent?
    /// What the loader said of the answer besides the content, for a hammock source whose kind says
    /// something (an HTTP status and headers, a command's exit status); `nil` otherwise.
    public var meta: SourceMeta?

    public init(
        content: Content? = nil, latestError: LoadError? = nil, isLoading: Bool = false, timestamp: Date? = nil,
        failures: Int = 0, latestEvent: LoadableEvent? = nil, meta: SourceMeta? = nil
    ) {
        self.meta = meta
        self.content = content
        self.latestError = latestError
        self.isLoading = isLoading
        self.timestamp = timestamp
        self.failures = failures
        self.latestEvent = latestEvent
    }

    /// Nothing loaded, nothing failed, nothing in flight.
    public static var initial: Self { Self() }
}

extension LoadableState: Equatable where Content: Equatable {}
extension LoadableState: Hashable where Content: Hashable {}

/// Anything that loads: a hammock source or view, or any `AsyncSequence` the app turns into one with
/// `.loadable()`. UI code and client-side groups treat them alike.
///
/// `states` starts with the current state and then yields every distinct state; a reader that is slow gets
/// the newest state, never a backlog. The stream ends with an error when what feeds it ends with one (for a
/// hammock source: the engine exited; the error says why, with the last lines of its stderr).
public protocol Loadable<Content>: Sendable {
    associatedtype Content: Sendable

    /// The latest state.
    var state: LoadableState<Content> { get }
    /// The current state, then every distinct state, latest wins.
    var states: AsyncThrowingStream<LoadableState<Content>, any Error> { get }

    /// Loads now, even if a load is in flight or the data is fresh. Returns once the load has been asked for
    /// (for a hammock source: the engine acknowledged it); the result arrives on `states`.
    func load() async throws
    /// Loads unless a load is in flight or the data is fresh.
    func loadIfNeeded() async throws
    /// Cancels loads in flight.
    func cancel() async throws
}

extension Loadable {
    /// The content of every state that has content.
    public var contents: AsyncCompactMapSequence<AsyncThrowingStream<LoadableState<Content>, any Error>, Content> {
        states.compactMap(\.content)
    }

    /// Every state's content: `nil` until there is content (and again after a wipe).
    public var optionalContents: AsyncMapSequence<AsyncThrowingStream<LoadableState<Content>, any Error>, Content?> {
        states.map(\.content)
    }
}

/// The latest value of something, handed to any number of readers, each of whom gets the current value at
/// once and then the newest value whenever it reads again: never a backlog, however slow a reader is.
///
/// A `Mutex` rather than an actor: `value` is read synchronously (`Loadable.state`), and each hold is a
/// copy and a loop over the readers.
public final class LatestValue<Value: Sendable>: Sendable {
    private struct State {
        var value: Value
        var readers: [Int: AsyncThrowingStream<Value, any Error>.Continuation] = [:]
        var nextReader = 0
        /// Set once: later readers get the value, then this.
        var end: (any Error)?? = nil
    }

    private let state: Mutex<State>
    private let isDistinct: @Sendable (Value, Value) -> Bool

    /// - Parameter isDistinct: whether a new value is worth telling readers about; equal states are not.
    public init(_ initial: Value, isDistinct: @escaping @Sendable (Value, Value) -> Bool) {
        state = Mutex(State(value: initial))
        self.isDistinct = isDistinct
    }

    public var value: Value { state.withLock { $0.value } }

    /// How many streams are being read: for tests that readers who left are let go.
    var readerCount: Int { state.withLock { $0.readers.count } }

    /// Sets the value and tells every reader, unless it is not distinct from the current one.
    public func send(_ newValue: Value) {
        state.withLock { state in
            guard state.end == nil, isDistinct(state.value, newValue) else { return }
            state.value = newValue
            for reader in state.readers.values { reader.yield(newValue) }
        }
    }

    /// Ends every reader's stream (with `error`, or normally for `nil`); later readers get the last value and
    /// the same end.
    public func finish(throwing error: (any Error)?) {
        let readers = state.withLock { state in
            guard state.end == nil else { return [Int: AsyncThrowingStream<Value, any Error>.Continuation]() }
            state.end = .some(error)
            defer { state.readers = [:] }
            return state.readers
        }
        // Outside the lock: finishing a stream runs its `onTermination`, which takes the lock.
        for reader in readers.values { reader.finish(throwing: error) }
    }

    /// A new reader: the current value first, then the newest at each read.
    public var stream: AsyncThrowingStream<Value, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: Value.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(1))
        state.withLock { state in
            continuation.yield(state.value)
            if let end = state.end {
                continuation.finish(throwing: end)
                return
            }
            let id = state.nextReader
            state.nextReader += 1
            state.readers[id] = continuation
            continuation.onTermination = { [weak self] _ in
                self?.state.withLock { _ = $0.readers.removeValue(forKey: id) }
            }
        }
        return stream
    }
}

extension LatestValue where Value: Equatable {
    public convenience init(_ initial: Value) {
        self.init(initial, isDistinct: { $0 != $1 })
    }
}
