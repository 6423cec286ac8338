import Foundation
import HammockCore

/// A client-side view: any `Loadable`s, of any content types, merged under a view's rules, so an app can
/// show its own data and hammock's under one status.
///
/// The rules are hammock's own (`Readiness`, `DisplayRule` and its presets, from HammockCore), the same code
/// that evaluates a view in the engine:
/// - `ready: .all` has content once every member has some, `.any` once one has;
/// - `display` rules are tried in order, the first that matches gives the `status`, `idle` if none does
///   (default: `allData` or `anyData` by readiness, then `loading`, then `error`);
/// - `errors` lists every failing member in the group's order, `latestError` is the first of them, and
///   `canTryAgain` says there is one to retry.
///
/// ```swift
/// let screen = LoadableGroup(ready: .any, display: .standard, members: [
///     "system": await hammock.view("system", as: System.self),
///     "mine": LoadableSequence { myFeed.updates() },
/// ])
/// for try await state in screen.viewStates {
///     print(state.status, state.content?["system", as: System.self] as Any)
/// }
/// ```
///
/// Its `viewState` is a `ViewLoadableState`, as a hammock view's: `status`, `content` (the members' contents
/// by name, once ready), `latestError`, `errors` (each failing member, its name in `ViewError.source`) and
/// `canTryAgain`; so UI code (`ViewModel`) shows a group and a hammock view alike.
///
/// As a `Loadable` (so groups nest, and `LoadableModel` shows one), its state maps the group's: content when
/// ready, `latestError` the first member's error, `isLoading` when the status is `loading`, `timestamp` the
/// newest member's, `failures` the number of failing members. A member whose `states` ends with an error
/// (a hammock source whose engine exited) counts from then on as failing with that error, keeping its content.
public final class LoadableGroup: Loadable {
    /// The members' contents by name, in the group's order; a member without content has none here.
    public struct Content: Sendable {
        /// Every member's name, in the group's order (with content or not).
        public let names: [String]
        private let values: [String: any Sendable]

        fileprivate init(names: [String], values: [String: any Sendable]) {
            self.names = names
            self.values = values
        }

        /// The content of the member `name`, if it has content.
        public subscript(name: String) -> (any Sendable)? { values[name] }

        /// The content of the member `name` as `type`; `nil` if it has none or it is of another type.
        public subscript<T>(name: String, as type: T.Type) -> T? { values[name] as? T }
    }

    /// The members' names, in the group's order.
    public let names: [String]
    public let ready: Readiness
    public let display: [DisplayRule]
    private let members: [any Loadable]
    private let merger: Merger
    private let watchers: [Task<Void, Never>]

    /// - Parameters:
    ///   - ready: when the group has content: once every member has some (`.all`), or once any has.
    ///   - display: the rules, in order (a preset: `.standard`, `.overlay`, `.noError`, `.dataOnly`); `nil`
    ///     for the default of the readiness, as in a view.
    ///   - members: each member's name (unique) and the member.
    public init(
        ready: Readiness = .all, display: [DisplayRule]? = nil, members: KeyValuePairs<String, any Loadable>
    ) {
        let names = members.map(\.key)
        precondition(Set(names).count == names.count, "a LoadableGroup's member names must be unique: \(names)")
        self.names = names
        self.ready = ready
        self.display = display ?? DisplayRule.defaultRules(for: ready)
        self.members = members.map(\.value)
        let merger = Merger(
            names: names, rules: (ready, self.display),
            states: self.members.map { (member: any Loadable) in currentState(of: member) })
        self.merger = merger
        watchers = self.members.enumerated().map { index, member in watch(member, as: index, into: merger) }
    }

    deinit {
        for watcher in watchers { watcher.cancel() }
    }

    /// The group's latest state, as a view's.
    public var viewState: ViewLoadableState<Content> { merger.viewStates.value }
    /// The group's current state, then every change, latest wins.
    public var viewStates: AsyncThrowingStream<ViewLoadableState<Content>, any Error> { merger.viewStates.stream }

    public var status: ViewStatus { viewState.status }
    public var errors: [ViewError] { viewState.errors }
    public var canTryAgain: Bool { viewState.canTryAgain }

    public var state: LoadableState<Content> { merger.states.value }
    public var states: AsyncThrowingStream<LoadableState<Content>, any Error> { merger.states.stream }

    /// Loads every member now.
    public func load() async throws { try await forEach(of: members) { try await $0.load() } }
    /// Loads each member that needs it.
    public func loadIfNeeded() async throws { try await forEach(of: members) { try await $0.loadIfNeeded() } }
    /// Cancels every member's loads.
    public func cancel() async throws { try await forEach(of: members) { try await $0.cancel() } }

