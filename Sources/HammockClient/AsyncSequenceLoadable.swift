import Foundation

/// Any `AsyncSequence` as a `Loadable`: its content is the sequence's latest element, so the app's own data
/// (a timer, a socket, a file watcher, an `AsyncStream` it feeds) sits beside hammock's sources under the
/// same state, the same models and the same group rules.
///
/// The state follows the sequence:
/// - it starts iterating at once (a hammock source is loaded by the engine without being asked, and this is
///   its counterpart), so `isLoading` is true until the first element;
/// - each element becomes the content, clears `latestError`, resets `failures` and stamps `timestamp`;
/// - an error the sequence throws becomes `latestError` (a `LoadError` as it is, anything else by its
///   description), counts one more in `failures`, and keeps the content: stale data stays, as in Siesta;
/// - the sequence ending normally just ends loading; its last element stays the content.
///
/// Restarting needs a fresh sequence, so there are two ways to make one:
///
/// ```swift
/// // Restartable: `load()` makes a new sequence from the closure.
/// let prices = LoadableSequence { priceFeed.updates() }
/// // One sequence, iterated once: `load()` cannot restart it.
/// let ticks = AsyncStream { … }.loadable()
/// ```
///
/// Control, for a restartable one: `load()` restarts the sequence now (even while it runs: "load now");
/// `loadIfNeeded()` restarts it only if it failed or was cancelled (a running sequence is loading, one that
/// ended normally has its final content); `cancel()` stops it, keeping its state, with no error (as Siesta
/// treats a cancelled request). Made with `.loadable()`, the sequence runs once and `load()` /
/// `loadIfNeeded()` do nothing after it has started; `cancel()` still stops it.
public actor LoadableSequence<Element: Sendable>: Loadable {
    public typealias Content = Element

    /// Runs one fresh sequence to its end, handing each element to `receive`.
    fileprivate typealias Run = @Sendable (_ receive: @escaping @Sendable (Element) async -> Void) async throws -> Void

    private enum Phase {
        case running
        /// Ended normally: its last element is the content, and there is nothing more to load.
        case finished
        /// Threw, or was cancelled: `loadIfNeeded()` starts it again.
        case stopped
    }

    private let run: Run
    private let restartable: Bool
    private let latest: LatestValue<LoadableState<Element>>
    private var phase = Phase.running
    private var task: Task<Void, Never>?
    /// Which run the actor listens to; elements and endings of an older run (restarted or cancelled) are
    /// dropped.
    private var currentRun = 0

    /// A restartable loadable: `makeSequence` is called at once (in a task), and again at each restart.
    public init<S: AsyncSequence & Sendable>(_ makeSequence: @escaping @Sendable () -> S) where S.Element == Element {
        self.init(restartable: true) { receive in
            for try await element in makeSequence() { await receive(element) }
        }
    }

    fileprivate init(restartable: Bool, run: @escaping Run) {
        self.run = run
        self.restartable = restartable
        // Every element is news (its timestamp is new), so every state the actor sends is distinct; the
        // actor only sends when something changed.
        latest = LatestValue(LoadableState(isLoading: true), isDistinct: { _, _ in true })
        // The first run starts from the actor: a nonisolated init cannot keep its task. Until then the state
        // is already "loading", and a `cancel()` that comes first wins. It ends once it has started the run.
        Task { await self.startFirstRun() }
    }

    private func startFirstRun() {
        guard currentRun == 0, phase == .running, task == nil else { return }
        task = Self.start(run, for: self, as: 0)
    }

    nonisolated public var state: LoadableState<Element> { latest.value }
    nonisolated public var states: AsyncThrowingStream<LoadableState<Element>, any Error> { latest.stream }

    /// Restarts the sequence now (a sequence made with `.loadable()` cannot restart; then nothing happens).
    public func load() async throws {
        guard restartable else { return }
        restart()
    }

    /// Restarts the sequence if it threw or was cancelled, and is restartable.
    public func loadIfNeeded() async throws {
        guard restartable, phase == .stopped else { return }
        restart()
    }

    /// Stops the sequence, keeping the state; no error.
    public func cancel() async throws {
        guard phase == .running else { return }
        currentRun += 1
        task?.cancel()
        task = nil
        phase = .stopped
        update { $0.isLoading = false }
    }

    private func restart() {
        currentRun += 1
        task?.cancel()
        phase = .running
        update { $0.isLoading = true }
        task = Self.start(run, for: self, as: currentRun)
    }

    deinit {
        task?.cancel()
    }

    /// The run holds the loadable weakly: a loadable nobody holds any more goes, and its `deinit` stops the
    /// sequence (an endless one would otherwise keep both alive for ever).
    private static func start(_ run: @escaping Run, for loadable: LoadableSequence, as id: Int) -> Task<Void, Never> {
        // Unstructured: it outlives the call that starts it. Kept in `task`; it ends with the sequence, or when
        // `cancel()`, a restart or the loadable's `deinit` cancels it.
        Task { [weak loadable] in
            do {
                try await run { [weak loadable] element in await loadable?.received(element, from: id) }
                await loadable?.ended(id, throwing: nil)
            } catch {
                await loadable?.ended(id, throwing: error)
            }
        }
    }

    private func received(_ element: Element, from id: Int) {
        guard id == currentRun else { return }
        update { state in
            state.content = element
            state.latestError = nil
            state.failures = 0
            state.isLoading = false
            state.timestamp = Date()
        }
    }

    private func ended(_ id: Int, throwing error: (any Error)?) {
        guard id == currentRun else { return }
        task = nil
        guard let error else {
            phase = .finished
            if state.isLoading { update { $0.isLoading = false } }
            return
        }
        phase = .stopped
        update { state in
            state.latestError = error as? LoadError ?? LoadError(message: String(describing: error))
            state.failures += 1
            state.isLoading = false
            state.timestamp = Date()
        }
    }

    private func update(_ change: (inout LoadableState<Element>) -> Void) {
        var state = latest.value
        change(&state)
        latest.send(state)
    }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// This sequence as a `Loadable` whose content is its latest element; it starts iterating at once.
    ///
    /// The sequence is iterated once, so `load()` cannot restart it; for a sequence that can be made again,
    /// use `LoadableSequence { makeSequence() }`.
    public func loadable() -> LoadableSequence<Element> {
        LoadableSequence(restartable: false) { receive in
            for try await element in self { await receive(element) }
        }
    }
}
