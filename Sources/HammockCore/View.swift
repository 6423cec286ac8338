import HammockJSON
import OrderedCollections

/// When a view's content is there: once all of its sources have content, or once any has.
public enum Readiness: String, Sendable, Hashable, CaseIterable {
    case all
    case any
}

/// One display rule; a view's rules are tried in order and the first that matches gives its status.
public enum DisplayRule: String, Sendable, Hashable, CaseIterable {
    /// Any source is loading → `loading`.
    case loading
    /// Any source has a latest error → `error`.
    case error
    /// Any source has content, and so does the view → `data`.
    case anyData
    /// Every source has content → `data`.
    case allData
    /// The view has content → `data`.
    case alwaysData

    // Every data rule needs the view to have content (its readiness holds): `data` always comes with
    // content, as Siesta's content block renders only with content. SPEC §2 says `alwaysData` matches
    // always; hammock deviates so that a consumer's `case .data:` can use the content without a check
    // (before, `ready: all` with `standard` said `data` over one source of two, with no content).

    /// The named presets, from SiestaExt's `ResourceStatusOverlay` display priorities.
    public static let presets: [String: [DisplayRule]] = [
        "standard": .standard, "overlay": .overlay, "noError": .noError, "dataOnly": .dataOnly,
    ]

    public static func defaultRules(for readiness: Readiness) -> [DisplayRule] {
        switch readiness {
        case .all: [.allData, .loading, .error]
        case .any: [.anyData, .loading, .error]
        }
    }
}

/// The presets by name, for code: `display: .standard`.
extension Array where Element == DisplayRule {
    /// Favour data: stale data beats a spinner or an error.
    public static var standard: Self { [.anyData, .loading, .error] }
    /// A spinner, then an error, over the data.
    public static var overlay: Self { [.loading, .error, .anyData] }
    /// Never an error: a spinner, else the data (or `idle` while there is none).
    public static var noError: Self { [.loading, .alwaysData] }
    /// The data whenever there is some, whatever is loading or failing; else `idle`.
    public static var dataOnly: Self { [.alwaysData] }
}

public enum ViewStatus: String, Sendable, Hashable {
    case loading, error, data, idle
}

/// A view as declared in the configuration.
public struct ViewDefinition: Sendable, Hashable {
    public var id: ViewID
    public var sources: [SourceID]
    public var ready: Readiness
    public var display: [DisplayRule]
    /// How a status bar shows the view (`render:`); `nil` gives the default rendering.
    public var render: ViewRender?
    /// What a click on the view's block does, by i3bar's button number (`on-click:`). A button left out does
    /// nothing, but button 1, which retries the view when it `canTryAgain` and loads it otherwise.
    public var onClick: [Int: ClickAction]

    public init(
        id: ViewID, sources: [SourceID], ready: Readiness = .all, display: [DisplayRule]? = nil,
        render: ViewRender? = nil, onClick: [Int: ClickAction] = [:]
    ) {
        self.id = id
        self.sources = sources
        self.ready = ready
        self.display = display ?? DisplayRule.defaultRules(for: ready)
        self.render = render
        self.onClick = onClick
    }
}

/// What a view line carries: everything a consumer needs to redraw the view.
public struct ViewState: Sendable, Equatable {
    public var status: ViewStatus
    /// `{source: content}` once the view is ready, else `null`.
    public var content: JSONValue
    /// The error of the first failing source in the view's order.
    public var latestError: SourceError?
    /// Every failing source's error, by source, in the view's order.
    public var errors: [(source: SourceID, error: SourceError)]
    /// Whether the consumer's "try again" (`{"op":"retry","view":…}`) has something to retry.
    public var canTryAgain: Bool

    public init(
        status: ViewStatus, content: JSONValue, latestError: SourceError? = nil,
        errors: [(source: SourceID, error: SourceError)] = [], canTryAgain: Bool = false
    ) {
        self.status = status
        self.content = content
        self.latestError = latestError
        self.errors = errors
        self.canTryAgain = canTryAgain
    }

    public static func == (lhs: ViewState, rhs: ViewState) -> Bool {
        lhs.status == rhs.status && lhs.content == rhs.content && lhs.latestError == rhs.latestError
            && lhs.canTryAgain == rhs.canTryAgain
            && lhs.errors.elementsEqual(rhs.errors) { $0.source == $1.source && $0.error == $1.error }
    }
}

extension ViewDefinition {
    /// Merges the states of the view's sources, in the view's order, into the view's state.
    public func evaluate(_ state: (SourceID) -> SourceState) -> ViewState {
        let states = sources.map { (id: $0, state: state($0)) }
        var content = JSONValue.null
        if ready.isReady(states.lazy.map(\.state)) {
            var merged = JSONObject()
            for entry in states { merged[entry.id.rawValue] = entry.state.content ?? .null }
            content = .object(merged)
        }
        let errors = states.compactMap { entry in entry.state.latestError.map { (source: entry.id, error: $0) } }
        return ViewState(
            status: display.status(for: states.lazy.map(\.state), ready: ready), content: content,
            latestError: errors.first?.error, errors: errors, canTryAgain: !errors.isEmpty)
    }
}

// MARK: - The rules over any state

/// What readiness and the display rules look at in a member's state: a hammock source's `SourceState`, or
/// anything else a client merges under the same rules (HammockClient's `LoadableGroup`).
///
/// The rules exist once, here; `ViewDefinition.evaluate` and client-side groups both call them.
public protocol DisplayRuleInput {
    /// Whether the member has content (JSON `null` counts: it is content).
    var hasContent: Bool { get }
    var isLoading: Bool { get }
    /// Whether the member has a latest error (stale content may sit beside it).
    var hasError: Bool { get }
}

