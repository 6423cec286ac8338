import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// How `hammock run` ends: signals, a consumer that goes away, and `--once`.
@Suite("Ending a run")
struct LifecycleTests {
    static let busyConfig = """
        version: 1
        sources:
          tick: { kind: fake, content: { t: 1 }, refresh: 100ms }
          still: { kind: fake, content: 2, delay: 20ms }
        views:
          all: { sources: [tick, still] }
        """

    @Test(
        "SIGTERM and SIGINT end the run with bye and exit status 0",
        arguments: [(SIGTERM, "signal"), (SIGINT, "interrupt")])
    func signals(signal: Int32, reason: String) async throws {
        try await HammockProcess.withRunning(config: Self.busyConfig) { hammock in
            try await hammock.waitFor(type: "view", id: "all") { $0.status == "data" }
            hammock.signal(signal)
            let bye = try await hammock.waitFor(type: "bye")
            #expect(bye["reason"]?.stringValue == reason)
            #expect(try await hammock.waitForExit() == .exited(0))
            // Every line written is read before the last is looked at.
            try await hammock.waitUntilStdoutEnds()
            #expect(hammock.lines.last?.type == "bye", "nothing is written after bye")
        }
    }

    @Test("a closed stdout ends the run while sources refresh")
    func closedStdoutWhileBusy() async throws {
        try await HammockProcess.withRunning(config: Self.busyConfig) { hammock in
            try await hammock.waitFor(type: "view", id: "all") { $0.status == "data" }
            await hammock.closeStdout()
            let termination = try await hammock.waitForExit(timeout: .seconds(5))
            // A closed stdout is a reason to stop, like a signal: the engine must end by itself (shutting
            // its plugins down), not be killed by SIGPIPE.
            #expect(termination == .exited(0), "\(termination); stderr: \(hammock.stderrText)")
        }
    }

    @Test("a closed stdout ends the run even when nothing changes")
    func closedStdoutWhileIdle() async throws {
        let config = """
            version: 1
            sources:
              once: { kind: fake, content: 1, delay: 20ms }
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitFor(type: "source", id: "once") { $0.event == "newData" }
            await hammock.closeStdout()
            let termination = try await hammock.waitForExit(timeout: .seconds(5))
            #expect(termination == .exited(0), "\(termination)")
        }
    }

    @Test("--once exits 1 when a source fails, and bye lists it in failed")
    func onceFailure() async throws {
        let config = """
            version: 1
            sources:
              fine: { kind: fake, content: 1, delay: 20ms }
              broken: { kind: fake, state: error, error: { message: gone, httpStatus: 410 }, delay: 50ms }
            """
        try await HammockProcess.withRunning(config: config, arguments: ["--once"]) { hammock in
            #expect(try await hammock.waitForExit() == .exited(1))
            try await hammock.waitUntilStdoutEnds()
            let bye = try await hammock.waitFor(type: "bye")
            #expect(bye["reason"] == "once", "every source answered before the deadline: \(bye)")
            #expect(bye["failed"] == ["broken"])
            #expect(hammock.lines.last?.type == "bye", "nothing is written after bye")
            let error = try #require(hammock.lines.last { $0.id == "broken" })
            #expect(error.state?["latestError"]?["httpStatus"] == 410)
            // One failed load, no retry. (Its `requested` line may be replaced by the error in the stdout
            // queue on a loaded machine, so the count of failures is what tells.)
            #expect(error.state?["failures"] == 1, "no retry with --once")
            #expect(hammock.lines.filter { $0.id == "broken" && $0.event == "requested" }.count <= 1)
        }
    }
}
