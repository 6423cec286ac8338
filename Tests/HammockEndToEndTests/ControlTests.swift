import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// Control lines on stdin, against a real process: what needs its stdin. The control lines themselves are
/// tested in memory (`HammockEngineTests/EngineControlTests`).
@Suite("Control lines")
struct ControlTests {
    @Test("closing stdin does not stop the engine")
    func closingStdin() async throws {
        let config = """
            version: 1
            sources:
              tick: { kind: fake, content: 1, refresh: 150ms }
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }
            hammock.closeStdin()
            try await Task.sleep(for: .milliseconds(300))
            hammock.skipLinesReadSoFar()
            // Still polling, well after stdin ended.
            for _ in 0..<3 {
                try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }
            }
            #expect(hammock.isRunning)
            #expect(!hammock.lines.contains { $0.type == "bye" })
            hammock.signal(SIGTERM)
            try await hammock.waitFor(type: "bye")
            #expect(try await hammock.waitForExit() == .exited(0))
        }
    }
}
