/// A wall-clock instant with millisecond precision.
///
/// The core never reads a clock: every entry point takes `now`, so tests drive time by hand and run in
/// microseconds, and the runtime is the only place that asks the system what time it is.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    public static func + (lhs: Timestamp, rhs: Duration) -> Timestamp {
        Timestamp(millisecondsSince1970: lhs.millisecondsSince1970 + rhs.milliseconds)
    }

    public static func - (lhs: Timestamp, rhs: Timestamp) -> Duration {
        .milliseconds(lhs.millisecondsSince1970 - rhs.millisecondsSince1970)
    }

    /// RFC 3339 in UTC with milliseconds, e.g. `2026-11-22T10:00:00.123Z`.
    public var description: String { rfc3339 }

    public var rfc3339: String {
        let ms = millisecondsSince1970
        let days = floorDivide(ms, 86_400_000)
        let msOfDay = ms - days * 86_400_000
        let (year, month, day) = civilDate(daysSince1970: days)
        let hour = msOfDay / 3_600_000
        let minute = msOfDay / 60_000 % 60
        let second = msOfDay / 1000 % 60
        let milli = msOfDay % 1000
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2)).\(pad(milli, 3))Z"
    }
}

private func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
    a >= 0 ? a / b : -((-a + b - 1) / b)
}

/// Howard Hinnant's days-to-civil algorithm: no calendar objects, no allocation.
private func civilDate(daysSince1970: Int64) -> (Int64, Int64, Int64) {
    let z = daysSince1970 + 719_468
    let era = floorDivide(z, 146_097)
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
}

private func pad(_ value: Int64, _ width: Int) -> String {
    let digits = String(value)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}
