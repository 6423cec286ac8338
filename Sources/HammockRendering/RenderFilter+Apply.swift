import HammockCore
import HammockJSON

/// What each filter does to a value as a template renders (`RenderFilter` itself, the parsed pipeline, is
/// part of the configuration and lives in HammockCore).
extension RenderFilter {
    func apply(to input: RenderValue, now: Timestamp) -> Result<RenderValue, RenderProblem> {
        if case .default(let replacement) = self {
            switch input {
            case .missing, .json(.null), .json(.string("")): return .success(.json(replacement))
            default: return .success(input)
            }
        }
        guard case .json(let value) = input, !value.isNull else { return .success(input) }
        return apply(to: value, now: now).map(RenderValue.json)
    }

    private func apply(to value: JSONValue, now: Timestamp) -> Result<JSONValue, RenderProblem> {
        func wrong(_ wanted: String) -> Result<JSONValue, RenderProblem> {
            .failure(RenderProblem("\(name) needs \(wanted), found \(value.kindName)"))
        }
        switch self {
        case .default:
            return .success(value)  // handled by the caller
        case .round(let decimals):
            guard let number = value.renderNumber else { return wrong("a number") }
            let text = fixed(number, decimals: decimals)
            return .success(JSONNumber(text: text).map(JSONValue.number) ?? .string(text))
        case .truncate(let length):
            guard let text = value.scalarText else { return wrong("text") }
            guard text.count > length else { return .success(.string(text)) }
            return .success(.string(String(text.prefix(length - 1)) + "…"))
        case .upper:
            guard let text = value.scalarText else { return wrong("text") }
            return .success(.string(text.uppercased()))
        case .lower:
            guard let text = value.scalarText else { return wrong("text") }
            return .success(.string(text.lowercased()))
        case .first, .last:
            let isFirst = self == .first
            if case .array(let items) = value { return .success((isFirst ? items.first : items.last) ?? .null) }
            if case .string(let text) = value {
                return .success(.string((isFirst ? text.first : text.last).map(String.init) ?? ""))
            }
            return wrong("an array or text")
        case .split(let separator):
            guard let text = value.scalarText else { return wrong("text") }
            let pieces: [Substring] =
                if let separator { text.split(separator: separator, omittingEmptySubsequences: false) }
                else { text.split(whereSeparator: \.isWhitespace) }
            return .success(.array(pieces.map { .string(String($0)) }))
        case .join(let separator):
            guard case .array(let items) = value else { return wrong("an array") }
            return .success(.string(items.map(\.renderText).joined(separator: separator)))
        case .bytes:
            guard let number = value.renderNumber else { return wrong("a number of bytes") }
            return .success(.string(bytesText(number)))
        case .duration:
            guard let number = value.renderNumber else { return wrong("a number of seconds") }
            guard number.magnitude < 1e15 else { return .failure(RenderProblem("duration: \(number) s is too long")) }
            return .success(.string(durationText(seconds: number)))
        case .ago:
            let instant: Timestamp
            if let number = value.renderNumber {
                guard number.magnitude < 1e14 else { return .failure(RenderProblem("ago: \(number) is no Unix time")) }
                instant = Timestamp(millisecondsSince1970: Int64((number * 1000).rounded()))
            } else if let text = value.stringValue, let parsed = Timestamp(rfc3339: text) {
                instant = parsed
            } else {
                return wrong("a Unix time in seconds or an RFC 3339 time such as 2026-11-22T10:00:00Z")
            }
            return .success(.string(agoText(now - instant)))
        }
    }
}

extension JSONValue {
    /// A number, or a string holding exactly one JSON number (white space around it allowed, as a command's
    /// output has): never `nan` or `inf`, which `Double("nan")` would accept, so no filter computes with NaN.
    var renderNumber: Double? {
        let number: JSONNumber? =
            switch self {
            case .number(let number): number
            case .string(let text): JSONNumber(text: text.trimmingWhitespace())
            default: nil
            }
        guard let value = number?.doubleValue, value.isFinite else { return nil }
        return value
    }

