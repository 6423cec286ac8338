import HammockCore
import HammockJSON

// The engine ↔ plugin wire protocol, all of it: one JSON object per line on the plugin's stdin (messages
// from the engine, named by `op`) and stdout (messages from the plugin, named by `type`). The engine and
// every Swift plugin encode and decode through these two types, so they cannot drift apart. Each type is
// `Codable` over `JSONValueEncoder`/`JSONValueDecoder`, and that is its declared wire form; the two lines
// sent per load (`load`, and the `newData` that answers it) also have a hand-written form in
// PluginProtocol+HotPath.swift, pinned to the declared one by tests.
// docs/plugin-protocol.md describes the same protocol for plugins written in other languages.

/// The protocol version both sides announce in `hello`.
public let pluginProtocolVersion = 1

/// The longest line a plugin may write, in bytes, its `\n` aside. The engine skips a longer one (and fails
/// the load it answered); HammockPluginKit never writes one, answering with a small `tooLarge` error instead.
public let maximumPluginLineLength = 16 << 20

/// The longest `meta` (a plugin's word on an answer, kept on the source's state and written on every line
/// of it) the engine keeps, in bytes once encoded. A longer one is dropped with a warning, and its answer
/// goes on without it; HammockPluginKit drops it before sending.
public let maximumMetaLength = SourceState.maximumMetaLength

/// A message from the engine to a plugin.
public enum EngineMessage: Sendable, Equatable {
    case hello(protocol: Int)
    /// Check and keep a source's options. Sent again whenever they change (a template's input changed).
    case configure(source: String, options: JSONValue)
    /// Load a source. `timeout` is the source's `timeout` in seconds: the plugin ends the work by then.
    /// `pages`: how many pages a paginated source loads, when its consumer asked for more (`more`).
    case load(source: String, id: Int, etag: String?, lastModified: String?, timeout: Double?, pages: Int? = nil)
    case cancel(id: Int)
    /// Forget a source (it was removed from the configuration): stop watching, stop its command.
    case remove(source: String)
    /// Stop everything and exit.
    case shutdown
}

/// A message from a plugin to the engine.
public enum PluginMessage: Sendable, Equatable {
    /// `templates`: per kind, its rules for `{{ }}` templates in its sources' options (see `TemplateRules`);
    /// a kind without any has none. On the wire an optional
    /// `{"shell": {"refused": {"/script": "reason"}, "urlEncoded": ["/url"]}}`.
    /// `queuesLoads`: the plugin may hold a load back before working on it, and says `started` when it
    /// begins; the engine then counts the load's timeout from that `started` (on the wire `"queuesLoads": true`).
    /// `optionsSchema`: per kind, a JSON Schema (draft 2020-12) of its sources' options, for `hammock schema`
    /// and the editors that read it; a kind without one is described as "any options". On the wire an
    /// optional `{"rest": {"type": "object", "properties": {…}}}`.
    case hello(
        protocol: Int, kinds: [String], version: String, templates: [String: TemplateRules] = [:], queuesLoads: Bool = false,
        optionsSchema: [String: JSONValue] = [:])
    case configured(source: String)
    case invalid(source: String, errors: [OptionProblem])
    /// The answer to load `id`. `source` is the plugin's to add; the engine goes by the id.
    case newData(id: Int, source: String?, content: JSONValue, etag: String?, lastModified: String?)
    case notModified(id: Int)
    /// The answer to load `id`: the load failed.
    case error(id: Int, source: String?, error: SourceError)
    case cancelled(id: Int)
    /// Load `id`, which the plugin held back (it said `queuesLoads`), has begun: its timeout counts from now.
    case started(id: Int)
    /// Sent just before load `id`'s `newData` or `notModified`: the server said the answer stays fresh for
    /// `seconds` (HTTP `Cache-Control: max-age`, `Expires`, `X-Poll-Interval`), so the engine asks no sooner.
    /// On the wire `{"type":"fresh","id":7,"seconds":60}`.
    case fresh(id: Int, seconds: Double)
    /// Sent just before load `id`'s `newData` or `notModified`: what the plugin knows of the answer besides
    /// its content (an HTTP status and headers, a command's exit status), the state's `meta`.
    /// On the wire `{"type":"meta","id":7,"meta":{"httpStatus":200}}`.
    case meta(id: Int, meta: JSONObject)
    /// Sent just before a push (`pushedData`) of `source`: what the plugin knows of the pushed content.
    /// On the wire a `meta` with a `source` and no `id`.
    case pushedMeta(source: String, meta: JSONObject)
    /// Sent just before load `id`'s `newData`: the content must not be kept on disk (HTTP's
    /// `Cache-Control: no-store`), so a source with `cache: true` stores none of it and forgets what it stored.
    /// On the wire `{"type":"noStore","id":7}`.
    case noStore(id: Int)
    /// New data the plugin noticed by itself (a watched file changed, a streaming command wrote a line).
    /// On the wire a `newData` with a `source` and no `id`.
    case pushedData(source: String, content: JSONValue)
    /// A failure the plugin noticed by itself (a watched file vanished, a streaming command died). On the
    /// wire an `error` with a `source` and no `id`.
    case pushedError(source: String, error: SourceError)
}