extension SourceState: DisplayRuleInput {
    public var hasError: Bool { latestError != nil }
}

extension Readiness {
    /// Whether a view over these member states has content: `all` once every member has some (so a view of
    /// no members is ready), `any` once one has.
    public func isReady<States: Collection>(_ states: States) -> Bool where States.Element: DisplayRuleInput {
        switch self {
        case .all: states.allSatisfy(\.hasContent)
        case .any: states.contains(where: \.hasContent)
        }
    }
}

extension DisplayRule {
    /// The status this rule gives over these member states, or `nil` when it does not match.
    ///
    /// - Parameter viewHasContent: whether the view has content (`Readiness.isReady`); a data rule matches
    ///   only then, so that `data` never comes without content.
    public func status<States: Collection>(for states: States, viewHasContent: Bool) -> ViewStatus?
    where States.Element: DisplayRuleInput {
        switch self {
        case .loading: states.contains(where: \.isLoading) ? .loading : nil
        case .error: states.contains(where: \.hasError) ? .error : nil
        case .anyData: viewHasContent && states.contains(where: \.hasContent) ? .data : nil
        case .allData: viewHasContent && states.allSatisfy(\.hasContent) ? .data : nil
        case .alwaysData: viewHasContent ? .data : nil
        }
    }
}

extension Sequence where Element == DisplayRule {
    /// The status of the first rule that matches these member states, in the rules' order; `idle` when none
    /// does. `ready` says when the view has content, which every data rule needs.
    public func status<States: Collection>(for states: States, ready: Readiness) -> ViewStatus
    where States.Element: DisplayRuleInput {
        let viewHasContent = ready.isReady(states)
        return lazy.compactMap { rule in rule.status(for: states, viewHasContent: viewHasContent) }.first ?? .idle
    }
}

// MARK: - Evaluating a view as its sources change

/// A view's counts over its members' states, moved as each member changes, so that the view's state is read
/// off the counts: what `ViewDefinition.evaluate` gives, at the cost of the view's errors (and of its content
/// once it is ready) instead of its size.
///
/// The engine evaluates a view after every event of one of its sources. A full evaluation walks every
/// member, so one view over 10,000 sources made `run --once` quadratic (179 s, where 2 s without the view).
public struct ViewTally: Sendable {
    public let definition: ViewDefinition
    /// Where each member stands in the view's `sources` (a source listed twice counts twice, as in `evaluate`).
    private let positions: [SourceID: [Int]]
    /// What was last counted for each member that has anything to count.
    private var counted: [SourceID: Counted] = [:]
    private var withContent = 0
    private var loading = 0
    /// Each failing member's error, by position in the view's order.
    private var failing: [Int: SourceError] = [:]

    private struct Counted: Sendable {
        var hasContent: Bool
        var isLoading: Bool
        var error: SourceError?
    }

    /// Counts every member's current state.
    public init(_ definition: ViewDefinition, state: (SourceID) -> SourceState) {
        self.definition = definition
        var positions: [SourceID: [Int]] = [:]
        for (position, id) in definition.sources.enumerated() { positions[id, default: []].append(position) }
        self.positions = positions
        for id in positions.keys { update(id, to: state(id)) }
    }

    /// `id`'s state is now `state`; a source the view does not hold changes nothing.
    public mutating func update(_ id: SourceID, to state: SourceState) {
        guard let places = positions[id] else { return }
        let new = Counted(hasContent: state.content != nil, isLoading: state.isLoading, error: state.latestError)
        let old = counted[id] ?? Counted(hasContent: false, isLoading: false, error: nil)
        let weight = places.count
        withContent += weight * ((new.hasContent ? 1 : 0) - (old.hasContent ? 1 : 0))
        loading += weight * ((new.isLoading ? 1 : 0) - (old.isLoading ? 1 : 0))
        if new.error != old.error {
            for place in places { failing[place] = new.error }
        }
        counted[id] = new.hasContent || new.isLoading || new.error != nil ? new : nil
    }

    private var isReady: Bool {
        switch definition.ready {
        case .all: withContent == definition.sources.count
        case .any: withContent > 0
        }
    }

    /// `DisplayRule.status(for:viewHasContent:)` over the counts: a data rule matches only when the view has
    /// content.
    private func status(of rule: DisplayRule) -> ViewStatus? {
        switch rule {
        case .loading: loading > 0 ? .loading : nil
        case .error: failing.isEmpty ? nil : .error
        case .anyData: isReady && withContent > 0 ? .data : nil
        case .allData: isReady && withContent == definition.sources.count ? .data : nil
        case .alwaysData: isReady ? .data : nil
        }
    }

    /// The view's state, as `definition.evaluate` gives it; `content` is read only once the view is ready.
    public func evaluate(content: (SourceID) -> JSONValue?) -> ViewState {
        var merged = JSONValue.null
        if isReady {
            var object = JSONObject()
            for id in definition.sources { object[id.rawValue] = content(id) ?? .null }
            merged = .object(object)
        }
        let errors = failing.keys.sorted().map { (source: definition.sources[$0], error: failing[$0]!) }
        return ViewState(
            status: definition.display.lazy.compactMap { status(of: $0) }.first ?? .idle, content: merged,
            latestError: errors.first?.error, errors: errors, canTryAgain: !errors.isEmpty)
    }
}
