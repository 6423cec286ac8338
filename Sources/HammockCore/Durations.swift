// Durations as the configuration writes them, read (`parseDuration`) and written (`humanReadable`) in one form.

/// Parses the configuration's durations: `250ms`, `5s`, `2m`, `1h`, `1.5s`, and combinations like `1m30s`.
public func parseDuration(_ text: String) -> Result<Duration, DurationProblem> {
    let trimmed = text.trimming { $0 == " " }
    guard !trimmed.isEmpty else { return .failure(DurationProblem("expected a duration such as 250ms, 5s, 2m or 1h")) }
    // Only digits make "a number without a unit": `nan` and `inf` are no numbers a person meant.
    if trimmed.first.map({ $0.isNumber || $0 == "." }) == true, Double(trimmed) != nil {
        return .failure(DurationProblem("\"\(trimmed)\" has no unit; write \(trimmed)s, \(trimmed)ms, \(trimmed)m or \(trimmed)h"))
    }
    var total = 0.0
    var rest = Substring(trimmed)
    while !rest.isEmpty {
        let number = rest.prefix { $0.isNumber || $0 == "." }
        rest = rest.dropFirst(number.count)
        let unit = rest.prefix { $0.isLetter }
        rest = rest.dropFirst(unit.count)
        guard let value = Double(number), let scale = durationUnits[String(unit)] else {
            return .failure(DurationProblem("\"\(trimmed)\" is not a duration; write e.g. 250ms, 5s, 2m, 1h or 1m30s"))
        }
        total += value * scale
    }
    guard total < 1e12 else { return .failure(DurationProblem("\"\(trimmed)\" is too long")) }
    return .success(.milliseconds(Int64(total.rounded())))
}

extension Duration {
    /// Whole milliseconds, rounded toward zero; the engine's timers need no finer grain.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// `250ms`, `5s`, `2m`, `1h`, or combinations such as `1m30s`: the form the configuration accepts.
    public var humanReadable: String {
        var ms = milliseconds
        if ms == 0 { return "0s" }
        var text = ms < 0 ? "-" : ""
        ms = abs(ms)
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000), ("ms", 1)] where ms >= size {
            text += "\(ms / size)\(unit)"
            ms %= size
        }
        return text
    }
}

public struct DurationProblem: Error, Sendable, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

private let durationUnits: [String: Double] = ["ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000]
