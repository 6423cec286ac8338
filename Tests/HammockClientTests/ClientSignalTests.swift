import Foundation
import HammockClient
import HammockTestSupport
import Testing

/// What a broken pipe does to an app that uses the client, seen in a process of its own
/// (`hammock-client-probe`): in this test runner SwiftNIO ignores SIGPIPE for the whole process as soon as a
/// suite makes a socket, and a write that let the signal through would then go unseen.
@Suite("The client and SIGPIPE, in an app of its own")
struct ClientSignalTests {
    @Test("writing to an engine whose stdin nobody reads throws, and the app (SIGPIPE at its default) lives on")
    func probeSurvivesBrokenPipes() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let probe = try HammockProcess.launch(
            program: try HammockProcess.productPath("hammock-client-probe"), arguments: [folder])
        defer { Task { await probe.stop() } }
        let termination = try await probe.waitForExit(timeout: .seconds(30))
        try await probe.waitUntilStdoutEnds(timeout: .seconds(5))
        let lines = probe.stdoutLines
        #expect(termination == .exited(0), "the probe ended with \(termination); it said: \(lines)")
        #expect(lines.contains { $0.hasPrefix("attached: threw ") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("launched: threw ") }, "\(lines)")
        #expect(lines.contains("disposition after attached: default"), "\(lines)")
        #expect(lines.contains("disposition after launched: default"), "\(lines)")
    }

    @Test("waitUntilEnded(timeout:) gives up on an engine that runs on, and returns at once once it ended")
    func waitUntilEndedHasADeadline() async throws {
        let engine = try FakeEngine()
        let hammock = try Hammock(attachingTo: engine.clientInput, output: engine.clientOutput)
        let started = ContinuousClock.now
        let outcome = try await withDeadline(.seconds(20), "waitUntilEnded(timeout: 300 ms)") {
            do {
                _ = try await hammock.waitUntilEnded(timeout: .milliseconds(300))
                return "returned"
            } catch HammockError.timedOut {
                return "timed out"
            } catch {
                return "threw \(error)"
            }
        }
        #expect(outcome == "timed out")
        #expect(ContinuousClock.now - started >= .milliseconds(300))
        engine.closeStdout()
        let end = try await withDeadline(.seconds(20), "waitUntilEnded after the end") {
            [try await hammock.waitUntilEnded(timeout: .seconds(10))]
        }
        #expect(end == [.engineExited(status: .unknown, stderrTail: "")])
    }
}