    /// Loads again every member that has a latest error (the view's "try again"); nothing if none has. A
    /// member that is itself a view (a hammock view, a group) retries only its own failing part.
    public func retry() async throws {
        let failing = await merger.failing()
        try await forEach(of: failing.map { members[$0] }) { member in
            if let view = member as? any ViewLoadable { try await view.retry() } else { try await member.load() }
        }
    }

    /// Runs `body` on every member at once; throws the first error, after all have returned.
    private func forEach(
        of members: [any Loadable], _ body: @escaping @Sendable (any Loadable) async throws -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for member in members { group.addTask { try await body(member) } }
            var firstError: (any Error)?
            while let result = await group.nextResult() {
                if case .failure(let error) = result, firstError == nil { firstError = error }
            }
            if let firstError { throw firstError }
        }
    }
}

/// Follows one member's states into the merger; a member whose stream ends with an error stays failing.
private func watch<Member: Loadable>(
    _ member: Member, as index: Int, into merger: LoadableGroup.Merger
) -> Task<Void, Never> {
    // Unstructured: it follows the member for the group's life. Kept in `watchers`; the group's `deinit`
    // cancels it, or it ends with the member's stream.
    Task {
        do {
            for try await state in member.states { await merger.update(index, to: MemberState(state)) }
        } catch is CancellationError {
            return
        } catch {
            var last = MemberState(member.state)
            last.latestError = error as? LoadError ?? LoadError(message: String(describing: error))
            last.isLoading = false
            await merger.update(index, to: last)
        }
    }
}

private func currentState<Member: Loadable>(of member: Member) -> MemberState { MemberState(member.state) }

/// One member's state with its content erased, as the rules see it.
private struct MemberState: DisplayRuleInput {
    var content: (any Sendable)?
    var latestError: LoadError?
    var isLoading: Bool
    var timestamp: Date?
    var failures: Int

    init<Content>(_ state: LoadableState<Content>) {
        // `map`, not `as?`: content that is itself an optional `nil` is still content.
        content = state.content.map { $0 as any Sendable }
        latestError = state.latestError
        isLoading = state.isLoading
        timestamp = state.timestamp
        failures = state.failures
    }

    var hasContent: Bool { content != nil }
    var hasError: Bool { latestError != nil }
}

extension LoadableGroup {
    /// Keeps every member's latest state and publishes the group's, evaluated by HammockCore's rules.
    fileprivate actor Merger {
        let names: [String]
        let rules: (ready: Readiness, display: [DisplayRule])
        private var members: [MemberState]
        // Set from the actor only, read from anywhere; each member update is a change worth sending (the
        // members' own streams only yield distinct states).
        nonisolated let viewStates: LatestValue<ViewLoadableState<LoadableGroup.Content>>
        nonisolated let states: LatestValue<LoadableState<LoadableGroup.Content>>

        init(names: [String], rules: (ready: Readiness, display: [DisplayRule]), states: [MemberState]) {
            self.names = names
            self.rules = rules
            members = states
            let (view, loadable) = Self.evaluate(names: names, rules: rules, members: states)
            viewStates = LatestValue(view, isDistinct: { _, _ in true })
            self.states = LatestValue(loadable, isDistinct: { _, _ in true })
        }

        func update(_ index: Int, to state: MemberState) {
            members[index] = state
            let (view, loadable) = Self.evaluate(names: names, rules: rules, members: members)
            viewStates.send(view)
            states.send(loadable)
        }

        /// The indices of the members with a latest error.
        func failing() -> [Int] { members.indices.filter { members[$0].hasError } }

        private static func evaluate(
            names: [String], rules: (ready: Readiness, display: [DisplayRule]), members: [MemberState]
        ) -> (ViewLoadableState<LoadableGroup.Content>, LoadableState<LoadableGroup.Content>) {
            var content: LoadableGroup.Content?
            if rules.ready.isReady(members) {
                var values: [String: any Sendable] = [:]
                for (name, member) in zip(names, members) { values[name] = member.content }
                content = LoadableGroup.Content(names: names, values: values)
            }
            let errors = zip(names, members).compactMap { name, member in
                member.latestError.map { ViewError(source: name, error: $0) }
            }
            let status = rules.display.status(for: members, ready: rules.ready)
            let view = ViewLoadableState(
                status: status, content: content, latestError: errors.first?.error, errors: errors,
                canTryAgain: !errors.isEmpty)
            let loadable = LoadableState(
                content: content, latestError: errors.first?.error, isLoading: status == .loading,
                timestamp: members.compactMap(\.timestamp).max(), failures: errors.count)
            return (view, loadable)
        }
    }
}
