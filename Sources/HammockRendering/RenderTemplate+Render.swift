import HammockCore
import HammockJSON
import OrderedCollections

// Rendering a parsed template (`RenderTemplate`, parsed with the configuration in HammockCore) against a
// view's state.

extension RenderTemplate {
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

extension RenderExpression {
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
    public var roots: JSONObject
    /// For `ago`: rendering reads no clock.
    public var now: Timestamp

    public init(roots: JSONObject, now: Timestamp) {
        self.roots = roots
        self.now = now
    }

    /// The view's context: each source's content (`null` until it has some), then the reserved names
    /// (`ViewRender.reservedNames`, which the configuration checks references against).
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

