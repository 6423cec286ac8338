import HammockJSON
import OrderedCollections

/// A view's display template, e.g. `"{{ load | split | first | default('–') }} ⚙"`: literal text and
/// `{{ reference | filter | filter(argument) }}` expressions, parsed once and rendered on every change.
///
/// Not `Template` (a source option's template): that one is a bare reference whose value goes to a server or
/// a command, and refuses anything more on purpose; this one has a filter pipeline with quoted arguments
/// (which may themselves hold `}}`), so it has its own scanner. It shares `TemplateReference` for the path.
public struct RenderTemplate: Sendable, Hashable {
    public enum Part: Sendable, Hashable {
        case literal(String)
        case expression(RenderExpression)
    }

    public var parts: [Part]

    public init(parts: [Part]) { self.parts = parts }

    /// Whether the text changes with the time of rendering alone (`ago`), with the same content.
    public var dependsOnTime: Bool {
        parts.contains { if case .expression(let expression) = $0 { expression.filters.contains(.ago) } else { false } }
    }

    public var references: [TemplateReference] {
        parts.compactMap { if case .expression(let expression) = $0 { expression.reference } else { nil } }
    }

    /// Parses `text`; text without `{{` is one literal.
    public static func parse(_ text: String) throws(RenderTemplateError) -> RenderTemplate {
        var scanner = RenderScanner(text)
        return try scanner.template()
    }

    /// Fills the template in. A problem (a missing member, a filter given the wrong kind of value) makes its
    /// expression render as the empty string and is returned beside the text; rendering never fails.
    public func render(in context: RenderContext) -> (text: String, problems: [String]) {
        var text = ""
        var problems: [String] = []
        for part in parts {
            switch part {
            case .literal(let literal):
                text += literal
            case .expression(let expression):
                switch expression.evaluate(in: context) {
                case .success(let value): text += value.renderedText
                case .failure(let problem): problems.append(problem.message)
                }
            }
        }
        return (text, problems)
    }
}

/// `reference | filter | …` inside `{{ }}`.
public struct RenderExpression: Sendable, Hashable {
    public var reference: TemplateReference
    public var filters: [RenderFilter]

    public init(reference: TemplateReference, filters: [RenderFilter]) {
        self.reference = reference
        self.filters = filters
    }

    /// The value after every filter. `.missing` travels through every filter but `default`; at the end it is
    /// a problem.
    func evaluate(in context: RenderContext) -> Result<RenderValue, RenderProblem> {
        var value = context.lookUp(reference)
        for filter in filters {
            switch filter.apply(to: value, now: context.now) {
            case .success(let next): value = next
            case .failure(let problem): return .failure(problem)
            }
        }
        if case .missing = value { return .failure(RenderProblem("{{ \(reference) }} has no value")) }
        return .success(value)
    }
}

/// What a render template reads: the view's source contents by id, and its status, error and retry state.
public struct RenderContext: Sendable {
    /// The names a template may start with besides a view's source ids; they win over a source of the same
    /// name, which `content.NAME` still reaches.
    public static let reservedNames = ["content", "status", "latestError", "errors", "canTryAgain"]

    public var roots: JSONObject
    /// For `ago`: the core reads no clock.
    public var now: Timestamp

    public init(roots: JSONObject, now: Timestamp) {
        self.roots = roots
        self.now = now
    }

    /// The view's context: each source's content (`null` until it has some), then the reserved names.
    /// Every string is redacted first, so no filter can reshape a secret past the redactor.
    public init(view: ViewDefinition, state: ViewState, now: Timestamp, redactor: Redactor = .none) {
        var roots = JSONObject()
        for source in view.sources { roots[source.rawValue] = redactor.redact(state.content[source.rawValue] ?? .null) }
        roots["content"] = redactor.redact(state.content)
        roots["status"] = .string(state.status.rawValue)
        roots["latestError"] = state.latestError?.displayed(redactor: redactor) ?? .null
        var errors = JSONObject()
        for entry in state.errors { errors[redactor.redact(entry.source.rawValue)] = entry.error.displayed(redactor: redactor) }
        roots["errors"] = .object(errors)
        roots["canTryAgain"] = .bool(state.canTryAgain)
        self.init(roots: roots, now: now)
    }

    /// The value at `reference`: descending into `null` gives `null` (a source without content yet), a member
    /// that is not there gives `.missing`.
    func lookUp(_ reference: TemplateReference) -> RenderValue {
        guard var value = roots[reference.source] else { return .missing }
        for key in reference.path {
            switch value {
            case .null:
                return .json(.null)
            case .object(let object):
                guard let member = object[key] else { return .missing }
                value = member
            case .array(let items):
                guard let index = Int(key), items.indices.contains(index) else { return .missing }
                value = items[index]
            default:
                return .missing
            }
        }
        return .json(value)
    }
}

public struct RenderTemplateError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    /// Where in the template, in Unicode scalars from its start (YAML columns count scalars too).
    public var offset: Int

    public init(_ message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }

    public var description: String { "\(message) (at character \(offset + 1) of the template)" }
}

/// A render-time problem: its expression rendered as the empty string.
struct RenderProblem: Error, Sendable, Equatable {
    var message: String
    init(_ message: String) { self.message = message }
}

/// A value between filters: JSON, or nothing at all (a member that is not there).
enum RenderValue: Sendable, Equatable {
    case missing
    case json(JSONValue)