/// A line that is not valid protocol.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension EngineMessage {
    /// The message's name on the wire, its `op`.
    public var op: String {
        switch self {
        case .hello: "hello"
        case .configure: "configure"
        case .load: "load"
        case .cancel: "cancel"
        case .remove: "remove"
        case .shutdown: "shutdown"
        }
    }

    static let ops = ["hello", "configure", "load", "cancel", "remove", "shutdown"]
}

extension PluginMessage {
    /// The message's name on the wire, its `type`: a push is a `newData` or an `error` too.
    public var type: String {
        switch self {
        case .hello: "hello"
        case .configured: "configured"
        case .invalid: "invalid"
        case .newData, .pushedData: "newData"
        case .notModified: "notModified"
        case .error, .pushedError: "error"
        case .cancelled: "cancelled"
        case .started: "started"
        case .fresh: "fresh"
        case .meta, .pushedMeta: "meta"
        case .noStore: "noStore"
        }
    }

    static let types = ["hello", "configured", "invalid", "newData", "notModified", "error", "cancelled", "started", "fresh", "meta", "noStore"]

    /// The load this message answers, if it answers one.
    public var loadID: Int? {
        switch self {
        case .newData(let id, _, _, _, _), .notModified(let id), .error(let id, _, _), .cancelled(let id): id
        case .hello, .configured, .invalid, .pushedData, .pushedError, .started, .fresh, .meta, .pushedMeta, .noStore: nil
        }
    }

    /// The source a push is for, if this is a push.
    public var pushedSource: String? {
        switch self {
        case .pushedData(let source, _), .pushedError(let source, _), .pushedMeta(let source, _): source
        default: nil
        }
    }
}

// MARK: - Lines

// Both directions are coded one way (`LineCoded`); each type only names its discriminator.

extension EngineMessage: LineCoded {
    static let discriminator = "op"

    public var json: JSONValue { lineJSON }

    /// The message as one line, `\n` included.
    public var line: [UInt8] { lineBytes }

    public init(line: some Collection<UInt8>) throws(ProtocolError) { self = try Self(lineBytes: line) }
}

extension PluginMessage: LineCoded {
    static let discriminator = "type"

    public var json: JSONValue { lineJSON }

    /// The message as one line, `\n` included.
    public var line: [UInt8] { lineBytes }

    public init(line: some Collection<UInt8>) throws(ProtocolError) { self = try Self(lineBytes: line) }
}

/// A message of the line protocol, in either direction: the hand-written hot path first
/// (`PluginProtocol+HotPath.swift`), the declared `Codable` form for everything else. Internal, so that the
/// hot path stays out of the module's interface; the public `json`, `line` and `init(line:)` forward here.
protocol LineCoded: Codable {
    /// The member that names the message on the wire: `op` for the engine's, `type` for the plugin's.
    static var discriminator: String { get }
    /// The message's JSON by hand, when it is one of the hot path's; nil for the declared form.
    var hotPathJSON: JSONValue? { get }
    /// The message read by hand, when `value` is one of the hot path's; nil for the declared form.
    init?(hotPath value: JSONValue)
}

extension LineCoded {
    var lineJSON: JSONValue {
        if let json = hotPathJSON { return json }
        return encodedForTheWire(self)
    }

    var lineBytes: [UInt8] { lineJSON.jsonBytes + [UInt8(ascii: "\n")] }

    init(lineBytes line: some Collection<UInt8>) throws(ProtocolError) {
        let value = try parseLine(line)
        if let message = Self(hotPath: value) {
            self = message
        } else {
            self = try decodedFromTheWire(value, discriminator: Self.discriminator)
        }
    }
}

