import HammockJSON
import OrderedCollections

/// One line of hammock's stdout protocol.
///
/// Lines are built as values and encoded only when the writer is ready to send them, because the writer
/// may replace a queued state of a source or view by a newer one (a slow consumer gets the newest state,
/// not a backlog) and numbers lines (`seq`) in the order they actually leave.
public enum OutputLine: Sendable {
    /// `configuration`: the canonical path of the configuration file, told to `hammock serve`'s clients so
    /// that `attach` can refuse an engine of another configuration (nil on `hammock run`'s stdout).
    case hello(sources: [SourceID], views: [ViewID], version: String, configuration: String? = nil)
    /// `event` is `nil` only in a snapshot of a source that has had no event yet.
    case source(id: SourceID, event: SourceEvent?, state: SourceState)
    case view(id: ViewID, state: ViewState)
    /// The configuration was read again: the sources and views from now on.
    case reloaded(sources: [SourceID], views: [ViewID])
    /// A source or view that a configuration reload removed: `what` says which, so `id` is the name's text.
    case removed(id: String, what: String)
    /// A control line was carried out; `id` is the one the line carried.
    case ack(id: ControlID)
    /// A control line that could not be carried out (with its `id`, if it had one), or a refused reload.
    case error(message: String, id: ControlID? = nil)
    case bye(reason: StopReason, failed: [SourceID]?)

    public static let protocolVersion = 1

    /// Lines with the same key replace each other while they wait in the writer's queue.
    ///
    /// A source's content restored from the offline cache is never replaced by the source's later states: a
    /// consumer must see that what it shows came from the cache. It has a key of its own, so a newer line of
    /// the same restored state (a `snapshot` of a source nobody has loaded since) replaces a waiting one, and
    /// a client that asks for snapshots and never reads holds one per source, not one per snapshot.
    ///
    /// A `wipe` has a key of its own: the engine wipes a source and asks for the new resource in one turn
    /// (`requested` follows at once), so under the source's key the wipe would always be replaced before any
    /// consumer could read it, and a consumer keying on it would never learn that the old content went. A
    /// newer wipe replaces a waiting one, so a consumer that does not read holds at most two lines per
    /// source: its newest wipe and its newest state.
    public var coalescingKey: String? {
        switch self {
        case .source(let id, .newData(_, .cache)?, _): "cache:" + id.rawValue
        case .source(let id, .newData(_, .wipe)?, _): "wipe:" + id.rawValue
        case .source(let id, _, _): "source:" + id.rawValue
        case .view(let id, _): "view:" + id.rawValue
        case .hello, .reloaded, .removed, .error, .ack, .bye: nil
        }
    }

    /// The `error` lines that refuse a control command: one per id it answers, or one without id.
    public static func refusals(_ message: String, answering ids: [ControlID]) -> [OutputLine] {
        ids.isEmpty ? [.error(message: message)] : ids.map { .error(message: message, id: $0) }
    }

    /// An `ack`, or an `error` that answers a control line with an `id`.
    public var isAnswer: Bool {
        switch self {
        case .ack, .error(_, _?): true
        default: false
        }
    }

