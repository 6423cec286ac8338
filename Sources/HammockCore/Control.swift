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
    case override(source: SourceID, content: JSONValue)
    /// Load `count` pages beyond those a paginated source holds (its `meta.pages`), and keep them on later
    /// loads; acknowledged once they are in.
    case more(source: SourceID, count: Int)
    /// Write every current state again.
    case snapshot
    /// Read the configuration file again.
    case reload
}

public enum ControlTarget: Sendable, Equatable {
    case source(SourceID)
    case view(ViewID)

    /// A source by its id's text, for an app that holds ids as strings (`.source(name)`).
    public static func source(_ id: String) -> ControlTarget { .source(SourceID(id)) }
    /// A view by its id's text.
    public static func view(_ id: String) -> ControlTarget { .view(ViewID(id)) }
}

/// The consumer's name for one control line, echoed on the line that answers it (`ack` when the op was
/// carried out, `error` when it could not be): a JSON string or a JSON number, kept as its text.
public enum ControlID: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case number(JSONNumber)

    /// Nil for any other JSON type.
    public init?(_ value: JSONValue) {
        switch value {
        case .string(let text): self = .string(text)
        case .number(let number): self = .number(number)
        default: return nil
        }
    }

    public var json: JSONValue {
        switch self {
        case .string(let text): .string(text)
        case .number(let number): .number(number)
        }
    }

    public var description: String { json.description }
}

/// One control line: what it asks for, and the name the consumer gave it, if any.
public struct ControlRequest: Sendable, Equatable {
    public var command: ControlCommand
    public var id: ControlID?

    public init(_ command: ControlCommand, id: ControlID? = nil) {
        self.command = command
        self.id = id
    }

    /// Decodes one control line. The error's message is what the consumer reads on the `error` line, so it
    /// says what was wrong and what would have been right; it carries the line's `id` whenever the line is
    /// an object with a valid one, so that the consumer knows which of its lines failed.
    public init(line: some Collection<UInt8>) throws(ControlLineError) {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: line)
        } catch {
            throw ControlLineError("control line is not valid JSON: \(error.message) at byte \(error.offset)")
        }
        guard case .object(let fields) = value else {
            throw ControlLineError("control line must be a JSON object like {\"op\":\"load\",\"source\":\"id\"}, got \(value.kindName)")
        }
        var id: ControlID?
        if let given = fields["id"] {
            guard let valid = ControlID(given) else {
                throw ControlLineError("\"id\" must be a string or a number, got \(given.kindName)")
            }
            id = valid
        }
        do {
            self.init(try JSONValueDecoder().decode(ControlCommand.self, from: value), id: id)
        } catch let error as ControlLineError {
            throw ControlLineError(error.message, id: id)
        } catch let error as DecodingError {
            throw ControlLineError(error.summary(whole: "the control line"), id: id)
        } catch {
            throw ControlLineError("\(error)", id: id)
        }
    }
}

extension ControlCommand {
    public static let operations = [
        "load", "loadIfNeeded", "retry", "cancel", "wipe", "override", "more", "snapshot", "reload",
    ]
    /// The most pages one `more` asks for.
    public static let mostPagesAtOnce = 1000

    /// The command's name on the wire, its `op`.
    public var op: String {
        switch self {
        case .load: "load"
        case .loadIfNeeded: "loadIfNeeded"
        case .retry: "retry"
        case .cancel: "cancel"
        case .wipe: "wipe"
        case .override: "override"
        case .more: "more"
        case .snapshot: "snapshot"
        case .reload: "reload"
        }
    }
}

/// The declared form of a control line: `{"op": "load", "source": "id"}`, `{"op": "retry", "view": "id"}`,
/// `{"op": "override", "source": "id", "content": ...}`, `{"op": "snapshot"}`. Decoding throws a
/// `ControlLineError` for a line that is the wrong shape, with the message the consumer reads.
extension ControlCommand: Codable {
    private enum Field: String, CodingKey { case op, source, view, content, count }
    // `id` is read by `ControlRequest`, which owns the line; the command is what the line asks for.

