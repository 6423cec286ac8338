import Observation

/// Any `Loadable` as an `@Observable` model on the main actor, for UI code: SwiftUI (or anything that uses
/// Observation) redraws when `state` changes.
///
/// ```swift
/// @State var load = LoadableModel(hammock.source("load", as: Load.self))
/// …
/// if let load = load.content { Text(load.summary) } else if load.isLoading { ProgressView() }
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
        following = Task { [weak self, states = loadable.states] in
            do {
                for try await state in states {
                    guard let self else { return }
                    self.state = state
                }
            } catch {
                self?.streamError = error
            }
        }
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
