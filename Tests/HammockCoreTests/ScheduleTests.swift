import HammockCore
import Testing

/// `at:` schedules (issue 29): cron's fields, the next time in local time, summer time, and the core's polls.
@Suite struct ScheduleTests {
    static let utc = UTCCalendar()

    /// `2027-03-28 10:15` UTC as a timestamp.
    static func time(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, in calendar: any LocalCalendar = utc) -> Timestamp {
        calendar.timestamp(of: LocalFields(year: year, month: month, day: day, hour: hour, minute: minute))
    }

    static func next(_ text: String, after time: Timestamp, in calendar: any LocalCalendar = utc) throws -> LocalFields? {
        try Schedule(text).next(after: time, in: calendar).map { calendar.fields(of: $0) }
    }

    @Test func fieldsListsRangesStepsAndNames() throws {
        let start = Self.time(2027, 1, 15, 10, 7)  // a Friday
        #expect(try Self.next("*/15 * * * *", after: start) == LocalFields(year: 2027, month: 1, day: 15, hour: 10, minute: 15))
        #expect(try Self.next("0 7 * * mon-fri", after: start) == LocalFields(year: 2027, month: 1, day: 18, hour: 7, minute: 0))
        #expect(try Self.next("30 9,17 * * *", after: start) == LocalFields(year: 2027, month: 1, day: 15, hour: 17, minute: 30))
        #expect(try Self.next("0 0 1 jan,jul *", after: start) == LocalFields(year: 2027, month: 7, day: 1, hour: 0, minute: 0))
        #expect(try Self.next("5/20 * * * *", after: start) == LocalFields(year: 2027, month: 1, day: 15, hour: 10, minute: 25))
        #expect(try Self.next("@hourly", after: start) == LocalFields(year: 2027, month: 1, day: 15, hour: 11, minute: 0))
        #expect(try Self.next("@daily", after: start) == LocalFields(year: 2027, month: 1, day: 16, hour: 0, minute: 0))
        #expect(try Self.next("@weekly", after: start) == LocalFields(year: 2027, month: 1, day: 17, hour: 0, minute: 0))
        // Sunday is 0 and 7.
        #expect(try Self.next("0 0 * * 7", after: start) == Self.next("0 0 * * sun", after: start))
        // Strictly after: a time that matches now is the next one.
        #expect(try Self.next("7 10 * * *", after: start) == LocalFields(year: 2027, month: 1, day: 16, hour: 10, minute: 7))
    }

    @Test func dayOfMonthAndWeekdayBothRestrictedMatchEither() throws {
        // The 13th, or any Friday: cron's rule.
        let start = Self.time(2027, 1, 1, 12, 0)  // a Friday
        #expect(try Self.next("0 0 13 * fri", after: start) == LocalFields(year: 2027, month: 1, day: 8, hour: 0, minute: 0))
    }

    @Test func aLeapDayAndADayThatNeverComes() throws {
        #expect(try Self.next("0 0 29 2 *", after: Self.time(2027, 3, 1, 0, 0)) == LocalFields(year: 2028, month: 2, day: 29, hour: 0, minute: 0))
        #expect(try Schedule("0 0 31 2 *").everMatches == false)
        #expect(try Schedule("0 0 30 2 *").next(after: Self.time(2027, 1, 1, 0, 0), in: Self.utc) == nil)
        #expect(try Schedule("0 0 29 2 *").everMatches)
    }

    @Test(arguments: [
        ("61 * * * *", "minute 61 is out of 0-59"),
        ("* 24 * * *", "hour 24 is out of 0-23"),
        ("* * 0 * *", "day of the month 0 is out of 1-31"),
        ("* * * 13 *", "month 13 is out of 1-12"),
        ("* * * * 8", "day of the week 8 is out of 0-7"),
        ("* * * * funday", "\"funday\" is not a day of the week"),
        ("*/0 * * * *", "the step after / must be a whole number of 1 or more"),
        ("5-1 * * * *", "a range runs from low to high"),
        ("* * * *", "has 4 fields; a schedule has five"),
        ("@fortnightly", "is not a schedule's name"),
        ("", "has 0 fields"),
        ("1,,2 * * * *", "has an empty minute"),
    ])
    func badSchedulesSayWhatIsWrong(_ text: String, _ message: String) {
        #expect(throws: ScheduleProblem.self) { try Schedule(text) }
        do {
            _ = try Schedule(text)
        } catch {
            #expect(error.message.contains(message), "\(error.message)")
        }
    }

