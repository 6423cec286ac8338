/// `at:`, a source's schedule in cron's five fields (`minute hour day-of-month month day-of-week`) or one of
/// its names (`@hourly`, `@daily`, …), in the local time zone: an alternative to `refresh:` for data that
/// changes at known times (docs/configuration.md, "Schedules").
///
/// Pure: the local time comes from a `LocalCalendar` passed in, so the core tests it with a zone of its
/// own, and the engine gives it the system's (`SystemCalendar` in HammockSystem).
public struct Schedule: Sendable, Hashable, CustomStringConvertible {
    /// The minutes, hours, days of the month, months (1-12) and weekdays (0 Sunday … 6 Saturday) that match.
    let minutes: Set<Int>
    let hours: Set<Int>
    let daysOfMonth: Set<Int>
    let months: Set<Int>
    let weekdays: Set<Int>
    /// Whether day-of-month and day-of-week were each written as `*`: when both are restricted, a day
    /// matches either (cron's rule); when one is `*`, the other alone decides.
    let anyDayOfMonth: Bool
    let anyWeekday: Bool
    /// As written.
    public let description: String

    static let names = [
        "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
        "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
    ]

    /// A schedule as written, or why it is not one.
    public init(_ text: String) throws(ScheduleProblem) {
        let trimmed = text.trimmingWhitespace()
        let expanded = Self.names[trimmed.lowercased()] ?? trimmed
        if trimmed.hasPrefix("@") && Self.names[trimmed.lowercased()] == nil {
            throw ScheduleProblem("\"\(trimmed)\" is not a schedule's name; use @yearly, @monthly, @weekly, @daily or @hourly, or five fields")
        }
        let fields = expanded.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard fields.count == 5 else {
            throw ScheduleProblem(
                "\"\(trimmed)\" has \(fields.count) field\(fields.count == 1 ? "" : "s"); a schedule has five: minute hour day-of-month month day-of-week (e.g. \"*/15 * * * *\"), or a name such as @hourly")
        }
        minutes = try Self.field(fields[0], "minute", 0...59)
        hours = try Self.field(fields[1], "hour", 0...23)
        daysOfMonth = try Self.field(fields[2], "day of the month", 1...31)
        months = try Self.field(fields[3], "month", 1...12, names: Self.monthNames, firstName: 1)
        // 7 is Sunday too.
        weekdays = Set(try Self.field(fields[4], "day of the week", 0...7, names: Self.weekdayNames, firstName: 0).map { $0 % 7 })
        anyDayOfMonth = fields[2] == "*"
        anyWeekday = fields[4] == "*"
        description = trimmed
    }

    static let monthNames = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    static let weekdayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

