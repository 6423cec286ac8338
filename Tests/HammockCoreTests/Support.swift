import HammockCore
import HammockJSON

/// 2026-11-22T10:00:00.000Z: every test starts its clock here and moves it by hand.
let t0 = Timestamp(millisecondsSince1970: 1_795_341_600_000)

/// The monotonic clock reads this at `t0`; tests keep both clocks in step unless they step one.
let m0 = MonotonicInstant(milliseconds: 5_000_000)

/// `t0` plus a number of milliseconds, as whichever the context wants: the time the core is told, the wall
/// clock of a `timestamp`, or the monotonic instant of a deadline.
func at(ms: Int64) -> EngineTime { EngineTime(instant: m0 + .milliseconds(ms), wall: t0 + .milliseconds(ms)) }
func at(ms: Int64) -> Timestamp { t0 + .milliseconds(ms) }
func at(ms: Int64) -> MonotonicInstant { m0 + .milliseconds(ms) }

/// `t0` plus a number of seconds.
func at(_ seconds: Int64) -> EngineTime { at(ms: seconds * 1000) }
func at(_ seconds: Int64) -> Timestamp { at(ms: seconds * 1000) }
func at(_ seconds: Int64) -> MonotonicInstant { at(ms: seconds * 1000) }

/// A source of the built-in `fake` kind with the given common keys.
func fakeSource(
    _ id: SourceID, refresh: Duration? = nil, expiration: Duration = .seconds(30), retry: RetryPolicy = .standard,
    timeout: Duration = .seconds(10), select: String? = nil, options: JSONObject = [:],
    templates: [TemplatedOption] = []
) -> SourceDefinition {
    SourceDefinition(
        id: id, kind: "fake", options: options, refresh: refresh, expiration: expiration, retry: retry,
        timeout: timeout, select: select.flatMap { JSONPointer($0) }, templates: templates)
}

/// The unit random number the core's generator draws first, second, ... for a seed.
func unitRandoms(seed: UInt64, count: Int) -> [Double] {
    var generator = SplitMix64(seed: seed)
    return (0..<count).map { _ in Double.random(in: 0..<1, using: &generator) }
}

extension OutputLine {
    /// A short, comparable description of the line: `hello`, `source a requested`,
    /// `source a newData load`, `view v data`, `error <message>`, `bye once [a]`.
    var summary: String {
        switch self {
        case .hello(let sources, let views, _, _): "hello \(sources) \(views)"
        case .source(let id, let event, _):
            (["source", id.rawValue, event?.name ?? "nil"] + (event?.origin.map { [$0.rawValue] } ?? [])).joined(separator: " ")
        case .view(let id, let state): "view \(id) \(state.status.rawValue)"
        case .reloaded(let sources, let views): "reloaded \(sources) \(views)"
        case .removed(let id, let what): "removed \(what) \(id)"
        case .error(let message, nil): "error \(message)"
        case .error(let message, let id?): "error \(id) \(message)"
        case .ack(let id): "ack \(id)"
        case .bye(let reason, let failed): "bye \(reason) \(failed ?? [])"
        }
    }

    var text: String { String(decoding: encoded(seq: 1), as: UTF8.self) }
}

extension EngineAction {
    var summary: String {
        switch self {
        case .startLoad(let request): "startLoad \(request.source) #\(request.loadID)"
        case .cancelLoad(let source, _, let loadID): "cancelLoad \(source) #\(loadID)"
        case .removeSource(let source, _): "removeSource \(source)"
        case .emit(let line): line.summary
        case .persist(let source, let content): content == nil ? "persist \(source) nil" : "persist \(source)"
        case .reload(let ids): ids.isEmpty ? "reload" : "reload \(ids)"
        case .runClickCommand(let click): "run \(click.view) \(click.button) \(click.command)"
        case .startLoader(let kind): "startLoader \(kind)"
        case .finish(let status): "finish \(status)"
        }
    }
}

extension [EngineAction] {
    var summaries: [String] { map(\.summary) }

    var loads: [LoadRequest] {
        compactMap { if case .startLoad(let request) = $0 { request } else { nil } }
    }

    var lines: [OutputLine] {
        compactMap { if case .emit(let line) = $0 { line } else { nil } }
    }

    /// The states on the source lines for `id`, in order.
    func states(of id: SourceID) -> [SourceState] {
        lines.compactMap { if case .source(id, _, let state) = $0 { state } else { nil } }
    }

    func viewStates(_ id: ViewID) -> [ViewState] {
        lines.compactMap { if case .view(id, let state) = $0 { state } else { nil } }
    }

    var finishStatus: Int32? {
        compactMap { if case .finish(let status) = $0 { status } else { nil } }.first
    }
}

extension TemplateRules {
    /// What the core tests' templated `fake` sources assume their plugin said: `/url` is a URL.
    static let fakeURL = TemplateRules(urlEncoded: [JSONPointer(tokens: ["url"])])
}

/// The fake kind's rules for the core tests that fill in templates.
let fakeTemplateRules: [Kind: TemplateRules] = ["fake": .fakeURL]
