import HammockCore
import HammockJSON
import OrderedCollections

// The engine ↔ plugin wire protocol, all of it: one JSON object per line on the plugin's stdin (messages
// from the engine, named by `op`) and stdout (messages from the plugin, named by `type`). The engine and
// every Swift plugin encode and decode through these two types, so they cannot drift apart.
// docs/plugin-protocol.md describes the same protocol for plugins written in other languages.

/// The protocol version both sides announce in `hello`.
public let pluginProtocolVersion = 1

/// The longest line a plugin may write, in bytes, its `\n` aside. The engine skips a longer one (and fails
/// the load it answered); HammockPluginKit never writes one, answering with a small `tooLarge` error instead.
public let maximumPluginLineLength = 16 << 20

/// A message from the engine to a plugin.
public enum EngineMessage: Sendable, Equatable {
    case hello(protocol: Int)
    /// Check and keep a source's options. Sent again whenever they change (a template's input changed).
    case configure(source: String, options: JSONValue)
    /// Load a source. `timeout` is the source's `timeout` in seconds: the plugin ends the work by then.
    case load(source: String, id: Int, etag: String?, lastModified: String?, timeout: Double?)
    case cancel(id: Int)
    /// Forget a source (it was removed from the configuration): stop watching, stop its command.
    case remove(source: String)
    /// Stop everything and exit.
    case shutdown
}

/// A message from a plugin to the engine.
public enum PluginMessage: Sendable, Equatable {
    case hello(protocol: Int, kinds: [String], version: String)
    case configured(source: String)
    case invalid(source: String, errors: [OptionProblem])
    /// The answer to load `id`, or, with no id, new data the plugin noticed by itself (a push).
    case newData(id: Int?, source: String?, content: JSONValue, etag: String?, lastModified: String?)
    case notModified(id: Int)
    /// The answer to load `id`, or, with no id, a failure the plugin noticed by itself (a watched file
    /// vanished, a streaming command died).
    case error(id: Int?, source: String?, error: SourceError)
    case cancelled(id: Int)
}

/// A line that is not valid protocol.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

// MARK: - Encoding

extension EngineMessage {
    public var json: JSONValue {
        var object: JSONObject
        switch self {
        case .hello(let version):
            object = ["op": "hello", "protocol": .number(JSONNumber(version))]
        case .configure(let source, let options):
            object = ["op": "configure", "source": .string(source), "options": options]
        case .load(let source, let id, let etag, let lastModified, let timeout):
            object = ["op": "load", "source": .string(source), "id": .number(JSONNumber(id))]
            if let etag { object["etag"] = .string(etag) }
            if let lastModified { object["lastModified"] = .string(lastModified) }
            if let timeout, let seconds = JSONNumber(exactly: timeout) { object["timeout"] = .number(seconds) }
        case .cancel(let id):
            object = ["op": "cancel", "id": .number(JSONNumber(id))]
        case .remove(let source):
            object = ["op": "remove", "source": .string(source)]
        case .shutdown:
            object = ["op": "shutdown"]
        }
        return .object(object)
    }

    /// The message as one line, `\n` included.
    public var line: [UInt8] { json.jsonBytes + [UInt8(ascii: "\n")] }
}

extension PluginMessage {
    public var json: JSONValue {
        var object: JSONObject
        switch self {
        case .hello(let version, let kinds, let pluginVersion):
            object = [
                "type": "hello", "protocol": .number(JSONNumber(version)), "kinds": .array(kinds.map(JSONValue.string)),
                "version": .string(pluginVersion),
            ]
        case .configured(let source):
            object = ["type": "configured", "source": .string(source)]
        case .invalid(let source, let errors):
            object = [
                "type": "invalid", "source": .string(source),
                "errors": .array(errors.map { .object(["path": .string($0.pointer.description), "message": .string($0.message)]) }),
            ]
        case .newData(let id, let source, let content, let etag, let lastModified):
            object = ["type": "newData"]
            if let source { object["source"] = .string(source) }
            if let id { object["id"] = .number(JSONNumber(id)) }
            object["content"] = content
            if let etag { object["etag"] = .string(etag) }
            if let lastModified { object["lastModified"] = .string(lastModified) }
        case .notModified(let id):
            object = ["type": "notModified", "id": .number(JSONNumber(id))]
        case .error(let id, let source, let error):
            object = ["type": "error"]
            if let source { object["source"] = .string(source) }
            if let id { object["id"] = .number(JSONNumber(id)) }
            var fields = error.json.objectValue ?? [:]
            if let retryAfter = error.retryAfter, let seconds = JSONNumber(exactly: Double(retryAfter.milliseconds) / 1000) {
                fields["retryAfter"] = .number(seconds)
            }
            if let transient = error.transient { fields["transient"] = .bool(transient) }
            object["error"] = .object(fields)
        case .cancelled(let id):
            object = ["type": "cancelled", "id": .number(JSONNumber(id))]
        }
        return .object(object)
    }

    public var line: [UInt8] { json.jsonBytes + [UInt8(ascii: "\n")] }
}

// MARK: - Decoding

extension EngineMessage {
    public init(line: some Collection<UInt8>) throws(ProtocolError) {
        let fields = try MessageFields(line: line, discriminator: "op")
        switch fields.name {
        case "hello": self = .hello(protocol: try fields.int("protocol"))
        case "configure": self = .configure(source: try fields.string("source"), options: try fields.value("options"))
        case "load":
            self = .load(
                source: try fields.string("source"), id: try fields.int("id"), etag: try fields.optionalString("etag"),
                lastModified: try fields.optionalString("lastModified"), timeout: try fields.optionalDouble("timeout"))
        case "cancel": self = .cancel(id: try fields.int("id"))
        case "remove": self = .remove(source: try fields.string("source"))
        case "shutdown": self = .shutdown
        default:
            throw ProtocolError("unknown op \"\(fields.name)\" (expected hello, configure, load, cancel, remove, shutdown)")
        }
    }
}

