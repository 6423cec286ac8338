import HammockJSON
import OrderedCollections

/// What a control line on stdin asks for.
public enum ControlCommand: Sendable, Equatable {
    /// Load now, even if a load is in flight or the data is fresh.
    case load(ControlTarget)
    /// Load unless the data is up to date or a load is already in flight.
    case loadIfNeeded(ControlTarget)
    /// Load every failing source of the target.
    case retry(ControlTarget)
    case cancel(ControlTarget)
    /// Forget content and error, as if the source had never loaded.
    case wipe(ControlTarget)
    /// Set a source's content from the consumer.
    case override(source: String, content: JSONValue)
    /// Write every current state again.
    case snapshot
    /// Read the configuration file again.
    case reload
}

public enum ControlTarget: Sendable, Equatable {
    case source(String)
    case view(String)
}

extension ControlCommand {
    /// Decodes one control line. The error message is what the consumer reads on the `error` line, so it
    /// says what was wrong and what would have been right.
    public init(line: some Collection<UInt8>) throws(ControlLineError) {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: line)
        } catch {
            throw ControlLineError("control line is not valid JSON: \(error.message) at byte \(error.offset)")
        }
        guard case .object(let object) = value else {
            throw ControlLineError("control line must be a JSON object like {\"op\":\"load\",\"source\":\"id\"}, got \(value.kindName)")
        }
        guard let opValue = object["op"] else {
            throw ControlLineError("control line has no \"op\"; expected one of \(Self.operations.joined(separator: ", "))")
        }
        guard case .string(let op) = opValue else {
            throw ControlLineError("\"op\" must be a string, got \(opValue.kindName)")
        }
        func target() throws(ControlLineError) -> ControlTarget {
            switch (object["source"], object["view"]) {
            case (.string(let id)?, nil): return .source(id)
            case (nil, .string(let id)?): return .view(id)
            case (.some, .some): throw ControlLineError("\"\(op)\" takes either \"source\" or \"view\", not both")
            case (nil, nil): throw ControlLineError("\"\(op)\" needs a \"source\" or a \"view\"")
            default: throw ControlLineError("\"source\" and \"view\" must be strings")
            }
        }
        switch op {
        case "load": self = .load(try target())
        case "loadIfNeeded": self = .loadIfNeeded(try target())
        case "retry": self = .retry(try target())
        case "cancel": self = .cancel(try target())
        case "wipe": self = .wipe(try target())
        case "override":
            guard case .string(let source)? = object["source"] else {
                throw ControlLineError("\"override\" needs a \"source\" (a string)")
            }
            guard let content = object["content"] else {
                throw ControlLineError("\"override\" needs a \"content\"")
            }
            self = .override(source: source, content: content)
        case "snapshot": self = .snapshot
        case "reload": self = .reload
        default:
            throw ControlLineError(
                "unknown op \"\(op)\"; expected one of \(Self.operations.joined(separator: ", "))")
        }
    }

    public static let operations = [
        "load", "loadIfNeeded", "retry", "cancel", "wipe", "override", "snapshot", "reload",
    ]
}

public struct ControlLineError: Error, Sendable, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

extension ControlCommand {
    /// Commands with the same key may replace each other while they wait to be carried out, the newest
    /// taking the place of the older at the back of the queue, as stdout's lines do per id: a flood of
    /// control lines then waits as one command per op and source, not as a backlog. Every op allows it: two
    /// `override`s in a row leave the newest content, two `load`s one load after the newest asked (see
    /// `EngineCore`'s follow-up rule), two `cancel`s, `wipe`s, `snapshot`s or `reload`s one of each.
    public var coalescingKey: String {
        func key(_ op: String, _ target: ControlTarget) -> String {
            switch target {
            case .source(let id): "\(op)\u{0}source\u{0}\(id)"
            case .view(let id): "\(op)\u{0}view\u{0}\(id)"
            }
        }
        switch self {
        case .load(let target): return key("load", target)
        case .loadIfNeeded(let target): return key("loadIfNeeded", target)
        case .retry(let target): return key("retry", target)
        case .cancel(let target): return key("cancel", target)
        case .wipe(let target): return key("wipe", target)
        case .override(let source, _): return key("override", .source(source))
        case .snapshot: return "snapshot"
        case .reload: return "reload"
        }
    }
}
