import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// `--log-format json` on the real binary: every line hammock and its plugins write on stderr is a JSON
/// object, and a secret shows in none.
@Suite("Log format")
struct LogFormatTests {
    static let secret = "hunter2-s3cret"

    /// Each stderr line as JSON, failing the test on a line that is not an object with time, level, message.
    static func records(_ stderr: String) throws -> [JSONValue] {
        try stderr.split(separator: "\n").map { line in
            let record = try JSONValue(parsing: String(line))
            #expect(record["time"]?.stringValue != nil && record["level"]?.stringValue != nil && record["message"]?.stringValue != nil, "\(line)")
            return record
        }
    }

    @Test("a run with a failing source, a plugin that writes on stderr and a refused reload: JSON lines, no secret")
    func runLogsJSON() async throws {
        let shellPlugin = try HammockProcess.productPath("hammock-plugin-shell")
        // The plugin inherits hammock's environment, TOKEN included, and says it on stderr before it starts.
        let config = """
            sources:
              ok: { kind: shell, command: [echo, "1"], env: { TOKEN: "${secret:TOKEN}" } }
              bad: { kind: shell, command: [sh, -c, "echo \\"no $TOKEN\\" >&2; exit 3"], env: { TOKEN: "${secret:TOKEN}" }, retry: off }
            plugins:
              shell: { command: [sh, -c, "echo \\"plugin starts with $TOKEN\\" >&2; exec \\"$0\\"", \(TestFiles.yamlQuoted(shellPlugin))] }
            """
        let text = try await HammockProcess.withRunning(
            config: config, arguments: ["--log-format", "json", "--log-level", "debug"], environment: ["TOKEN": Self.secret]
        ) { run in
            // Per source: the two answer in either order.
            try await run.next("bad") { $0.event == "error" }
            try await run.next("ok") { $0.event == "newData" }
            try await run.waitForStderr(containing: "plugin starts with")
            // A reload of a file that does not read: its problems are logged as errors.
            try Data("sources: [\n".utf8).write(to: URL(fileURLWithPath: run.configPath))
            run.signal(SIGHUP)
            try await run.waitFor(type: "error")
            run.signal(SIGTERM)
            _ = try await run.waitForExit()
            try await run.waitUntilStderrEnds(timeout: .seconds(5))
            return run.stderrText
        }
        #expect(!text.contains(Self.secret))
        let records = try Self.records(text)
        #expect(records.contains { $0["plugin"] == "shell" && $0["message"] == "plugin starts with [redacted]" }, "\(text)")
        #expect(records.contains { $0["level"] == "error" && ($0["message"]?.stringValue ?? "").contains("config.yaml:") }, "\(text)")
        #expect(records.contains { $0["level"] == "debug" }, "\(text)")
    }

    @Test("hammock check --log-format json: each problem a JSON line with its file, line and column")
    func checkReportsJSON() async throws {
        let run = try await HammockProcess.check(
            config: "sources:\n  a: { kind: fake, refersh: 1s }\n", arguments: ["--log-format", "json"])
        #expect(run.termination == .exited(2))
        let records = try Self.records(run.stderr)
        #expect(records.contains { $0["line"] == 2 && $0["level"] == "error" }, "\(run.stderr)")
    }
}