    /// One field: `*`, `N`, `A-B`, each with an optional `/STEP`, in a comma-separated list; names (`jan`,
    /// `mon`) where the field has them.
    private static func field(
        _ text: String, _ name: String, _ range: ClosedRange<Int>, names: [String] = [], firstName: Int = 0
    ) throws(ScheduleProblem) -> Set<Int> {
        func value(_ part: Substring) throws(ScheduleProblem) -> Int {
            if let number = Int(part) {
                guard range.contains(number) else {
                    throw ScheduleProblem("\(name) \(number) is out of \(range.lowerBound)-\(range.upperBound)")
                }
                return number
            }
            if let index = names.firstIndex(of: part.lowercased()) { return index + firstName }
            throw ScheduleProblem("\"\(part)\" is not a \(name) (\(range.lowerBound)-\(range.upperBound)\(names.isEmpty ? "" : ", or \(names.first!)…\(names.last!)"))")
        }
        var values: Set<Int> = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = item.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            var step = 1
            if pieces.count == 2 {
                guard let number = Int(pieces[1]), number > 0 else {
                    throw ScheduleProblem("\"\(item)\": the step after / must be a whole number of 1 or more")
                }
                step = min(number, range.count)
            }
            let span: ClosedRange<Int>
            if pieces[0] == "*" {
                span = range
            } else if let dash = pieces[0].firstIndex(of: "-") {
                let low = try value(pieces[0][..<dash])
                let high = try value(pieces[0][pieces[0].index(after: dash)...])
                guard low <= high else { throw ScheduleProblem("\"\(item)\": a range runs from low to high (\(high)-\(low)?)") }
                span = low...high
            } else {
                guard !pieces[0].isEmpty else { throw ScheduleProblem("\"\(text)\" has an empty \(name)") }
                let single = try value(pieces[0])
                span = single...(pieces.count == 2 ? range.upperBound : single)
            }
            values.formUnion(stride(from: span.lowerBound, through: span.upperBound, by: step))
        }
        return values
    }

    func matchesDay(_ day: CivilDate) -> Bool {
        guard months.contains(day.month) else { return false }
        let byDate = daysOfMonth.contains(day.day)
        let byWeekday = weekdays.contains(day.weekday)
        switch (anyDayOfMonth, anyWeekday) {
        case (true, true): return true
        case (false, true): return byDate
        case (true, false): return byWeekday
        case (false, false): return byDate || byWeekday
        }
    }

    /// How far ahead `next` looks: eight years hold every Feb 29 a schedule can ask for.
    static let horizonDays = 8 * 366

    /// The first time after `time` that the schedule matches, in `calendar`'s local time; nil when it never
    /// does (`0 0 31 2 *`). A local time the clock skips (a change to summer time) comes when the clock
    /// passes it; one the clock repeats comes once.
    public func next(after time: Timestamp, in calendar: any LocalCalendar) -> Timestamp? {
        // From the next whole minute, local.
        let start = calendar.fields(of: Timestamp(millisecondsSince1970: (time.millisecondsSince1970 / 60_000 + 1) * 60_000))
        let sortedHours = hours.sorted()
        let sortedMinutes = minutes.sorted()
        let firstDay = CivilDate(year: start.year, month: start.month, day: start.day)
        for offset in 0..<Self.horizonDays {
            let day = firstDay.adding(days: offset)
            guard matchesDay(day) else { continue }
            for hour in sortedHours where offset > 0 || hour >= start.hour {
                for minute in sortedMinutes where offset > 0 || hour > start.hour || minute >= start.minute {
                    let local = LocalFields(year: day.year, month: day.month, day: day.day, hour: hour, minute: minute)
                    let when = calendar.timestamp(of: local)
                    if when > time { return when }
                }
            }
        }
        return nil
    }

    /// Whether the schedule ever matches (checked where it is written).
    public var everMatches: Bool {
        next(after: Timestamp(millisecondsSince1970: 1_767_225_600_000), in: UTCCalendar()) != nil  // from 2026-01-01
    }
}

public struct ScheduleProblem: Error, Sendable, Equatable {
    public let message: String
    init(_ message: String) { self.message = message }
}

/// A local date and time to the minute.
public struct LocalFields: Sendable, Hashable {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int

    public init(year: Int, month: Int, day: Int, hour: Int, minute: Int) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
    }
}

/// Local time: what the clock on the wall says at an instant, and the instant a wall time names.
public protocol LocalCalendar: Sendable {
    func fields(of time: Timestamp) -> LocalFields
    /// The instant `fields` name: the first of two when the clock repeats them, and the end of the gap when
    /// it skips them.
    func timestamp(of fields: LocalFields) -> Timestamp
}

/// Coordinated Universal Time, or a fixed offset from it (no summer time).
public struct UTCCalendar: LocalCalendar {
    public let offsetMinutes: Int

    public init(offsetMinutes: Int = 0) {
        self.offsetMinutes = offsetMinutes
    }

    public func fields(of time: Timestamp) -> LocalFields {
        let minutes = Self.floorDivide(time.millisecondsSince1970, 60_000) + Int64(offsetMinutes)
        let days = Self.floorDivide(minutes, 1440)
        let date = CivilDate(daysSince1970: Int(days))
        let minuteOfDay = Int(minutes - days * 1440)
        return LocalFields(year: date.year, month: date.month, day: date.day, hour: minuteOfDay / 60, minute: minuteOfDay % 60)
    }

    public func timestamp(of fields: LocalFields) -> Timestamp {
        let days = Int64(CivilDate(year: fields.year, month: fields.month, day: fields.day).daysSince1970)
        let minutes = days * 1440 + Int64(fields.hour * 60 + fields.minute) - Int64(offsetMinutes)
        return Timestamp(millisecondsSince1970: minutes * 60_000)
    }

    static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }
}

/// A day of the proleptic Gregorian calendar (Howard Hinnant's `days_from_civil`).
struct CivilDate: Sendable, Hashable {
    let year: Int
    let month: Int
    let day: Int

    init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    init(daysSince1970 days: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    var daysSince1970: Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// 0 Sunday … 6 Saturday (1970-01-01 was a Thursday).
    var weekday: Int {
        let days = daysSince1970
        return ((days % 7) + 11) % 7
    }

    func adding(days: Int) -> CivilDate {
        CivilDate(daysSince1970: daysSince1970 + days)
    }
}