    /// Text for the text filters: a string as it is, a number or a boolean as JSON writes it.
    var scalarText: String? {
        switch self {
        case .array, .object: nil
        default: renderText
        }
    }
}

/// `value` rounded half away from zero with exactly `decimals` decimals; `-0` is written `0`. Beyond 2^53
/// (where a Double has no fraction left) the shortest form JSON would write.
func fixed(_ value: Double, decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = (value * scale).rounded(.toNearestOrAwayFromZero)
    guard scaled.magnitude < 9_007_199_254_740_992 else {
        return JSONNumber(exactly: value.rounded(.toNearestOrAwayFromZero))?.text ?? "0"
    }
    let integer = Int64(scaled)
    var digits = String(integer.magnitude)
    if decimals > 0 {
        if digits.count <= decimals { digits = String(repeating: "0", count: decimals - digits.count + 1) + digits }
        digits.insert(".", at: digits.index(digits.endIndex, offsetBy: -decimals))
    }
    return integer < 0 ? "-" + digits : digits
}

/// `512 B`, `1.5 KiB`, …, up to EiB; one decimal above bytes. A value that would round to 1024.0 of a unit is
/// written in the next one.
func bytesText(_ bytes: Double) -> String {
    let sign = bytes < 0 ? "-" : ""
    var magnitude = bytes.magnitude
    if magnitude.rounded(.toNearestOrAwayFromZero) < 1024 { return sign + fixed(magnitude, decimals: 0) + " B" }
    let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    for (index, unit) in units.enumerated() {
        magnitude /= 1024
        if (magnitude * 10).rounded(.toNearestOrAwayFromZero) < 10240 || index == units.count - 1 {
            return sign + fixed(magnitude, decimals: 1) + " " + unit
        }
    }
    return sign + fixed(magnitude, decimals: 1) + " EiB"  // unreachable: the loop returns at its last unit
}

/// `250ms` under a second, else the largest unit and the next when it is not zero: `45s`, `1m 30s`, `2h`,
/// `3d 4h`. Whole units are rounded down, the seconds to the nearest.
func durationText(seconds: Double) -> String {
    let sign = seconds < 0 ? "-" : ""
    let magnitude = seconds.magnitude
    if magnitude == 0 { return "0s" }
    if magnitude < 1 {
        let milliseconds = Int64((magnitude * 1000).rounded(.toNearestOrAwayFromZero))
        return sign + (milliseconds >= 1000 ? "1s" : "\(max(milliseconds, 1))ms")
    }
    let total = Int64(magnitude.rounded(.toNearestOrAwayFromZero))
    let units: [(String, Int64)] = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)]
    for (index, (unit, size)) in units.enumerated() where total >= size {
        let whole = total / size
        var text = "\(whole)\(unit)"
        if index + 1 < units.count {
            let (nextUnit, nextSize) = units[index + 1]
            let next = total % size / nextSize
            if next > 0 { text += " \(next)\(nextUnit)" }
        }
        return sign + text
    }
    return "0s"  // unreachable: total >= 1
}

/// `just now` within a second, else `3 s ago`, `5 min ago`, `2 h ago`, `4 d ago`, or `in …` for the future,
/// each rounded down.
func agoText(_ elapsed: Duration) -> String {
    let milliseconds = elapsed.milliseconds
    let magnitude = milliseconds.magnitude
    if magnitude < 1000 { return "just now" }
    let seconds = magnitude / 1000
    let amount: String =
        if seconds < 60 { "\(seconds) s" } else if seconds < 3600 { "\(seconds / 60) min" } else if seconds < 86_400 {
            "\(seconds / 3600) h"
        } else { "\(seconds / 86_400) d" }
    return milliseconds < 0 ? "in \(amount)" : "\(amount) ago"
}