private func parseLine(_ line: some Collection<UInt8>) throws(ProtocolError) -> JSONValue {
    do {
        return try JSONValue(parsing: line)
    } catch {
        throw ProtocolError("not JSON: \(error.message) at byte \(error.offset)")
    }
}

/// The declared form. Cannot fail: every `Double` in a message is checked finite before it is encoded.
private func encodedForTheWire(_ message: some Encodable) -> JSONValue {
    do {
        return try JSONValueEncoder().encode(message)
    } catch {
        preconditionFailure("a protocol message failed to encode: \(error)")
    }
}

/// Decodes the declared form; the error names the message (when its name was readable), the member, and
/// what is wrong with it: `load: "id" must be an integer, got a string`.
private func decodedFromTheWire<Message: Decodable>(_ value: JSONValue, discriminator: String) throws(ProtocolError) -> Message {
    do {
        return try JSONValueDecoder().decode(Message.self, from: value)
    } catch let error as DecodingError {
        let summary = error.summary(whole: "the line")
        let aboutTheName = error.pointer.tokens.first == discriminator || error.missingKey == discriminator
        if !aboutTheName, let name = value[discriminator]?.stringValue {
            throw ProtocolError("\(name): \(summary)")
        }
        throw ProtocolError(summary)
    } catch {
        throw ProtocolError("\(error)")
    }
}

extension DecodingError {
    fileprivate var missingKey: String? {
        if case .keyNotFound(let key, let context) = self, context.codingPath.isEmpty { return key.stringValue }
        return nil
    }
}

// MARK: - The declared form

extension EngineMessage: Codable {
    private enum Field: String, CodingKey {
        case op, `protocol`, source, options, id, etag, lastModified, timeout, pages
    }

    /// A load's `pages`: 1 or more when given.
    private static func pages(_ pages: Int?, in fields: KeyedDecodingContainer<Field>) throws -> Int? {
        guard let pages else { return nil }
        guard pages >= 1 else {
            throw DecodingError.dataCorruptedError(forKey: .pages, in: fields, debugDescription: "must be a whole number, 1 or more")
        }
        return pages
    }

    public func encode(to encoder: any Encoder) throws {
        var fields = encoder.container(keyedBy: Field.self)
        try fields.encode(op, forKey: .op)
        switch self {
        case .hello(let version):
            try fields.encode(version, forKey: .protocol)
        case .configure(let source, let options):
            try fields.encode(source, forKey: .source)
            try fields.encode(options, forKey: .options)
        case .load(let source, let id, let etag, let lastModified, let timeout, let pages):
            try fields.encode(source, forKey: .source)
            try fields.encode(id, forKey: .id)
            try fields.encodeIfPresent(etag, forKey: .etag)
            try fields.encodeIfPresent(lastModified, forKey: .lastModified)
            try fields.encodeIfPresent(timeout.flatMap(JSONNumber.init(exactly:)), forKey: .timeout)
            try fields.encodeIfPresent(pages, forKey: .pages)
        case .cancel(let id):
            try fields.encode(id, forKey: .id)
        case .remove(let source):
            try fields.encode(source, forKey: .source)
        case .shutdown:
            break
        }
    }

    public init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: Field.self)
        switch try fields.decode(String.self, forKey: .op) {
        case "hello":
            self = .hello(protocol: try fields.decode(Int.self, forKey: .protocol))
        case "configure":
            self = .configure(source: try fields.decode(String.self, forKey: .source), options: try fields.decode(JSONValue.self, forKey: .options))
        case "load":
            self = .load(
                source: try fields.decode(String.self, forKey: .source), id: try fields.decode(Int.self, forKey: .id),
                etag: try fields.decodeIfPresent(String.self, forKey: .etag),
                lastModified: try fields.decodeIfPresent(String.self, forKey: .lastModified),
                timeout: try fields.decodeIfPresent(Double.self, forKey: .timeout),
                pages: try Self.pages(fields.decodeIfPresent(Int.self, forKey: .pages), in: fields))
        case "cancel":
            self = .cancel(id: try fields.decode(Int.self, forKey: .id))
        case "remove":
            self = .remove(source: try fields.decode(String.self, forKey: .source))
        case "shutdown":
            self = .shutdown
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .op, in: fields, debugDescription: "must be one of \(Self.ops.joined(separator: ", ")), got \"\(other)\"")
        }
    }
}