    var renderedText: String {
        switch self {
        case .missing: ""
        case .json(let value): value.renderText
        }
    }
}

extension JSONValue {
    /// How a value reads in rendered text: a string as it is, `null` as nothing, everything else as JSON.
    var renderText: String {
        switch self {
        case .null: ""
        case .string(let string): string
        default: jsonString
        }
    }
}

// MARK: - Scanning

private struct RenderScanner {
    let scalars: [Unicode.Scalar]
    var position = 0

    init(_ text: String) { scalars = Array(text.unicodeScalars) }

    func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        position + offset < scalars.count ? scalars[position + offset] : nil
    }

    func isAt(_ text: String) -> Bool {
        for (index, scalar) in text.unicodeScalars.enumerated() where peek(index) != scalar { return false }
        return true
    }

    mutating func skipSpaces() {
        while let scalar = peek(), scalar == " " || scalar == "\t" || scalar == "\n" { position += 1 }
    }

    mutating func template() throws(RenderTemplateError) -> RenderTemplate {
        var parts: [RenderTemplate.Part] = []
        var literal = String.UnicodeScalarView()
        while position < scalars.count {
            if isAt("{{") {
                if !literal.isEmpty { parts.append(.literal(String(literal))) }
                literal = String.UnicodeScalarView()
                let open = position
                position += 2
                parts.append(.expression(try expression(openedAt: open)))
            } else if isAt("}}") {
                throw RenderTemplateError("\"}}\" without an opening \"{{\"", offset: position)
            } else {
                literal.append(scalars[position])
                position += 1
            }
        }
        if !literal.isEmpty { parts.append(.literal(String(literal))) }
        return RenderTemplate(parts: parts)
    }

    mutating func expression(openedAt open: Int) throws(RenderTemplateError) -> RenderExpression {
        skipSpaces()
        let reference = try self.reference()
        var filters: [RenderFilter] = []
        while true {
            skipSpaces()
            if isAt("}}") {
                position += 2
                return RenderExpression(reference: reference, filters: filters)
            }
            guard let scalar = peek() else {
                throw RenderTemplateError("unclosed \"{{\" (expected \"}}\")", offset: open)
            }
            guard scalar == "|" else {
                throw RenderTemplateError("expected \"|\" or \"}}\", found \"\(scalar)\"", offset: position)
            }
            position += 1
            skipSpaces()
            filters.append(try filter())
        }
    }

    mutating func name() -> (text: String, offset: Int) {
        let start = position
        while let scalar = peek(), isNameScalar(scalar) { position += 1 }
        return (String(String.UnicodeScalarView(scalars[start..<position])), start)
    }

    mutating func reference() throws(RenderTemplateError) -> TemplateReference {
        var segments: [String] = []
        repeat {
            let segment = name()
            guard !segment.text.isEmpty else {
                let found = peek().map { "\"\($0)\"" } ?? "the end"
                throw RenderTemplateError(
                    "expected a reference such as {{ source }}, {{ source.key.0 }} or {{ status }}, found \(found)",
                    offset: segment.offset)
            }
            segments.append(segment.text)
        } while consume(".")
        return TemplateReference(source: segments[0], path: Array(segments.dropFirst()))
    }

    mutating func consume(_ scalar: Unicode.Scalar) -> Bool {
        guard peek() == scalar else { return false }
        position += 1
        return true
    }

    mutating func filter() throws(RenderTemplateError) -> RenderFilter {
        let (filterName, offset) = name()
        guard !filterName.isEmpty else {
            throw RenderTemplateError("expected a filter name after \"|\"", offset: offset)
        }
        var arguments: [(value: JSONValue, offset: Int)] = []
        skipSpaces()
        if consume("(") {
            skipSpaces()
            if !consume(")") {
                repeat {
                    skipSpaces()
                    arguments.append(try literal())
                    skipSpaces()
                } while consume(",")
                guard consume(")") else {
                    throw RenderTemplateError("expected \",\" or \")\" in the arguments of \(filterName)", offset: position)
                }
            }
        }
        return try RenderFilter.make(filterName, arguments: arguments, at: offset)
    }

    /// A quoted string (`'…'` or `"…"`, a backslash escapes the next character) or a number.
    mutating func literal() throws(RenderTemplateError) -> (value: JSONValue, offset: Int) {
        let start = position
        if let quote = peek(), quote == "'" || quote == "\"" {
            position += 1
            var text = String.UnicodeScalarView()
            while let scalar = peek(), scalar != quote {
                position += 1
                if scalar == "\\", let escaped = peek() {
                    position += 1
                    text.append(escaped)
                } else {
                    text.append(scalar)
                }
            }
            guard consume(quote) else { throw RenderTemplateError("unclosed string (expected \(quote))", offset: start) }
            return (.string(String(text)), start)
        }
        while let scalar = peek(), scalar == "-" || scalar == "." || ("0"..."9").contains(scalar) { position += 1 }
        let text = String(String.UnicodeScalarView(scalars[start..<position]))
        guard !text.isEmpty, let number = JSONNumber(text: text) else {
            let found = text.isEmpty ? (peek().map { "\"\($0)\"" } ?? "the end") : "\"\(text)\""
            throw RenderTemplateError("expected a quoted string or a number, found \(found)", offset: start)
        }
        return (.number(number), start)
    }
}

private func isNameScalar(_ scalar: Unicode.Scalar) -> Bool {
    scalar.isASCII
        && (("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
            || scalar == "_" || scalar == "-")
}