    public init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: Field.self)
        guard fields.contains(.op) else {
            throw ControlLineError("control line has no \"op\"; expected one of \(Self.operations.joined(separator: ", "))")
        }
        let op = try fields.decode(String.self, forKey: .op)
        func target() throws -> ControlTarget {
            do {
                switch (fields.contains(.source), fields.contains(.view)) {
                // The line's text becomes a typed name here, once.
                case (true, false): return .source(SourceID(try fields.decode(String.self, forKey: .source)))
                case (false, true): return .view(ViewID(try fields.decode(String.self, forKey: .view)))
                case (true, true): throw ControlLineError("\"\(op)\" takes either \"source\" or \"view\", not both")
                case (false, false): throw ControlLineError("\"\(op)\" needs a \"source\" or a \"view\"")
                }
            } catch is DecodingError {
                throw ControlLineError("\"source\" and \"view\" must be strings")
            }
        }
        switch op {
        case "load": self = .load(try target())
        case "loadIfNeeded": self = .loadIfNeeded(try target())
        case "retry": self = .retry(try target())
        case "cancel": self = .cancel(try target())
        case "wipe": self = .wipe(try target())
        case "override":
            guard let source = try? fields.decode(String.self, forKey: .source) else {
                throw ControlLineError("\"override\" needs a \"source\" (a string)")
            }
            guard fields.contains(.content) else { throw ControlLineError("\"override\" needs a \"content\"") }
            self = .override(source: SourceID(source), content: try fields.decode(JSONValue.self, forKey: .content))
        case "more":
            guard let source = try? fields.decode(String.self, forKey: .source) else {
                throw ControlLineError("\"more\" needs a \"source\" (a string): more loads the next pages of one source")
            }
            var count = 1
            if fields.contains(.count) {
                guard let number = try? fields.decode(Int.self, forKey: .count), (1...Self.mostPagesAtOnce).contains(number) else {
                    throw ControlLineError("\"count\" must be a whole number from 1 to \(Self.mostPagesAtOnce), the pages to load")
                }
                count = number
            }
            self = .more(source: SourceID(source), count: count)
        case "snapshot": self = .snapshot
        case "reload": self = .reload
        default:
            throw ControlLineError("unknown op \"\(op)\"; expected one of \(Self.operations.joined(separator: ", "))")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var fields = encoder.container(keyedBy: Field.self)
        try fields.encode(op, forKey: .op)
        switch self {
        case .load(let target), .loadIfNeeded(let target), .retry(let target), .cancel(let target), .wipe(let target):
            switch target {
            case .source(let id): try fields.encode(id.rawValue, forKey: .source)
            case .view(let id): try fields.encode(id.rawValue, forKey: .view)
            }
        case .override(let source, let content):
            try fields.encode(source.rawValue, forKey: .source)
            try fields.encode(content, forKey: .content)
        case .more(let source, let count):
            try fields.encode(source.rawValue, forKey: .source)
            if count != 1 { try fields.encode(count, forKey: .count) }
        case .snapshot, .reload:
            break
        }
    }
}

public struct ControlLineError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    /// The `id` of the line that failed, echoed on its `error` line.
    public var id: ControlID?
    public init(_ message: String, id: ControlID? = nil) {
        self.message = message
        self.id = id
    }
    public var description: String { message }
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
        case .load(let target), .loadIfNeeded(let target), .retry(let target), .cancel(let target), .wipe(let target):
            return key(op, target)
        case .override(let source, _): return key(op, .source(source))
        // Two alike ask for the same pages: `count` beyond those the source holds when it is carried out.
        case .more(let source, let count): return key(op, .source(source)) + "\u{0}\(count)"
        case .snapshot, .reload: return op
        }
    }
}