extension PluginMessage: Codable {
    private enum Field: String, CodingKey {
        case type, `protocol`, kinds, version, templates, queuesLoads, optionsSchema, source, errors, id, content, etag, lastModified, error
        case seconds, meta
    }

    public func encode(to encoder: any Encoder) throws {
        var fields = encoder.container(keyedBy: Field.self)
        try fields.encode(type, forKey: .type)
        switch self {
        case .hello(let version, let kinds, let pluginVersion, let templates, let queuesLoads, let optionsSchema):
            try fields.encode(version, forKey: .protocol)
            try fields.encode(kinds, forKey: .kinds)
            try fields.encode(pluginVersion, forKey: .version)
            if !templates.isEmpty { try fields.encode(WireTemplates(templates), forKey: .templates) }
            if queuesLoads { try fields.encode(true, forKey: .queuesLoads) }
            if !optionsSchema.isEmpty {
                // Sorted by kind, so a hello's line is always the same.
                var schemas = JSONObject()
                for (kind, schema) in optionsSchema.sorted(by: { $0.key < $1.key }) { schemas[kind] = schema }
                try fields.encode(JSONValue.object(schemas), forKey: .optionsSchema)
            }
        case .configured(let source):
            try fields.encode(source, forKey: .source)
        case .invalid(let source, let errors):
            try fields.encode(source, forKey: .source)
            try fields.encode(errors.map(WireProblem.init), forKey: .errors)
        case .newData(let id, let source, let content, let etag, let lastModified):
            try fields.encodeIfPresent(source, forKey: .source)
            try fields.encode(id, forKey: .id)
            try fields.encode(content, forKey: .content)
            try fields.encodeIfPresent(etag, forKey: .etag)
            try fields.encodeIfPresent(lastModified, forKey: .lastModified)
        case .pushedData(let source, let content):
            try fields.encode(source, forKey: .source)
            try fields.encode(content, forKey: .content)
        case .notModified(let id), .cancelled(let id), .started(let id), .noStore(let id):
            try fields.encode(id, forKey: .id)
        case .fresh(let id, let seconds):
            try fields.encode(id, forKey: .id)
            try fields.encode(seconds, forKey: .seconds)
        case .meta(let id, let meta):
            try fields.encode(id, forKey: .id)
            try fields.encode(JSONValue.object(meta), forKey: .meta)
        case .pushedMeta(let source, let meta):
            try fields.encode(source, forKey: .source)
            try fields.encode(JSONValue.object(meta), forKey: .meta)
        case .error(let id, let source, let error):
            try fields.encodeIfPresent(source, forKey: .source)
            try fields.encode(id, forKey: .id)
            try fields.encode(WireSourceError(error), forKey: .error)
        case .pushedError(let source, let error):
            try fields.encode(source, forKey: .source)
            try fields.encode(WireSourceError(error), forKey: .error)
        }
    }

