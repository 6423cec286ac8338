import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// The handshake and a plugin's last line, against the real engine and a real plugin process (the fixture's
/// `no-hello`, `wrong-kind` and `half-line` modes): the source gets the error docs/plugin-protocol.md
/// promises ("a handshake not answered within 5 s", a plugin that does not serve the kind, a line that is not
/// protocol), within the deadline, and the engine goes on (another plugin's source keeps updating).
@Suite("Handshake and half lines, end to end")
struct HandshakeTests {
    static func config(mode: String) -> String {
        SupervisionTests.misbehavingConfig(
            mode: mode,
            sources: """
                  t: { kind: test, retry: off }
                  tick: { kind: fake, content: 1, refresh: 200ms }
                """)
    }

    /// Waits for `t`'s first error; checks its code and message and that `tick` updates after it. Returns the
    /// error and how long after the launch it came.
    func firstError(
        of hammock: HammockProcess, within timeout: Duration, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (error: HammockLine, after: Duration) {
        let error = try await hammock.waitFor(type: "source", id: "t", timeout: timeout, sourceLocation: sourceLocation) {
            $0.event == "error"
        }
        let after = error.receivedAt - hammock.launchedAt
        #expect(error.errorCode == "pluginFailed", "\(error)", sourceLocation: sourceLocation)
        let mark = hammock.lineCount
        try await hammock.waitUntil("tick updates after t's error", sourceLocation: sourceLocation) { lines in
            lines[mark...].contains { $0.id == "tick" && $0.event == "newData" }
        }
        #expect(hammock.isRunning, sourceLocation: sourceLocation)
        return (error, after)
    }

    @Test("a plugin that never answers hello: its source fails 5 s after the start, saying so; hammock goes on")
    func noHello() async throws {
        try await HammockProcess.withRunning(config: Self.config(mode: "no-hello")) { hammock in
            let (error, after) = try await firstError(of: hammock, within: .seconds(15))
            print("no-hello: t failed \(after) after the launch: \(error.errorMessage)")
            #expect(error.errorMessage == "the test plugin did not answer hello within 5s", "\(error)")
            // The handshake's deadline is 5 s: not before, and not much after (a margin for a loaded machine).
            #expect(after >= .seconds(5) && after < .seconds(9), "\(after)")
        }
    }

    @Test("a plugin that says it serves another kind: its source fails at once, naming both kinds; hammock goes on")
    func wrongKind() async throws {
        try await HammockProcess.withRunning(config: Self.config(mode: "wrong-kind")) { hammock in
            let (error, after) = try await firstError(of: hammock, within: .seconds(10))
            print("wrong-kind: t failed \(after) after the launch: \(error.errorMessage)")
            #expect(error.errorMessage.hasPrefix(#"the test plugin does not serve kind "test" (it serves other)"#), "\(error)")
            // At once, not at the handshake's 5 s deadline.
            #expect(after < .seconds(4), "\(after)")
        }
    }

    @Test("a plugin that writes half a line and exits: the load fails saying what it wrote, the content stays; hammock goes on")
    func halfLine() async throws {
        let config = SupervisionTests.misbehavingConfig(
            mode: "half-line 1",
            sources: """
                  t: { kind: test, refresh: 300ms, retry: off }
                  tick: { kind: fake, content: 1, refresh: 200ms }
                """)
        try await HammockProcess.withRunning(config: config) { hammock in
            let first = try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" }
            let (error, _) = try await firstError(of: hammock, within: .seconds(10))
            print("half-line: \(error.errorMessage)")
            #expect(error.content == first.content, "the error keeps the content: \(error)")
            // What it wrote is quoted, cut where it was cut.
            #expect(error.errorMessage.hasPrefix("the test plugin wrote a line that is not protocol"), "\(error)")
            #expect(error.errorMessage.hasSuffix(#"{"type": "newData", "#), "\(error)")
            try await hammock.waitForStderr(containing: "writing half a line and exiting, as asked")
        }
    }
}
