import HammockCore
import HammockJSON

/// One configured source inside a plugin.
///
/// A plugin makes one of these per `configure` and the kit calls `load` for every load the engine asks
/// for, concurrently if it must: a slow load of one source never holds up another. A cancelled load sees
/// task cancellation; the kit answers the engine `cancelled` itself.
public protocol PluginSource: Sendable {
    func load(_ request: PluginLoadRequest) async -> PluginLoadResult
    /// The source was removed or configured anew, or the plugin is shutting down: stop watching, end any
    /// process started for it. Must return only once they are gone.
    func stop() async
    /// Where the tasks of this source's loads run, if not on the concurrency pool: a source whose loads wait
    /// on an I/O library's own threads (a SwiftNIO event loop) names that library's executor here, so a load
    /// does not hop between the library's thread and the pool at every step.
    var loadExecutor: (any TaskExecutor)? { get }
}

extension PluginSource {
    public func stop() async {}
    public var loadExecutor: (any TaskExecutor)? { nil }
}

public struct PluginLoadRequest: Sendable {
    public var id: Int
    public var etag: String?
    public var lastModified: String?
    /// The source's `timeout`; the load must end by then. For a plugin that queues loads, counted from
    /// `started()`.
    public var timeout: Duration?
    /// How many pages a paginated source loads, when its consumer asked for more (the control op `more`);
    /// nil: the kind's own default.
    public var pages: Int? = nil
    /// Sends `started` for this load, once.
    var onStart: (@Sendable () -> Void)?

    /// The load's work begins now: for a plugin run with `queuesLoads: true`, which may hold a load back
    /// (bounding how many run at once), this tells the engine to count the load's timeout from here. Only
    /// the first call says anything; in a plugin that does not queue loads it does nothing.
    public func started() { onStart?() }
}

public indirect enum PluginLoadResult: Sendable {
    case newData(JSONValue, etag: String? = nil, lastModified: String? = nil)
    case notModified
    case error(SourceError)
    /// `answer` (new data, or not modified), with the server's word that it stays fresh for `duration`
    /// (HTTP `Cache-Control: max-age`, `Expires`, `X-Poll-Interval`): the engine polls no sooner, unless the
    /// source says `respect-server: false`. Made by `fresh(for:)`.
    case fresh(PluginLoadResult, for: Duration)
    /// `answer` (new data, or not modified), with what the plugin knows of it besides the content: the
    /// source's `meta` (an HTTP status and headers, a command's exit status, a file's size). New data's meta
    /// replaces the state's; a not-modified answer's updates the members it names. Made by `meta(_:)`.
    case described(PluginLoadResult, meta: JSONObject)
    /// `answer` (new data), which must not be kept on disk (HTTP's `Cache-Control: no-store`): a source
    /// with `cache: true` stores none of it. Made by `stored(_:)`.
    case notStored(PluginLoadResult)

    /// The answer itself (new data, not modified, or an error), without the advice around it.
    public var answer: PluginLoadResult {
        switch self {
        case .fresh(let answer, _), .described(let answer, _), .notStored(let answer): answer.answer
        case .newData, .notModified, .error: self
        }
    }

    /// What the plugin said of the answer (`meta(_:)`), if anything.
    public var metaObject: JSONObject? {
        switch self {
        case .described(_, let meta): meta
        case .fresh(let answer, _), .notStored(let answer): answer.metaObject
        case .newData, .notModified, .error: nil
        }
    }

    /// This answer, stays fresh for `duration` as the server said; itself when `duration` is nil, or when it is
    /// an error (a failure's own advice is `SourceError.retryAfter`).
    public func fresh(for duration: Duration?) -> PluginLoadResult {
        guard let duration else { return self }
        switch self {
        case .newData, .notModified, .described, .notStored: return .fresh(self, for: duration)
        case .fresh(let answer, _): return .fresh(answer, for: duration)
        case .error: return self
        }
    }

    /// This answer, described by `meta`; itself when `meta` is nil or the answer is an error (an error's
    /// state keeps the meta of the content it keeps).
    public func meta(_ meta: JSONObject?) -> PluginLoadResult {
        guard let meta else { return self }
        switch self {
        case .newData, .notModified: return .described(self, meta: meta)
        case .described(let answer, _): return .described(answer, meta: meta)
        case .fresh(let answer, let duration): return .fresh(answer.meta(meta), for: duration)
        case .notStored(let answer): return .notStored(answer.meta(meta))
        case .error: return self
        }
    }

    /// This answer, kept on disk by a source with `cache: true` only when `allowed`; itself when allowed, or
    /// when there is no new content to store.
    public func stored(_ allowed: Bool) -> PluginLoadResult {
        guard !allowed else { return self }
        switch self {
        case .newData, .described, .fresh: return .notStored(self)
        case .notStored, .notModified, .error: return self
        }
    }
}

/// What a plugin gets when the engine configures a source.
public struct SourceSetup: Sendable {
    public var id: String
    public var options: JSONValue
    /// Sends data or errors the plugin notices by itself (a changed file, a streamed line).
    public var push: PushChannel
}

/// Pushes for one source.
///
/// A push never overtakes the answer to a load of the same source that was in flight when it was made:
/// the engine applies lines in the order they arrive, and an answer computed from older data must not land
/// on top of newer pushed data. A push made while a load is in flight waits, in order, for the answer.
public struct PushChannel: Sendable {
    let source: String
    let dispatcher: PluginDispatcher

    public func newData(_ content: JSONValue) async {
        await dispatcher.push([.pushedData(source: source, content: content)], for: source)
    }

    /// New data, with what the plugin knows of it besides the content (the state's `meta`).
    public func newData(_ content: JSONValue, meta: JSONObject?) async {
        guard let meta = meta.flatMap({ boundedMeta($0, of: source) }) else { return await newData(content) }
        await dispatcher.push([.pushedMeta(source: source, meta: meta), .pushedData(source: source, content: content)], for: source)
    }

    public func error(_ error: SourceError) async {
        await dispatcher.push([.pushedError(source: source, error: error)], for: source)
    }
}
