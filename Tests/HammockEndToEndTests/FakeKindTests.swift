import Foundation
import HammockTestSupport
import Testing

/// The built-in `fake` kind is a plugin like the others, run inside hammock: its options are checked by it
/// when `check` and `run` ask every plugin, and reported at their line and column with the engine's own.
@Suite("Fake kind")
struct FakeKindTests {
    @Test("check and run report a fake source's bad options at their line and column, quoting no secret")
    func badOptionsAtTheirPlace() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            sources:
              a:
                kind: fake
                state: broken
                delay: 5
                colour: red
              b: { kind: fake, content: 1, refresh: 5 }
              c: { kind: fake, state: "${secret:TOKEN}" }
              d: { kind: fake, error: [1] }
            """, in: directory)
        let expected = [
            #"\#(path):4:5: source "a": state must be one of data, loading, error"#,
            #"\#(path):5:5: source "a": "5" has no unit; write 5s, 5ms, 5m or 5h"#,
            #"\#(path):6:5: source "a": unknown key "colour" in a fake source; expected one of: content, state, error, delay, kind, refresh, at, expiration, retry, timeout, select, cache, keep, respect-server, limit"#,
            #"\#(path):7:41: refresh: "5" has no unit; write 5s, 5ms, 5m or 5h"#,
            #"\#(path):8:20: source "c": state must be one of data, loading, error"#,
            #"\#(path):9:20: source "d": error must be a message or a mapping {message, httpStatus, exitStatus, code}, found an array"#,
            "\(path): 6 errors",
        ]
        for command in [["check", path], ["run", "--once", path]] {
            let run = try await HammockProcess.execute(command, environment: ["TOKEN": "tok-SECRET-1"])
            #expect(run.termination == .exited(2), "\(command[0]): \(run.stderr)")
            #expect(run.stderr.split(separator: "\n").map(String.init) == expected, "\(command[0]): \(run.stderr)")
            #expect(!run.stderr.contains("tok-SECRET") && !run.stdout.contains("tok-SECRET"))
        }
    }
}
