import HammockCore
import HammockJSON

/// A failing source of a view, with its error.
public struct ViewError: Sendable, Hashable {
    public var source: String
    public var error: LoadError

    public init(source: String, error: LoadError) {
        self.source = source
        self.error = error
    }
}

/// Everything a view line says, its content decoded: what a screen needs to draw the view.
public struct ViewLoadableState<Content: Sendable>: Sendable {
    /// From the view's display rules: `loading`, `error`, `data` or `idle`.
    public var status: ViewStatus
    /// The view's content (`{source: content}` on the wire) once the view is ready, decoded.
    public var content: Content?
    /// The first failing source's error in the view's order, or the content's decoding failure.
    public var latestError: LoadError?
    /// Every failing source's error, in the view's order.
    public var errors: [ViewError]
    /// Whether `retry()` has something to retry.
    public var canTryAgain: Bool

    public init(
        status: ViewStatus = .idle, content: Content? = nil, latestError: LoadError? = nil, errors: [ViewError] = [],
        canTryAgain: Bool = false
    ) {
        self.status = status
        self.content = content
        self.latestError = latestError
        self.errors = errors
        self.canTryAgain = canTryAgain
    }

    /// Before the engine's first line for the view.
    public static var initial: Self { Self() }

    public var isLoading: Bool { status == .loading }
}

extension ViewLoadableState: Equatable where Content: Equatable {}
extension ViewLoadableState: Hashable where Content: Hashable {}

/// One of the engine's views, its content (`{source: content}`) decoded into `Content`: typically a struct
/// with one member per source.
///
///     struct System: Decodable, Sendable { var load: String; var clock: String }
///     let system = await hammock.view("system", as: System.self)
///     for try await state in system.viewStates { draw(state.status, state.content, state.errors) }
///
/// As a `Loadable`, its `state` is the view's line seen as one resource: content, `latestError`,
/// `isLoading` (status `loading`), `failures` (how many of its sources fail) and no timestamp. `viewState`
/// and `viewStates` give the whole line: status, errors by source, `canTryAgain`. Decoding, streams, control
/// and fakes behave as `TypedSource`'s do.
public struct TypedView<Content: Decodable & Sendable>: Loadable {
    /// The view's id in the configuration.
    public let id: String
    private let viewOutput: LatestValue<ViewLoadableState<Content>>
    private let output: LatestValue<LoadableState<Content>>
    private let hammock: Hammock?

    init(
        id: String, viewOutput: LatestValue<ViewLoadableState<Content>>, output: LatestValue<LoadableState<Content>>,
        hammock: Hammock?
    ) {
        self.id = id
        self.viewOutput = viewOutput
        self.output = output
        self.hammock = hammock
    }

    public var state: LoadableState<Content> { output.value }

    public var states: AsyncThrowingStream<LoadableState<Content>, any Error> { output.stream }

    /// The latest view line.
    public var viewState: ViewLoadableState<Content> { viewOutput.value }

    /// The current view line, then every distinct one, latest wins.
    public var viewStates: AsyncThrowingStream<ViewLoadableState<Content>, any Error> { viewOutput.stream }

    public var status: ViewStatus { viewState.status }
    public var errors: [ViewError] { viewState.errors }
    public var canTryAgain: Bool { viewState.canTryAgain }

    /// Loads every source of the view now.
    public func load() async throws { try await perform(.load(target)) }

    /// Loads each source of the view unless it is loading or fresh.
    public func loadIfNeeded() async throws { try await perform(.loadIfNeeded(target)) }

    /// Cancels the loads in flight of the view's sources.
    public func cancel() async throws { try await perform(.cancel(target)) }

    /// Loads every failing source of the view: the "try again" button.
    public func retry() async throws { try await perform(.retry(target)) }

    /// Forgets the content and error of every source of the view, as if they had never loaded.
    public func wipe() async throws { try await perform(.wipe(target)) }

    /// The control lines' target: the app names views as strings, the commands as `ViewID`.
    private var target: ControlTarget { .view(ViewID(id)) }

    private func perform(_ command: ControlCommand) async throws {
        try await hammock?.perform(command)
    }
}

// MARK: - Fakes

extension TypedView {
    /// A view with this state and no engine, for tests and previews; its control methods do nothing.
    public static func fake(viewState: ViewLoadableState<Content>, id: String = "fake") -> Self {
        let loadable = LoadableState(
            content: viewState.content, latestError: viewState.latestError, isLoading: viewState.isLoading,
            failures: viewState.errors.count)
        return TypedView(
            id: id, viewOutput: LatestValue(viewState, isDistinct: { _, _ in true }),
            output: LatestValue(loadable, isDistinct: { _, _ in true }), hammock: nil)
    }

    /// A view showing `content`.
    public static func fake(_ content: Content, id: String = "fake") -> Self {
        fake(viewState: ViewLoadableState(status: .data, content: content), id: id)
    }

    /// A view waiting for its first content.
    public static func fakeLoading(id: String = "fake") -> Self {
        fake(viewState: ViewLoadableState(status: .loading), id: id)
    }

    /// A view whose source `source` fails with `error`.
    public static func fakeFailure(_ error: LoadError, source: String = "fake", id: String = "fake") -> Self {
        fake(
            viewState: ViewLoadableState(
                status: .error, latestError: error, errors: [ViewError(source: source, error: error)],
                canTryAgain: true),
            id: id)
    }
}
