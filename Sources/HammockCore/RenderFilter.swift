import HammockJSON

/// One step of a render template's pipeline (`{{ load | split | first }}`). docs/configuration.md, "Rendering
/// a view", documents each one; arguments are checked when the template is parsed, values when it renders.
///
/// Nothing (a member that is not there, or `null`: a source without content yet) passes every filter but
/// `default` unchanged, so a pipeline over nothing renders as nothing. A filter given a value
/// it cannot use (`upper` on an object, `bytes` on "abc") is a render problem: its expression renders as the
/// empty string and the problem is reported.
public enum RenderFilter: Sendable, Hashable {
    /// A missing value, `null` or `""` becomes the argument.
    case `default`(JSONValue)
    /// A number (or a string holding one) rounded half away from zero to this many decimals, all written.
    case round(decimals: Int)
    /// Text longer than `length` characters is cut to `length - 1` and `…`.
    case truncate(length: Int)
    case upper
    case lower
    /// An array's first / last element, a string's first / last character.
    case first
    case last
    /// Text split at each separator; with none, at runs of white space, with no empty pieces.
    case split(separator: String?)
    /// An array's elements as text, joined with the separator (`, ` without one).
    case join(separator: String)
    /// A number of bytes in IEC units: `512 B`, `1.5 KiB`, `3.2 GiB`.
    case bytes
    /// A number of seconds: `250ms`, `45s`, `1m 30s`, `2h 5m`, `3d 4h`.
    case duration
    /// An instant (Unix seconds, or RFC 3339 text) against the render's `now`: `3 s ago`, `5 min ago`, `in 2 h`.
    case ago

    public static let names = [
        "default", "round", "truncate", "upper", "lower", "first", "last", "split", "join", "bytes", "duration", "ago",
    ]

    /// The filter called `name` with these arguments, or an error that says what is wrong.
    static func make(
        _ name: String, arguments: [(value: JSONValue, offset: Int)], at offset: Int
    ) throws(RenderTemplateError) -> RenderFilter {
        func count(_ allowed: ClosedRange<Int>, _ usage: String) throws(RenderTemplateError) {
            guard allowed.contains(arguments.count) else {
                throw RenderTemplateError("\(name) takes \(usage), given \(arguments.count) argument(s)", offset: offset)
            }
        }
        func integer(_ index: Int, _ range: ClosedRange<Int>) throws(RenderTemplateError) -> Int {
            let argument = arguments[index]
            guard let value = argument.value.numberValue?.intValue, range.contains(value) else {
                throw RenderTemplateError(
                    "\(name) needs a whole number from \(range.lowerBound) to \(range.upperBound), found \(argument.value.jsonString)",
                    offset: argument.offset)
            }
            return value
        }
        func string(_ index: Int, nonEmpty: Bool) throws(RenderTemplateError) -> String {
            let argument = arguments[index]
            guard let value = argument.value.stringValue, !(nonEmpty && value.isEmpty) else {
                throw RenderTemplateError(
                    "\(name) needs a\(nonEmpty ? " non-empty" : "") quoted string, found \(argument.value.jsonString)",
                    offset: argument.offset)
            }
            return value
        }
        switch name {
        case "default":
            try count(1...1, "one argument, e.g. default('–')")
            return .default(arguments[0].value)
        case "round":
            try count(0...1, "at most one argument, the decimals, e.g. round(1)")
            return .round(decimals: arguments.isEmpty ? 0 : try integer(0, 0...10))
        case "truncate":
            try count(1...1, "one argument, the length, e.g. truncate(20)")
            return .truncate(length: try integer(0, 1...100_000))
        case "split":
            try count(0...1, "at most one argument, the separator, e.g. split(' ')")
            return .split(separator: arguments.isEmpty ? nil : try string(0, nonEmpty: true))
        case "join":
            try count(0...1, "at most one argument, the separator, e.g. join(', ')")
            return .join(separator: arguments.isEmpty ? ", " : try string(0, nonEmpty: false))
        case "upper", "lower", "first", "last", "bytes", "duration", "ago":
            try count(0...0, "no arguments")
            switch name {
            case "upper": return .upper
            case "lower": return .lower
            case "first": return .first
            case "last": return .last
            case "bytes": return .bytes
            case "duration": return .duration
            default: return .ago
            }
        default:
            throw RenderTemplateError(
                "unknown filter \"\(name)\"\(didYouMean(name, among: names)); filters: \(names.joined(separator: ", "))",
                offset: offset)
        }
    }

    public var name: String {
        switch self {
        case .default: "default"
        case .round: "round"
        case .truncate: "truncate"
        case .upper: "upper"
        case .lower: "lower"
        case .first: "first"
        case .last: "last"
        case .split: "split"
        case .join: "join"
        case .bytes: "bytes"
        case .duration: "duration"
        case .ago: "ago"
        }
    }
}