    /// A zone with summer time: UTC+1, and UTC+2 from 2027-03-28 01:00 UTC to 2027-10-31 01:00 UTC (as
    /// Central Europe), so that 02:00-03:00 local is skipped in March and 02:00-03:00 repeats in October.
    struct SummerTime: LocalCalendar {
        static let springForward = ScheduleTests.time(2027, 3, 28, 1, 0)
        static let fallBack = ScheduleTests.time(2027, 10, 31, 1, 0)

        func offset(at time: Timestamp) -> Int { time >= Self.springForward && time < Self.fallBack ? 120 : 60 }

        func fields(of time: Timestamp) -> LocalFields { UTCCalendar(offsetMinutes: offset(at: time)).fields(of: time) }

        func timestamp(of fields: LocalFields) -> Timestamp {
            let standard = UTCCalendar(offsetMinutes: 60).timestamp(of: fields)
            let summer = UTCCalendar(offsetMinutes: 120).timestamp(of: fields)
            switch (offset(at: summer) == 120, offset(at: standard) == 60) {
            case (true, true): return summer  // repeated: the first of the two
            case (true, false): return summer
            case (false, true): return standard
            case (false, false): return Self.springForward  // skipped: the end of the gap
            }
        }
    }

    /// Broken on purpose (local fields taken as UTC), the 07:00 run came at 08:00 or 09:00 local.
    @Test func localTimeAcrossSummerTimeChanges() throws {
        let zone = SummerTime()
        // 07:00 local every day, either side of the change: 06:00 UTC in winter, 05:00 UTC in summer.
        let march27 = try #require(try Schedule("0 7 * * *").next(after: Self.time(2027, 3, 27, 0, 0), in: zone))
        #expect(march27 == Self.time(2027, 3, 27, 6, 0))
        let march28 = try #require(try Schedule("0 7 * * *").next(after: march27, in: zone))
        #expect(march28 == Self.time(2027, 3, 28, 5, 0))
        // 02:30 does not exist on 28 March: it comes when the clock has jumped, at 03:00 local.
        let skipped = try #require(try Schedule("30 2 * * *").next(after: Self.time(2027, 3, 28, 0, 0), in: zone))
        #expect(skipped == SummerTime.springForward)
        // 02:30 happens twice on 31 October: once.
        let first = try #require(try Schedule("30 2 * * *").next(after: Self.time(2027, 10, 30, 12, 0), in: zone))
        let after = try #require(try Schedule("30 2 * * *").next(after: first, in: zone))
        #expect(zone.fields(of: after).day == 1 && zone.fields(of: after).month == 11, "\(zone.fields(of: after))")
    }

    /// Broken on purpose (`scheduledInstant` not used in `scheduleNextAttempt`), the source never polled again.
    @Test func theCorePollsAtTheScheduledTimes() throws {
        var definition = fakeSource("a")
        definition.schedule = try Schedule("*/5 * * * *")
        var engine = EngineCore(configuration: Configuration(sources: [definition]), mode: .continuous)
        // t0 is 2026-11-22T10:00:00Z (Support.swift): the next */5 after 10:00:01 is 10:05.
        _ = engine.start(now: at(0))
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.nextDeadline == at(300))
        #expect(engine.tick(now: at(299)).isEmpty)
        #expect(engine.tick(now: at(300)).loads.count == 1)
        _ = engine.loadFinished(source: "a", loadID: 2, outcome: .newData(2), now: at(302))
        #expect(engine.nextDeadline == at(600))
        // The wall clock stepped an hour and a minute ahead (11:06:03): the next time is found again from the
        // new wall time, 11:10, 237 s on.
        let stepped = EngineTime(instant: at(303), wall: at(303 + 3660))
        _ = engine.clockJumped(now: stepped)
        #expect(engine.nextDeadline == at(540))
        #expect(engine.tick(now: at(540)).loads.count == 1)
    }
}