    public init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: Field.self)
        switch try fields.decode(String.self, forKey: .type) {
        case "hello":
            let kinds = try fields.decode([String].self, forKey: .kinds)
            guard !kinds.isEmpty else {
                throw DecodingError.dataCorruptedError(forKey: .kinds, in: fields, debugDescription: "must be a non-empty list of strings")
            }
            let templates = try fields.decodeIfPresent(WireTemplates.self, forKey: .templates)?.rules ?? [:]
            if let stray = templates.keys.sorted().first(where: { !kinds.contains($0) }) {
                throw DecodingError.dataCorruptedError(
                    forKey: .templates, in: fields, debugDescription: "names kind \"\(stray)\", which is not in \"kinds\"")
            }
            // Each schema is taken as it is: `hammock plugin check` says what is wrong inside one, and the engine
            // itself never reads them.
            let schemas = try fields.decodeIfPresent([String: JSONValue].self, forKey: .optionsSchema) ?? [:]
            if let stray = schemas.keys.sorted().first(where: { !kinds.contains($0) }) {
                throw DecodingError.dataCorruptedError(
                    forKey: .optionsSchema, in: fields, debugDescription: "names kind \"\(stray)\", which is not in \"kinds\"")
            }
            let version: Int = try fields.decode(Int.self, forKey: .protocol)
            let pluginVersion: String = try fields.decodeIfPresent(String.self, forKey: .version) ?? "unknown"
            let queuesLoads: Bool = try fields.decodeIfPresent(Bool.self, forKey: .queuesLoads) ?? false
            self = .hello(
                protocol: version, kinds: kinds, version: pluginVersion, templates: templates, queuesLoads: queuesLoads,
                optionsSchema: schemas)
        case "configured":
            self = .configured(source: try fields.decode(String.self, forKey: .source))
        case "invalid":
            self = .invalid(
                source: try fields.decode(String.self, forKey: .source),
                errors: try fields.decode([WireProblem].self, forKey: .errors).map(\.problem))
        case "newData":
            let id = try fields.decodeIfPresent(Int.self, forKey: .id)
            let source = try fields.decodeIfPresent(String.self, forKey: .source)
            if let id {
                self = .newData(
                    id: id, source: source, content: try fields.decode(JSONValue.self, forKey: .content),
                    etag: try fields.decodeIfPresent(String.self, forKey: .etag),
                    lastModified: try fields.decodeIfPresent(String.self, forKey: .lastModified))
            } else if let source {
                self = .pushedData(source: source, content: try fields.decode(JSONValue.self, forKey: .content))
            } else {
                throw Self.neitherIDNorSource(decoder)
            }
        case "notModified":
            self = .notModified(id: try fields.decode(Int.self, forKey: .id))
        case "error":
            let id = try fields.decodeIfPresent(Int.self, forKey: .id)
            let source = try fields.decodeIfPresent(String.self, forKey: .source)
            if let id {
                self = .error(id: id, source: source, error: try fields.decode(WireSourceError.self, forKey: .error).error)
            } else if let source {
                self = .pushedError(source: source, error: try fields.decode(WireSourceError.self, forKey: .error).error)
            } else {
                throw Self.neitherIDNorSource(decoder)
            }
        case "cancelled":
            self = .cancelled(id: try fields.decode(Int.self, forKey: .id))
        case "started":
            self = .started(id: try fields.decode(Int.self, forKey: .id))
        case "noStore":
            self = .noStore(id: try fields.decode(Int.self, forKey: .id))
        case "fresh":
            let seconds = try fields.decode(Double.self, forKey: .seconds)
            guard seconds.isFinite, seconds >= 0 else {
                throw DecodingError.dataCorruptedError(forKey: .seconds, in: fields, debugDescription: "must be a number of seconds, 0 or more")
            }
            self = .fresh(id: try fields.decode(Int.self, forKey: .id), seconds: seconds)
        case "meta":
            guard let meta = try fields.decode(JSONValue.self, forKey: .meta).objectValue else {
                throw DecodingError.dataCorruptedError(forKey: .meta, in: fields, debugDescription: "must be an object")
            }
            if let id = try fields.decodeIfPresent(Int.self, forKey: .id) {
                self = .meta(id: id, meta: meta)
            } else if let source = try fields.decodeIfPresent(String.self, forKey: .source) {
                self = .pushedMeta(source: source, meta: meta)
            } else {
                throw Self.neitherIDNorSource(decoder)
            }
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: fields, debugDescription: "must be one of \(Self.types.joined(separator: ", ")), got \"\(other)\"")
        }
    }

    private static func neitherIDNorSource(_ decoder: any Decoder) -> DecodingError {
        .dataCorrupted(
            DecodingError.Context(
                codingPath: decoder.codingPath, debugDescription: "needs an \"id\" (an answer) or a \"source\" (a push)"))
    }
}

/// One entry of `invalid`'s `errors`: `{"path": "/headers/Accept", "message": "..."}`; a missing path is
/// the options as a whole.
private struct WireProblem: Codable {
    var problem: OptionProblem

    init(_ problem: OptionProblem) { self.problem = problem }

    private enum Field: String, CodingKey { case path, message }

    init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: Field.self)
        problem = OptionProblem(
            pointer: try fields.decodeIfPresent(JSONPointer.self, forKey: .path) ?? JSONPointer(tokens: []),
            message: try fields.decode(String.self, forKey: .message))
    }

    func encode(to encoder: any Encoder) throws {
        var fields = encoder.container(keyedBy: Field.self)
        try fields.encode(problem.pointer, forKey: .path)
        try fields.encode(problem.message, forKey: .message)
    }
}

/// `hello`'s `templates`: `{kind: {"refused": {pointer: reason}, "urlEncoded": [pointer]}}`, both members
/// optional. Written with sorted keys, so a hello's line is always the same.
private struct WireTemplates: Codable {
    var rules: [String: TemplateRules]

    init(_ rules: [String: TemplateRules]) { self.rules = rules }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private enum Field: String, CodingKey { case refused, urlEncoded }

