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
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendRFC3339(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `rfc3339`'s bytes to `out` without making a string: every output line carries a timestamp.
    public func appendRFC3339(to out: inout [UInt8]) {
        let ms = millisecondsSince1970
        let days = floorDivide(ms, 86_400_000)
        let msOfDay = ms - days * 86_400_000
        let (year, month, day) = civilDate(daysSince1970: days)
        let hour = msOfDay / 3_600_000
        let minute = msOfDay / 60_000 % 60
        let second = msOfDay / 1000 % 60
        let milli = msOfDay % 1000
        guard (0...9999).contains(year) else {
            // Years that do not fit four digits, as they were always written (no line carries one today).
            let text = "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2)).\(pad(milli, 3))Z"
            out.append(contentsOf: text.utf8)
            return
        }
        // Each field's digits, then the character after it.
        let fields: [(value: Int64, width: Int, then: Unicode.Scalar)] = [
            (year, 4, "-"), (month, 2, "-"), (day, 2, "T"), (hour, 2, ":"), (minute, 2, ":"), (second, 2, "."), (milli, 3, "Z"),
        ]
        for field in fields {
            appendDigits(field.value, field.width, to: &out)
            out.append(UInt8(ascii: field.then))
        }
    }
}

/// `value` (0 ≤ value < 10^width) as exactly `width` decimal digits.
private func appendDigits(_ value: Int64, _ width: Int, to out: inout [UInt8]) {
    var divisor: Int64 = 1
    for _ in 1..<width { divisor *= 10 }
    var rest = value
    while divisor > 0 {
        out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
        rest %= divisor
        divisor /= 10
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

extension Timestamp {
    /// Reads RFC 3339: `2026-11-22T10:00:00Z`, with optional fractions of a second (milliseconds kept) and a
    /// `±HH:MM` offset; `t`/`z` and a space for `T` are accepted too. `nil` for anything else.
    public init?(rfc3339 text: String) {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ width: Int) -> Int64? {
            guard index + width <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<index + width] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            index += width
            return value
        }
        func expect(_ allowed: String) -> Bool {
            guard index < bytes.count, allowed.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
            expect("Tt "), let hour = number(2), expect(":"), let minute = number(2), expect(":"),
            let second = number(2), (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60,
            second < 61
        else { return nil }
        var milliseconds: Int64 = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale: Int64 = 100
            let start = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                milliseconds += Int64(bytes[index] - UInt8(ascii: "0")) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offsetMinutes: Int64 = 0
        if expect("Zz") {
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60 else {
                return nil
            }
            offsetMinutes = sign * (hours * 60 + minutes)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = daysSince1970(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetMinutes * 60
        self.init(millisecondsSince1970: seconds * 1000 + milliseconds)
    }
}

/// Howard Hinnant's days-from-civil, the inverse of `civilDate`.
private func daysSince1970(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = floorDivide(y, 400)
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
}
