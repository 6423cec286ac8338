import HammockCore
import Observation

/// Any `Loadable` as an `@Observable` model on the main actor, for UI code: SwiftUI (or anything that uses
/// Observation) redraws when `state` changes.
///
/// ```swift
/// @State var load = LoadableModel(await hammock.source("load", as: Load.self))
/// …
/// if let content = load.content { Text(content.summary) } else if load.isLoading { ProgressView() }
/// ```
///
/// The model follows the loadable's `states` from the moment it is made until it is released or the stream
/// ends; when the stream ends with an error (a hammock source's engine exited), `streamError` holds it and
/// `state` keeps the last state.
@MainActor
@Observable
public final class LoadableModel<Content: Sendable> {
    /// The loadable's latest state.
    public private(set) var state: LoadableState<Content>
    /// The error that ended the loadable's `states`; `nil` while it runs.
    public private(set) var streamError: (any Error)?

    @ObservationIgnored public let loadable: any Loadable<Content>
    @ObservationIgnored private var following: Task<Void, Never>?

    public init(_ loadable: some Loadable<Content>) {
        self.loadable = loadable
        state = loadable.state
        following = follow(
            loadable.states, into: self, update: { $0.state = $1 }, end: { $0.streamError = $1 })
    }

    isolated deinit {
        following?.cancel()
    }

    public var content: Content? { state.content }
    public var latestError: LoadError? { state.latestError }
    public var isLoading: Bool { state.isLoading }

    /// The loadable's `load()`.
    public func load() async throws { try await loadable.load() }
    /// The loadable's `loadIfNeeded()`.
    public func loadIfNeeded() async throws { try await loadable.loadIfNeeded() }
    /// The loadable's `cancel()`.
    public func cancel() async throws { try await loadable.cancel() }
}

/// A view (a hammock `TypedView`, or a client-side `LoadableGroup`) as an `@Observable` model on the main
/// actor: its whole view state (status, content, errors by source, `canTryAgain`) and its "try again".
///
/// ```swift
/// @State var system = ViewModel(await hammock.view("system", as: System.self))
/// …
/// switch system.status {
/// case .data: SystemView(system.content!)
/// case .loading: ProgressView()
/// case .error: Button("Try again") { Task { try await system.retry() } }.disabled(!system.canTryAgain)
/// case .idle: EmptyView()
/// }
/// ```
@MainActor
@Observable
public final class ViewModel<Content: Sendable> {
    /// The view's latest state.
    public private(set) var viewState: ViewLoadableState<Content>
    /// The error that ended the view's `viewStates`; `nil` while it runs.
    public private(set) var streamError: (any Error)?

    @ObservationIgnored public let view: any ViewLoadable<Content>
    @ObservationIgnored private var following: Task<Void, Never>?

    public init(_ view: some ViewLoadable<Content>) {
        self.view = view
        viewState = view.viewState
        following = follow(
            view.viewStates, into: self, update: { $0.viewState = $1 }, end: { $0.streamError = $1 })
    }

    isolated deinit {
        following?.cancel()
    }

    public var status: ViewStatus { viewState.status }
    public var content: Content? { viewState.content }
    public var latestError: LoadError? { viewState.latestError }
    public var errors: [ViewError] { viewState.errors }
    public var canTryAgain: Bool { viewState.canTryAgain }
    public var isLoading: Bool { viewState.isLoading }

    /// The view's `retry()`: loads again what fails.
    public func retry() async throws { try await view.retry() }
    /// The view's `load()`.
    public func load() async throws { try await view.load() }
    /// The view's `loadIfNeeded()`.
    public func loadIfNeeded() async throws { try await view.loadIfNeeded() }
    /// The view's `cancel()`.
    public func cancel() async throws { try await view.cancel() }
}

/// Copies each value of `values` into `model` on the main actor until the model is released (holding it
/// weakly, so the model's lifetime stays its owner's) or the stream ends.
@MainActor
private func follow<Model: AnyObject, Value: Sendable>(
    _ values: AsyncThrowingStream<Value, any Error>, into model: Model,
    update: @escaping @MainActor (Model, Value) -> Void, end: @escaping @MainActor (Model, any Error) -> Void
) -> Task<Void, Never> {
    // Unstructured: it follows the stream for the model's life. Kept in the model's `following`, which its
    // `deinit` cancels; it ends too when the stream ends or the model is gone.
    Task { [weak model] in
        do {
            for try await value in values {
                guard let model else { return }
                update(model, value)
            }
        } catch {
            if let model { end(model, error) }
        }
    }
}
