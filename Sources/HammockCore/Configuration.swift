import HammockJSON
import OrderedCollections

/// A validated configuration: what `hammock run` acts on. `HammockConfig` builds it from YAML.
public struct Configuration: Sendable, Equatable {
    /// In the order the file declares them.
    public var sources: [SourceDefinition]
    public var views: [ViewDefinition]
    public var plugins: [Kind: PluginDefinition]
    /// Values that came from the environment; they must never be written to stdout or to logs.
    public var secrets: Set<String>
    /// `limits:`: shared budgets of load starts, which sources draw from with `limit:`.
    public var budgets: [BudgetName: BudgetLimit]

    public init(
        sources: [SourceDefinition], views: [ViewDefinition] = [], plugins: [Kind: PluginDefinition] = [:],
        secrets: Set<String> = [], budgets: [BudgetName: BudgetLimit] = [:]
    ) {
        self.sources = sources
        self.views = views
        self.plugins = plugins
        self.secrets = secrets
        self.budgets = budgets
    }

    public var kinds: [Kind] {
        var seen = Set<Kind>()
        return sources.map(\.kind).filter { seen.insert($0).inserted }
    }
}

/// One source: the keys the engine reads, and the options that belong to its kind's plugin.
public struct SourceDefinition: Sendable, Equatable {
    public var id: SourceID
    public var kind: Kind
    /// Every key other than the common ones, as written (templates not yet filled in).
    public var options: JSONObject
    public var refresh: Duration?
    /// `at:`: polled at the schedule's times, in local time, instead of every `refresh`.
    public var schedule: Schedule?
    public var expiration: Duration
    public var retry: RetryPolicy
    public var timeout: Duration
    /// A JSON Pointer into the loaded content; only the value there becomes the source's content.
    public var select: JSONPointer?
    public var cache: Bool
    /// `keep: true`: the source is watched whoever watches (`Demand`), so under `hammock serve` it keeps
    /// polling while no client is subscribed to it.
    public var keep: Bool
    /// `respect-server` (default true): what the server says of its answer's freshness (`Cache-Control:
    /// max-age`, `Expires`, `X-Poll-Interval`) is a floor under `refresh`; false polls as `refresh` says.
    public var respectsServer = true
    /// `limit:`: the budget under `limits:` whose starts this source's loads count against; nil: none.
    public var limit: BudgetName?
    /// The option strings that hold `{{ }}` references.
    public var templates: [TemplatedOption]

    public init(
        id: SourceID, kind: Kind, options: JSONObject = [:], refresh: Duration? = nil,
        expiration: Duration = .seconds(30), retry: RetryPolicy = .standard, timeout: Duration = .seconds(10),
        select: JSONPointer? = nil, cache: Bool = false, keep: Bool = false,
        templates: [TemplatedOption] = []
    ) {
        self.id = id
        self.kind = kind
        self.options = options
        self.refresh = refresh
        self.expiration = expiration
        self.retry = retry
        self.timeout = timeout
        self.select = select
        self.cache = cache
        self.keep = keep
        self.templates = templates
    }

    /// The sources this one's templates read, each once, in order of first use.
    public var inputs: [SourceID] {
        var seen = Set<SourceID>()
        return templates.flatMap { $0.template.references.map(\.sourceID) }.filter { seen.insert($0).inserted }
    }

    /// The options with every template filled in from the inputs' current content.
    public func resolvedOptions(content: (SourceID) -> JSONValue?) -> Result<JSONValue, TemplateResolutionProblem> {
        var options = JSONValue.object(options)
        for templated in templates {
            switch templated.template.render(percentEncode: templated.percentEncode, content: content) {
            case .success(let text): options.replace(at: templated.pointer.tokens[...], with: .string(text))
            case .failure(let problem): return .failure(problem)
            }
        }
        return .success(options)
    }
}

/// How to start the plugin for a kind, when the configuration names it.
public struct PluginDefinition: Sendable, Equatable {
    public var command: [String]
    public init(command: [String]) { self.command = command }
}
