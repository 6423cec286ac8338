import Foundation
import HammockCore
import HammockJSON

// The engine's stdout lines (docs/protocol.md), decoded from their JSON value into what the client keeps.
// Only what a consumer needs is kept; a line of a type this version does not know is passed over, so that an
// engine may add line types without breaking older clients.

/// One output line of the engine, decoded.
enum EngineLine: Sendable, Equatable {
    case hello(EngineIDs)
    case source(id: String, SourceLine)
    case view(id: String, ViewLine)
    case reloaded(EngineIDs)
    case removed(id: String, isView: Bool)
    /// `id` is the control line's, when the error answers one.
    case error(message: String, id: JSONValue?)
    case ack(id: JSONValue)
    case bye(reason: String)

    /// The line types this version reads; another type is a newer engine's, passed over.
    static let knownTypes: Set<String> = ["hello", "reloaded", "source", "view", "removed", "error", "ack", "bye"]

    /// `nil` for a line that is not a JSON object with a known `type`, or lacks a field its type needs.
    init?(_ json: JSONValue) {
        guard case .object(let line) = json, let type = line["type"]?.stringValue else { return nil }
        switch type {
        case "hello", "reloaded":
            let ids = EngineIDs(
                sources: line["sources"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                views: line["views"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            self = type == "hello" ? .hello(ids) : .reloaded(ids)
        case "source":
            guard let id = line["id"]?.stringValue, let state = line["state"],
                var source = SourceLine(state)
            else { return nil }
            source.latestEvent = LoadableEvent(event: line["event"]?.stringValue, origin: line["origin"]?.stringValue)
            self = .source(id: id, source)
        case "view":
            guard let id = line["id"]?.stringValue, let view = ViewLine(json) else { return nil }
            self = .view(id: id, view)
        case "removed":
            guard let id = line["id"]?.stringValue else { return nil }
            self = .removed(id: id, isView: line["what"]?.stringValue == "view")
        case "error":
            self = .error(message: line["message"]?.stringValue ?? "", id: line["id"])
        case "ack":
            guard let id = line["id"] else { return nil }
            self = .ack(id: id)
        case "bye":
            self = .bye(reason: line["reason"]?.stringValue ?? "")
        default:
            return nil
        }
    }
}

/// The ids the engine runs, in the configuration file's order (from `hello`, then each `reloaded`).
public struct EngineIDs: Sendable, Hashable {
    public var sources: [String]
    public var views: [String]

    public init(sources: [String], views: [String]) {
        self.sources = sources
        self.views = views
    }
}

/// A source line's `state`, content still JSON.
struct SourceLine: Sendable, Equatable {
    var content: JSONValue?
    var latestError: LoadError?
    var isLoading: Bool
    var timestamp: Date?
    var failures: Int
    /// The line's `event` and `origin`.
    var latestEvent: LoadableEvent?
    var meta: SourceMeta?

    init(
        content: JSONValue?, latestError: LoadError?, isLoading: Bool, timestamp: Date?, failures: Int,
        latestEvent: LoadableEvent? = nil, meta: SourceMeta? = nil
    ) {
        self.meta = meta
        self.content = content
        self.latestError = latestError
        self.isLoading = isLoading
        self.timestamp = timestamp
        self.failures = failures
        self.latestEvent = latestEvent
    }

    init?(_ state: JSONValue) {
        guard case .object(let state) = state else { return nil }
        content = state["content"].flatMap(contentOrNone)
        latestError = state["latestError"].flatMap(LoadError.init(json:))
        isLoading = state["isLoading"]?.boolValue ?? false
        timestamp = state["timestamp"]?.stringValue.flatMap(parseTimestamp)
        failures = state["failures"]?.numberValue?.intValue ?? 0
        meta = state["meta"]?.objectValue.map(SourceMeta.init)
    }

    /// What a source's feed shows once a reload removed it: nothing, and why.
    static func removed(_ id: String) -> SourceLine {
        SourceLine(content: nil, latestError: .removed(id), isLoading: false, timestamp: nil, failures: 0)
    }
}

/// A view line, content still JSON.
struct ViewLine: Sendable, Equatable {
    var status: ViewStatus
    /// `{source: content}` once the view is ready, else `nil`.
    var content: JSONValue?
    var latestError: LoadError?
    var errors: [ViewError]
    var canTryAgain: Bool

    init(status: ViewStatus, content: JSONValue?, latestError: LoadError?, errors: [ViewError], canTryAgain: Bool) {
        self.status = status
        self.content = content
        self.latestError = latestError
        self.errors = errors
        self.canTryAgain = canTryAgain
    }

    init?(_ line: JSONValue) {
        guard let status = line["status"]?.stringValue.flatMap(ViewStatus.init(rawValue:)) else { return nil }
        self.status = status
        content = line["content"].flatMap(contentOrNone)
        latestError = line["latestError"].flatMap(LoadError.init(json:))
        errors = (line["errors"]?.objectValue ?? [:]).compactMap { source, error in
            LoadError(json: error).map { ViewError(source: source, error: $0) }
        }
        canTryAgain = line["canTryAgain"]?.boolValue ?? false
    }

    static func removed(_ id: String) -> ViewLine {
        ViewLine(status: .idle, content: nil, latestError: .removed(id), errors: [], canTryAgain: false)
    }
}

extension LoadError {
    /// The engine's `latestError` object; `nil` for `null`.
    init?(json: JSONValue) {
        guard case .object(let error) = json else { return nil }
        self.init(
            message: error["message"]?.stringValue ?? "",
            httpStatus: error["httpStatus"]?.numberValue?.intValue,
            exitStatus: error["exitStatus"]?.numberValue?.intValue,
            code: error["code"]?.stringValue,
            retryAt: error["retryAt"]?.stringValue.flatMap(parseTimestamp))
    }

    /// The code of the error a source or view shows once a configuration reload removed it.
    public static let removedCode = "removed"

    static func removed(_ id: String) -> LoadError {
        LoadError(message: "\"\(id)\" was removed by a configuration reload", code: removedCode)
    }
}

/// The engine's timestamps: RFC 3339 in UTC with milliseconds, `2026-11-22T10:00:00.123Z`.
private func parseTimestamp(_ text: String) -> Date? {
    try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)
}

/// On the wire `null` is "no content": the protocol does not tell it from content that is null. (Spelled out
/// because `JSONValue` is `ExpressibleByNilLiteral`: a bare `nil` here would be `.null`.)
private func contentOrNone(_ value: JSONValue) -> JSONValue? {
    value.isNull ? Optional.none : Optional.some(value)
}
