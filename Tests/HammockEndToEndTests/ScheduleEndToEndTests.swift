import Foundation
import HammockTestSupport
import Testing

/// `at:` in the real hammock (issue 29): a schedule's time reached on the wall clock, and bad schedules
/// refused where they are written.
@Suite("at: schedules, end to end", .timeLimit(.minutes(2)))
struct ScheduleEndToEndTests {
    /// Once hammock runs, its wall clock is stepped to 15 or 30 s before a minute's end (libfaketime, through
    /// `SteppedWallClock`), so the test does not wait up to a minute, however long start-up took: the engine sees the step
    /// (more than its 5 s threshold), finds the schedule's next time from the new wall clock, and loads at
    /// the whole minute. Broken on purpose (no rescheduling on a jump), the load came a minute late.
    @Test("a source at \"* * * * *\" loads at the next whole minute of the wall clock, also after the clock was stepped")
    func loadsAtTheMinute() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = try SteppedWallClock(in: directory)
        let config = """
            sources:
              minutely: { kind: shell, command: [date, "+%S"], at: "* * * * *" }
            """
        try await HammockProcess.withRunning(config: config, environment: clock.environment, launcher: clock.launcher) { hammock in
            _ = try await hammock.next("minutely") { $0.event == "newData" }
            // A step of 8 to 59 s (more than the engine's 5 s threshold, and never a whole minute, so that a load
            // at the old schedule's minute cannot pass for one at the new) that leaves the wall clock at second
            // 45, or 30, of a minute.
            // Not in a minute's last seconds: the old schedule's load must not come before the engine sees the
            // step (it looks every 2 s).
            var second = Int(Date().timeIntervalSince1970) % 60
            if second >= 54 {
                try await Task.sleep(for: .seconds(61 - second))
                second = Int(Date().timeIntervalSince1970) % 60
            }
            let step = [45, 30].map { ($0 - second + 60) % 60 }.first { (8...59).contains($0) } ?? 30
            let before = hammock.lineCount
            try clock.set("+\(step)s")
            // The next load is in the first seconds of a minute by the stepped wall clock (the command prints its
            // second), not at the minute the old wall clock would have reached.
            try await hammock.waitUntil("a load after the step", timeout: .seconds(45)) { lines in
                lines[before...].contains { $0.id == "minutely" && $0.event == "newData" }
            }
            let scheduled = try #require(hammock.lines[before...].first { $0.id == "minutely" && $0.event == "newData" })
            let printed = try #require((scheduled.content?.stringValue).flatMap { Int($0) }, "\(scheduled.json)")
            #expect(printed <= 3, "the first load after the step ran at second \(printed) of its minute")
        }
    }

    @Test("at: with refresh, a schedule that never comes, or one that is not cron's: FILE:LINE:COLUMN, exit 2")
    func badSchedules() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            sources:
              both: { kind: fake, content: 1, refresh: 5s, at: "@hourly" }
              never: { kind: fake, content: 1, at: "0 0 31 2 *" }
              wrong: { kind: fake, content: 1, at: "61 * * * *" }
              short: { kind: fake, content: 1, at: "* * *" }
            """, in: directory)
        let check = try await HammockProcess.execute(["check", path])
        #expect(check.termination == .exited(2), "\(check.stderr)")
        let expected = [
            "\(path):2:52: refresh and at are both here; a source polls every refresh or at the times of at, not both",
            #"\#(path):3:40: at: "0 0 31 2 *" never matches a day of the calendar (no such date); the source would never load"#,
            "\(path):4:40: at: minute 61 is out of 0-59",
            #"\#(path):5:40: at: "* * *" has 3 fields; a schedule has five"#,
        ]
        for line in expected {
            #expect(check.stderr.contains(line), "missing \(line) in:\n\(check.stderr)")
        }
    }
}