    init(from decoder: any Decoder) throws {
        let kinds = try decoder.container(keyedBy: Key.self)
        rules = [:]
        for kind in kinds.allKeys {
            let fields = try kinds.nestedContainer(keyedBy: Field.self, forKey: kind)
            var kindRules = TemplateRules()
            for (text, reason) in try fields.decodeIfPresent([String: String].self, forKey: .refused) ?? [:] {
                kindRules.refused[try Self.pointer(text, forKey: .refused, in: fields)] = reason
            }
            for text in try fields.decodeIfPresent([String].self, forKey: .urlEncoded) ?? [] {
                kindRules.urlEncoded.insert(try Self.pointer(text, forKey: .urlEncoded, in: fields))
            }
            rules[kind.stringValue] = kindRules
        }
    }

    private static func pointer(
        _ text: String, forKey key: Field, in fields: KeyedDecodingContainer<Field>
    ) throws -> JSONPointer {
        guard let pointer = JSONPointer(text), !text.isEmpty else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: fields, debugDescription: "must hold JSON Pointers to options (like \"/url\"), got \"\(text)\"")
        }
        return pointer
    }

    func encode(to encoder: any Encoder) throws {
        var kinds = encoder.container(keyedBy: Key.self)
        for (kind, kindRules) in rules.sorted(by: { $0.key < $1.key }) {
            var fields = kinds.nestedContainer(keyedBy: Field.self, forKey: Key(stringValue: kind))
            if !kindRules.refused.isEmpty {
                var refused = fields.nestedContainer(keyedBy: Key.self, forKey: .refused)
                for (pointer, reason) in kindRules.refused.sorted(by: { $0.key.description < $1.key.description }) {
                    try refused.encode(reason, forKey: Key(stringValue: pointer.description))
                }
            }
            if !kindRules.urlEncoded.isEmpty {
                try fields.encode(kindRules.urlEncoded.map(\.description).sorted(), forKey: .urlEncoded)
            }
        }
    }
}

/// A failure on the wire: `{message, httpStatus?, exitStatus?, code?, retryAfter?, transient?}`, or just the
/// message as a string. Only `message` is required; an optional member of the wrong kind is ignored, so a
/// plugin's failure still reaches the consumer when its details are off.
struct WireSourceError: Codable {
    var error: SourceError

    init(_ error: SourceError) { self.error = error }

    private enum Field: String, CodingKey { case message, httpStatus, exitStatus, code, retryAfter, transient }

    init(from decoder: any Decoder) throws {
        if let message = try? decoder.singleValueContainer().decode(String.self) {
            error = SourceError(message: message)
            return
        }
        guard let fields = try? decoder.container(keyedBy: Field.self) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription: "must be a message or {message, httpStatus?, exitStatus?, code?, retryAfter?, transient?}"))
        }
        error = SourceError(
            message: try fields.decode(String.self, forKey: .message),
            httpStatus: try? fields.decodeIfPresent(Int.self, forKey: .httpStatus),
            exitStatus: try? fields.decodeIfPresent(Int.self, forKey: .exitStatus),
            code: try? fields.decodeIfPresent(SourceError.Code.self, forKey: .code),
            retryAfter: (try? fields.decodeIfPresent(JSONNumber.self, forKey: .retryAfter)).flatMap(Self.retryAfter),
            transient: try? fields.decodeIfPresent(Bool.self, forKey: .transient))
    }

    /// Seconds as a Duration; nil for a negative value or one beyond Int64 milliseconds (1e300), which are
    /// ignored like a `retryAfter` that is not a number.
    private static func retryAfter(_ seconds: JSONNumber) -> Duration? {
        Int64(exactly: (seconds.doubleValue * 1000).rounded()).flatMap { $0 >= 0 ? .milliseconds($0) : nil }
    }

    func encode(to encoder: any Encoder) throws {
        var fields = encoder.container(keyedBy: Field.self)
        try fields.encode(error.message, forKey: .message)
        try fields.encodeIfPresent(error.httpStatus, forKey: .httpStatus)
        try fields.encodeIfPresent(error.exitStatus, forKey: .exitStatus)
        try fields.encodeIfPresent(error.code, forKey: .code)
        try fields.encodeIfPresent(
            error.retryAfter.flatMap { JSONNumber(exactly: Double($0.milliseconds) / 1000) }, forKey: .retryAfter)
        try fields.encodeIfPresent(error.transient, forKey: .transient)
    }
}
