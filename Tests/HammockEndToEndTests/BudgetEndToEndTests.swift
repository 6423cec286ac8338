import Foundation
import HammockTestSupport
import Testing

/// Shared budgets in the real hammock (issue 29): `limits:` and `limit:` hold the commands that really run.
@Suite("shared budgets, end to end", .timeLimit(.minutes(2)))
struct BudgetEndToEndTests {
    /// Each command appends a line to a file; the lines are counted once hammock has stopped. The budget
    /// lets at most 2 loads start in any second, so from before the launch to after the stop (`elapsed`),
    /// at most 2 × ⌈elapsed⌉ commands can have run, however slow the machine: a correctness bound, not a
    /// timing one. Without the budget the three would run about 30 a second. Broken on purpose (the budget
    /// admitting one start more than its number), the count went over the bound.
    @Test("three shell sources polled every 100 ms on {requests: 2, per: 1s} run at most 2 commands a second together")
    func threeSourcesShareOneBudget() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let runs = directory + "/runs.txt"
        let sources = ["a", "b", "c"].map { id in
            "  \(id): { base: counted, script: \(TestFiles.yamlQuoted("echo \(id) >> '\(runs)'; echo 1")) }"
        }
        let config = """
            limits:
              shared: { requests: 2, per: 1s }
            bases:
              counted: { kind: shell, refresh: 100ms, limit: shared }
            sources:
            \(sources.joined(separator: "\n"))
            """
        let elapsed = try await RunSlots.withSlot {
            let started = ContinuousClock.now
            let hammock = try HammockProcess.launch(config: config)
            do {
                try await hammock.waitUntil("each source loaded", timeout: .seconds(30)) { lines in
                    ["a", "b", "c"].allSatisfy { id in lines.contains { $0.id == id && $0.event == "newData" } }
                }
                try await Task.sleep(for: .seconds(3))
            } catch {
                await hammock.stop()
                throw error
            }
            await hammock.stop()
            return ContinuousClock.now - started
        }
        let lines = try String(contentsOfFile: runs, encoding: .utf8).split(separator: "\n")
        let seconds = Int((Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18).rounded(.up))
        #expect(lines.count <= 2 * seconds, "\(lines.count) commands ran in \(elapsed), more than 2 a second")
        for id in ["a", "b", "c"] { #expect(lines.contains(Substring(id)), "\(id) never ran: \(lines)") }
    }

    @Test("an unknown budget, a bad requests and a bad per: FILE:LINE:COLUMN, exit 2")
    func badBudgets() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            limits:
              github: { requests: 0, per: 1h }
              daily: { requests: 10, per: 2d }
            sources:
              a: { kind: fake, content: 1, limit: githbu }
            """, in: directory)
        let check = try await HammockProcess.execute(["check", path])
        #expect(check.termination == .exited(2), "\(check.stderr)")
        let expected = [
            "\(path):2:23: limits.github.requests must be a whole number from 1 to 1000000, found 0",
            #"\#(path):3:31: limits.daily.per: "2d" is not a duration; write e.g. 250ms, 5s, 2m, 1h or 1m30s"#,
            #"\#(path):5:39: limit: unknown budget "githbu" (did you mean "github"?); limits: declares daily, github"#,
        ]
        for line in expected {
            #expect(check.stderr.contains(line), "missing \(line) in:\n\(check.stderr)")
        }
    }
}
