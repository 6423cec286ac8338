import ArgumentParser
import HammockCore
import HammockEngine
import HammockJSON
import HammockMetrics
import HammockRendering

/// A value of an option that swift-argument-parser reads (`ExpressibleByArgument`, so `--help` lists the
/// values of an enumeration and shell completions offer them) and that says, when a text spells none, why.
protocol OptionValue: ExpressibleByArgument {
    /// The value `text` spells, or why it spells none, in words that do not begin with the option's name:
    /// its command puts the name in front, in the form of that command's other messages.
    static func parse(_ text: String) -> Result<Self, OptionProblem>
}

/// Why a text on the command line is not a value of its option: what was written and what to write instead.
struct OptionProblem: Error, CustomStringConvertible {
    let description: String
}

/// An option's text as swift-argument-parser read it: the value, or why there is none.
///
/// Why not a failing `init?(argument:)` alone: swift-argument-parser refuses such a value with its own words
/// and exit status 64, while a wrong `--format` or `--metrics` is one of hammock's usage errors (stderr says
/// what to write instead, exit status 2: docs/formats.md, docs/service.md) and a wrong `--deadline` says what
/// is wrong with the duration. The parser reads the text into this; the command decides how a problem ends it
/// (`value(or:)`), at the point where it checked the text before.
struct Parsed<Value: OptionValue>: ExpressibleByArgument {
    let result: Result<Value, OptionProblem>

    /// A default, written in the option's declaration.
    init(_ value: Value) { result = .success(value) }

    /// Never fails: a text that is no value becomes its problem.
    init(argument: String) { result = Value.parse(argument) }

    /// The value, or the error `refusal` makes of its problem.
    func value(or refusal: (OptionProblem) -> any Error) throws -> Value {
        switch result {
        case .success(let value): return value
        case .failure(let problem): throw refusal(problem)
        }
    }

    static var allValueStrings: [String] { Value.allValueStrings }
    static var defaultCompletionKind: CompletionKind { Value.defaultCompletionKind }
    static var allValueDescriptions: [String: String] { Value.allValueDescriptions }

    var defaultValueDescription: String {
        switch result {
        case .success(let value): value.defaultValueDescription
        case .failure: ""
        }
    }
}

/// `--format`: one of `StdoutFormat`'s cases, by name (help and completions list them, in their order).
extension StdoutFormat: OptionValue {
    static func parse(_ text: String) -> Result<StdoutFormat, OptionProblem> {
        if let format = StdoutFormat(rawValue: text) { return .success(format) }
        let known = allCases.map(\.rawValue).joined(separator: ", ")
        return .failure(OptionProblem(description: "\"\(text)\" is not a format (formats: \(known))"))
    }
}

/// A duration option (`--deadline`): the configuration's form, `250ms`, `5s`, `2m`, `1h`, `1m30s`
/// (`parseDuration`). A wrapper rather than `Duration` itself, which is not hammock's to extend for a library.
struct OptionDuration: OptionValue {
    let duration: Duration

    init(_ duration: Duration) { self.duration = duration }

    init?(argument: String) {
        guard case .success(let value) = Self.parse(argument) else { return nil }
        self = value
    }

    /// A duration with its unit; a bare `0` too, which is zero in any unit (`--idle-exit 0`: never).
    static func parse(_ text: String) -> Result<OptionDuration, OptionProblem> {
        if text.trimmingWhitespace() == "0" { return .success(OptionDuration(.zero)) }
        return parseDuration(text).map { OptionDuration($0) }.mapError { OptionProblem(description: $0.message) }
    }

    /// As help shows a default: `30s`.
    var defaultValueDescription: String { duration.humanReadable }
}

/// `plugin check --load-timeout` and `--expect-push`: seconds, a number (`5`, `0.5`) as these options have
/// always taken, or a duration with its unit (`500ms`). Bounded: a number that is not finite, not above zero
/// or beyond a day spells no wait (and `nan` once crashed the conversion to milliseconds).
struct OptionSeconds: OptionValue {
    let duration: Duration

    /// The longest wait either option takes.
    static let maximum: Duration = .seconds(86_400)

    init(_ duration: Duration) { self.duration = duration }

    init?(argument: String) {
        guard case .success(let value) = Self.parse(argument) else { return nil }
        self = value
    }

    static func parse(_ text: String) -> Result<OptionSeconds, OptionProblem> {
        let refusal = OptionProblem(
            description: "\"\(text)\" is not a number of seconds above 0 and at most \(maximum.humanReadable) (e.g. 5, 0.5 or 500ms)")
        let duration: Duration
        if let seconds = Double(text) {
            guard seconds.isFinite, seconds > 0, seconds <= 86_400 else { return .failure(refusal) }
            duration = .milliseconds(Int64((seconds * 1000).rounded(.up)))
        } else {
            guard case .success(let parsed) = parseDuration(text) else { return .failure(refusal) }
            duration = parsed
        }
        guard duration > .zero, duration <= maximum else { return .failure(refusal) }
        return .success(OptionSeconds(duration))
    }

    /// As help shows a default: `5s`.
    var defaultValueDescription: String { duration.humanReadable }
}

/// `--metrics HOST:PORT`.
extension MetricsAddress: OptionValue {
    public init?(argument: String) { self.init(argument) }

    static func parse(_ text: String) -> Result<MetricsAddress, OptionProblem> {
        guard let address = MetricsAddress(text) else {
            return .failure(
                OptionProblem(description: "\"\(text)\" is not HOST:PORT; for example --metrics 127.0.0.1:9464"))
        }
        return .success(address)
    }
}

/// `plugin check --options`: a JSON object, the options of one source.
struct OptionsObject: OptionValue {
    let object: JSONObject
    /// As written, which help shows as the default.
    let text: String

    /// No options: `{}`.
    static let empty = OptionsObject(object: [:], text: "{}")

    init?(argument: String) {
        guard case .success(let value) = Self.parse(argument) else { return nil }
        self = value
    }

    static func parse(_ text: String) -> Result<OptionsObject, OptionProblem> {
        guard let parsed = try? JSONValue(parsing: Array(text.utf8)), let object = parsed.objectValue else {
            return .failure(OptionProblem(description: #"must be a JSON object, e.g. '{"path":"/etc/hostname"}'"#))
        }
        return .success(OptionsObject(object: object, text: text))
    }

    private init(object: JSONObject, text: String) {
        self.object = object
        self.text = text
    }

    var defaultValueDescription: String { text }
}