    /// Appends the line, `\n` included, with every string value that could hold a secret (content, error
    /// messages) passed through `redactor`.
    public func encode(seq: Int, into out: inout [UInt8], redactor: Redactor = .none) {
        // The buffer moves into the writer and back, so it has one owner while it grows: a copy left in `out`
        // would make the first append copy the whole buffer, once per line of a batch (quadratic: 100,000
        // sources' lines took minutes).
        var line = LineWriter(out: [], redactor: redactor)
        swap(&line.out, &out)
        switch self {
        case .hello(let sources, let views, let version, let configuration):
            line.begin(type: "hello", seq: seq)
            line.key("protocol")
            line.raw(String(Self.protocolVersion))
            line.key("version")
            writeJSONString(version, into: &line.out)
            if let configuration {
                line.key("configuration")
                writeJSONString(configuration, into: &line.out)
            }
            line.key("sources")
            JSONValue.array(sources.map { .string($0.rawValue) }).write(into: &line.out)
            line.key("views")
            JSONValue.array(views.map { .string($0.rawValue) }).write(into: &line.out)
        case .source(let id, let event, let state):
            line.begin(type: "source", seq: seq)
            line.key("id")
            writeJSONString(id.rawValue, into: &line.out)
            line.key("event")
            if let event { writeJSONString(event.name, into: &line.out) } else { line.raw("null") }
            if let origin = event?.origin {
                line.key("origin")
                writeJSONString(origin.rawValue, into: &line.out)
            }
            line.key("state")
            line.state(state)
        case .view(let id, let state):
            line.begin(type: "view", seq: seq)
            line.key("id")
            writeJSONString(id.rawValue, into: &line.out)
            line.key("status")
            writeJSONString(state.status.rawValue, into: &line.out)
            line.key("content")
            line.value(state.content)
            line.key("latestError")
            line.error(state.latestError)
            line.key("errors")
            var errors = JSONObject()
            for entry in state.errors { errors[redactor.redact(entry.source.rawValue)] = entry.error.displayed(redactor: redactor) }
            JSONValue.object(errors).write(into: &line.out)
            line.key("canTryAgain")
            line.raw(state.canTryAgain ? "true" : "false")
        case .reloaded(let sources, let views):
            line.begin(type: "reloaded", seq: seq)
            line.key("sources")
            JSONValue.array(sources.map { .string($0.rawValue) }).write(into: &line.out)
            line.key("views")
            JSONValue.array(views.map { .string($0.rawValue) }).write(into: &line.out)
        case .removed(let id, let what):
            line.begin(type: "removed", seq: seq)
            line.key("id")
            writeJSONString(id, into: &line.out)
            line.key("what")
            writeJSONString(what, into: &line.out)
        case .ack(let id):
            line.begin(type: "ack", seq: seq)
            line.id(id)
        case .error(let message, let id):
            line.begin(type: "error", seq: seq)
            line.key("message")
            writeJSONString(redactor.redact(message), into: &line.out)
            if let id { line.id(id) }
        case .bye(let reason, let failed):
            line.begin(type: "bye", seq: seq)
            line.key("reason")
            writeJSONString(reason.rawValue, into: &line.out)
            if let failed {
                line.key("failed")
                JSONValue.array(failed.map { .string($0.rawValue) }).write(into: &line.out)
            }
        }
        line.out.append(UInt8(ascii: "}"))
        line.out.append(UInt8(ascii: "\n"))
        swap(&line.out, &out)
    }

    public func encoded(seq: Int, redactor: Redactor = .none) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        encode(seq: seq, into: &out, redactor: redactor)
        return out
    }
}

/// Writes the fixed skeleton of a line by hand: the fields are known, so there is no need to build a
/// `JSONValue` tree only to walk it again.
private struct LineWriter {
    var out: [UInt8]
    let redactor: Redactor

    mutating func raw(_ text: String) { out.append(contentsOf: text.utf8) }

    mutating func begin(type: String, seq: Int) {
        raw("{\"type\":\"\(type)\",\"seq\":\(seq)")
    }

    mutating func key(_ name: String) {
        out.append(UInt8(ascii: ","))
        writeJSONString(name, into: &out)
        out.append(UInt8(ascii: ":"))
    }

    /// The consumer's own name for its control line, echoed exactly: never redacted, or an id that happened
    /// to equal a secret would come back as one the consumer never sent, and its wait would never end.
    mutating func id(_ id: ControlID) {
        key("id")
        id.json.write(into: &out)
    }

    /// A value that may hold a secret.
    mutating func value(_ value: JSONValue) {
        value.write(into: &out, redactor: redactor)
    }

    /// Redacted and shortened already: a second redaction pass could find a short secret inside `[redacted]`.
    mutating func error(_ error: SourceError?) {
        if let error { error.displayed(redactor: redactor).write(into: &out) } else { raw("null") }
    }

    mutating func state(_ state: SourceState) {
        raw("{\"content\":")
        value(state.content ?? .null)
        raw(",\"latestError\":")
        error(state.latestError)
        raw(",\"isLoading\":")
        raw(state.isLoading ? "true" : "false")
        raw(",\"timestamp\":")
        if let timestamp = state.timestamp {
            out.append(UInt8(ascii: "\""))
            timestamp.appendRFC3339(to: &out)  // digits and -:T.Z: nothing to escape
            out.append(UInt8(ascii: "\""))
        } else {
            raw("null")
        }
        raw(",\"failures\":\(state.failures)")
        // Only when the loader said something: every other source's line stays as it was.
        if let meta = state.meta {
            raw(",\"meta\":")
            value(.object(meta))
        }
        raw("}")
    }
}
