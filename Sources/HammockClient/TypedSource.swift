import HammockCore
import HammockJSON

/// One of the engine's sources, its content decoded into `Content`.
///
/// Get one from a running engine, then read its states:
///
///     struct Load: Decodable, Sendable { var text: String }
///     let load = await hammock.source("load", as: Load.self)
///     for try await content in load.contents { print(content.text) }
///
/// `states` begins with the current state and then yields every distinct state, the newest when a reader is
/// slow, never a backlog. Content is decoded straight from the engine's JSON value. Content of the wrong
/// shape does not trap: the state's `latestError` has code `LoadError.decodingFailed` and a message naming
/// the member that did not match, and the last content that did decode stays (stale data beats none).
/// The streams end when the engine does: with `HammockError.engineExited` when it exited by itself, normally
/// after `Hammock.stop()`.
///
/// The control methods return once the engine acknowledged the line; by then the states it caused at once
/// (a load's `isLoading`, an override's content) are in `state`. They throw `HammockError.refused` with the
/// engine's message when it cannot carry the line out (an unknown source).
///
/// For tests and previews of consumer code, `fake(_:)`, `fakeLoading()` and `fakeFailure(_:)` make one
/// with a fixed state and no engine; its control methods do nothing.
public struct TypedSource<Content: Decodable & Sendable>: Loadable {
    /// The source's id in the configuration.
    public let id: String
    let output: LatestValue<LoadableState<Content>>
    /// `nil` for a fake. Holding it keeps the engine running while the source is in use.
    private let hammock: Hammock?

    init(id: String, output: LatestValue<LoadableState<Content>>, hammock: Hammock?) {
        self.id = id
        self.output = output
        self.hammock = hammock
    }

    public var state: LoadableState<Content> { output.value }

    public var states: AsyncThrowingStream<LoadableState<Content>, any Error> { output.stream }

    /// Loads now, even if a load is in flight or the data is fresh.
    public func load() async throws { try await perform(.load(target)) }

    /// Loads unless a load is in flight or the data is fresh.
    public func loadIfNeeded() async throws { try await perform(.loadIfNeeded(target)) }

    /// Cancels the source's loads in flight.
    public func cancel() async throws { try await perform(.cancel(target)) }

    /// Loads the source again (the "try again" of a failed source).
    public func retry() async throws { try await perform(.retry(target)) }

    /// Forgets the source's content and error, as if it had never loaded.
    public func wipe() async throws { try await perform(.wipe(target)) }

    /// Loads `count` more pages of a paginated source (a rest source with `paginate: { lazy: true }`), as
    /// SwiftEthel's sequences fetch pages when they are read. Returns once the pages are in (`state` has
    /// them), and throws when there are none to load (`state.meta?.hasMore` is false) or they did not come.
    public func more(_ count: Int = 1) async throws {
        try await perform(.more(source: SourceID(id), count: count))
    }

    /// Sets the source's content from the app, as JSON (for content not of `Content`'s shape).
    public func override(json content: JSONValue) async throws {
        try await perform(.override(source: SourceID(id), content: content))
    }

    /// The control lines' target: the app names sources as strings, the commands as `SourceID`.
    private var target: ControlTarget { .source(SourceID(id)) }

    private func perform(_ command: ControlCommand) async throws {
        try await hammock?.perform(command)
    }
}

extension TypedSource where Content: Encodable {
    /// Sets the source's content from the app: `content` is encoded as the engine's JSON value, and comes
    /// back on `states` (`newData` with origin `override`) before this returns.
    public func override(_ content: Content) async throws {
        try await override(json: try JSONValueEncoder().encode(content))
    }
}

// MARK: - Fakes

extension TypedSource {
    /// A source with this state and no engine, for tests and previews; its control methods do nothing.
    public static func fake(state: LoadableState<Content>, id: String = "fake") -> Self {
        TypedSource(id: id, output: LatestValue(state, isDistinct: { _, _ in true }), hammock: nil)
    }

    /// A source that has `content`, loaded now.
    public static func fake(_ content: Content, id: String = "fake") -> Self {
        fake(state: LoadableState(content: content, timestamp: .now, latestEvent: .newData(.load)), id: id)
    }

    /// A source loading for the first time: no content yet.
    public static func fakeLoading(id: String = "fake") -> Self {
        fake(state: LoadableState(isLoading: true, latestEvent: .requested), id: id)
    }

    /// A source whose load failed (`content`: the stale content it keeps showing, if any).
    public static func fakeFailure(_ error: LoadError, content: Content? = nil, id: String = "fake") -> Self {
        fake(
            state: LoadableState(
                content: content, latestError: error, timestamp: .now, failures: 1, latestEvent: .error),
            id: id)
    }
}
