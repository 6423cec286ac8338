import HammockJSON

extension OutputLine {
    /// Reads back a line that `encode` wrote: for a client of the shared engine that keeps the engine's own
    /// model of what it reads (`hammock watch --attach` feeds its screen with these).
    ///
    /// As every client does (docs/protocol.md), it passes over what it does not know: nil for a line that
    /// is not an object, of an unknown `type`, or without a field its type needs; unknown fields are
    /// ignored. Two things do not come back as they went: content that is JSON `null` reads as no content
    /// (the line writes both as `null`), and `seq` is the caller's to read.
    public init?(json: JSONValue) {
        guard let line = json.objectValue, let type = line["type"]?.stringValue else { return nil }
        func ids(_ key: String) -> [String]? { line[key]?.arrayValue?.compactMap(\.stringValue) }
        switch type {
        case "hello":
            guard let sources = ids("sources"), let views = ids("views") else { return nil }
            self = .hello(
                sources: sources.map { SourceID($0) }, views: views.map { ViewID($0) },
                version: line["version"]?.stringValue ?? "", configuration: line["configuration"]?.stringValue)
        case "reloaded":
            guard let sources = ids("sources"), let views = ids("views") else { return nil }
            self = .reloaded(sources: sources.map { SourceID($0) }, views: views.map { ViewID($0) })
        case "source":
            guard let id = line["id"]?.stringValue, let state = line["state"].flatMap(SourceState.init(json:)) else { return nil }
            let event = line["event"]?.stringValue.flatMap { name in
                SourceEvent(name: name, origin: line["origin"]?.stringValue.flatMap(DataOrigin.init(rawValue:)), state: state)
            }
            self = .source(id: SourceID(id), event: event, state: state)
        case "view":
            guard let id = line["id"]?.stringValue, let state = ViewState(json: json) else { return nil }
            self = .view(id: ViewID(id), state: state)
        case "removed":
            guard let id = line["id"]?.stringValue, let what = line["what"]?.stringValue else { return nil }
            self = .removed(id: id, what: what)
        case "ack":
            guard let id = line["id"].flatMap(ControlID.init) else { return nil }
            self = .ack(id: id)
        case "error":
            self = .error(message: line["message"]?.stringValue ?? "", id: line["id"].flatMap(ControlID.init))
        case "bye":
            guard let reason = line["reason"]?.stringValue.flatMap(StopReason.init(rawValue:)) else { return nil }
            self = .bye(reason: reason, failed: ids("failed")?.map { SourceID($0) })
        default:
            return nil
        }
    }
}

extension SourceEvent {
    /// The event a source line names, with what it carries taken from the line's state; nil for a name this
    /// version does not know.
    init?(name: String, origin: DataOrigin?, state: SourceState) {
        switch name {
        case "requested": self = .requested
        case "requestCancelled": self = .requestCancelled
        case "newData": self = .newData(state.content ?? .null, origin: origin ?? .load)
        case "notModified": self = .notModified
        case "error": self = .error(state.latestError ?? SourceError(message: ""))
        default: return nil
        }
    }
}

extension SourceState {
    /// A source line's `state`.
    public init?(json: JSONValue) {
        guard let state = json.objectValue else { return nil }
        let content = state["content"]
        self.init(
            content: content == .null ? nil : content,
            latestError: state["latestError"].flatMap(SourceError.init(json:)),
            isLoading: state["isLoading"]?.boolValue ?? false,
            timestamp: state["timestamp"]?.stringValue.flatMap(Timestamp.init(rfc3339:)),
            failures: state["failures"]?.numberValue?.intValue ?? 0,
            meta: state["meta"]?.objectValue)
    }
}

extension ViewState {
    /// A view line's fields.
    public init?(json: JSONValue) {
        guard let line = json.objectValue, let status = line["status"]?.stringValue.flatMap(ViewStatus.init(rawValue:)) else {
            return nil
        }
        let errors = (line["errors"]?.objectValue ?? [:]).compactMap { entry in
            SourceError(json: entry.value).map { (source: SourceID(entry.key), error: $0) }
        }
        self.init(
            status: status, content: line["content"] ?? .null,
            latestError: line["latestError"].flatMap(SourceError.init(json:)), errors: errors,
            canTryAgain: line["canTryAgain"]?.boolValue ?? false)
    }
}

extension SourceError {
    /// An error as a line carries it (`json`): nil for `null` or an object without a `message`.
    public init?(json: JSONValue) {
        guard let message = json["message"]?.stringValue else { return nil }
        self.init(
            message: message, httpStatus: json["httpStatus"]?.numberValue?.intValue,
            exitStatus: json["exitStatus"]?.numberValue?.intValue, code: json["code"]?.stringValue.map(Code.init(rawValue:)),
            retryAt: json["retryAt"]?.stringValue.flatMap(Timestamp.init(rfc3339:)))
    }
}