extension PluginMessage {
    public init(line: some Collection<UInt8>) throws(ProtocolError) {
        let fields = try MessageFields(line: line, discriminator: "type")
        switch fields.name {
        case "hello":
            let kinds = try fields.value("kinds")
            guard let list = kinds.arrayValue, !list.isEmpty, list.allSatisfy({ $0.stringValue != nil }) else {
                throw ProtocolError("hello: \"kinds\" must be a non-empty list of strings")
            }
            self = .hello(
                protocol: try fields.int("protocol"), kinds: list.compactMap(\.stringValue),
                version: try fields.optionalString("version") ?? "unknown")
        case "configured":
            self = .configured(source: try fields.string("source"))
        case "invalid":
            let source = try fields.string("source")
            guard let list = try fields.value("errors").arrayValue else {
                throw ProtocolError("invalid: \"errors\" must be a list of {path, message}")
            }
            var problems: [OptionProblem] = []
            for entry in list {
                guard let message = entry["message"]?.stringValue else {
                    throw ProtocolError("invalid: each error needs a \"message\" string")
                }
                let path = entry["path"]?.stringValue ?? ""
                guard let pointer = JSONPointer(path) else {
                    throw ProtocolError("invalid: error path \"\(path)\" is not a JSON Pointer")
                }
                problems.append(OptionProblem(pointer: pointer, message: message))
            }
            self = .invalid(source: source, errors: problems)
        case "newData":
            let id = try fields.optionalInt("id")
            let source = try fields.optionalString("source")
            if id == nil && source == nil { throw ProtocolError("newData needs an \"id\" (an answer) or a \"source\" (a push)") }
            self = .newData(
                id: id, source: source, content: try fields.value("content"), etag: try fields.optionalString("etag"),
                lastModified: try fields.optionalString("lastModified"))
        case "notModified":
            self = .notModified(id: try fields.int("id"))
        case "error":
            let id = try fields.optionalInt("id")
            let source = try fields.optionalString("source")
            if id == nil && source == nil { throw ProtocolError("error needs an \"id\" (an answer) or a \"source\" (a push)") }
            self = .error(id: id, source: source, error: try Self.sourceError(fields.value("error")))
        case "cancelled":
            self = .cancelled(id: try fields.int("id"))
        default:
            throw ProtocolError(
                "unknown type \"\(fields.name)\" (expected hello, configured, invalid, newData, notModified, error, cancelled)")
        }
    }

    private static func sourceError(_ value: JSONValue) throws(ProtocolError) -> SourceError {
        if let message = value.stringValue { return SourceError(message: message) }
        guard let object = value.objectValue, let message = object["message"]?.stringValue else {
            throw ProtocolError("\"error\" must be {message, httpStatus?, exitStatus?, code?, retryAfter?, transient?}")
        }
        // A value beyond Int64 milliseconds (1e300) is ignored, like a retryAfter that is not a number.
        let retryAfter = object["retryAfter"]?.numberValue
            .flatMap { Int64(exactly: ($0.doubleValue * 1000).rounded()) }
            .flatMap { $0 >= 0 ? $0 : nil }
            .map { Duration.milliseconds($0) }
        return SourceError(
            message: message, httpStatus: object["httpStatus"]?.numberValue?.intValue,
            exitStatus: object["exitStatus"]?.numberValue?.intValue, code: object["code"]?.stringValue,
            retryAfter: retryAfter, transient: object["transient"]?.boolValue)
    }
}

/// Reads the fields of one message, with errors that say which field was wrong and how.
private struct MessageFields {
    let object: JSONObject
    let name: String

    init(line: some Collection<UInt8>, discriminator: String) throws(ProtocolError) {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: line)
        } catch {
            throw ProtocolError("not JSON: \(error.message) at byte \(error.offset)")
        }
        guard let object = value.objectValue else { throw ProtocolError("expected a JSON object, got \(value.kindName)") }
        guard let name = object[discriminator]?.stringValue else {
            throw ProtocolError("the message has no \"\(discriminator)\" string")
        }
        self.object = object
        self.name = name
    }

    func value(_ key: String) throws(ProtocolError) -> JSONValue {
        guard let value = object[key] else { throw ProtocolError("\(name): missing \"\(key)\"") }
        return value
    }

    func string(_ key: String) throws(ProtocolError) -> String {
        guard let text = try value(key).stringValue else { throw ProtocolError("\(name): \"\(key)\" must be a string") }
        return text
    }

    func int(_ key: String) throws(ProtocolError) -> Int {
        guard let number = try value(key).numberValue?.intValue else {
            throw ProtocolError("\(name): \"\(key)\" must be an integer")
        }
        return number
    }

    func optionalString(_ key: String) throws(ProtocolError) -> String? {
        guard let value = object[key], !value.isNull else { return nil }
        return try string(key)
    }

    func optionalInt(_ key: String) throws(ProtocolError) -> Int? {
        guard let value = object[key], !value.isNull else { return nil }
        return try int(key)
    }

    func optionalDouble(_ key: String) throws(ProtocolError) -> Double? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let number = value.numberValue else { throw ProtocolError("\(name): \"\(key)\" must be a number") }
        return number.doubleValue
    }
}
