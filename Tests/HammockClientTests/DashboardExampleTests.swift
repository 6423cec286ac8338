import Foundation
import HammockTestSupport
import Testing

/// Examples/Dashboard runs: it launches configs/demo.yaml through the library, prints its first full screen
/// with `--once`, stops the engine and exits 0.
@Suite struct DashboardExample {
    @Test func printsTheFirstFullScreenAndExits() async throws {
        try await RunSlots.withSlot { try await runOnce() }
    }

    private func runOnce() async throws {
        let executable = try HammockProcess.productPath("hammock-dashboard")
        // The demo's paths are relative to the project's root.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        // Under `BoundedRun`, which reads the output on threads of its own and waits for the exit without
        // blocking: a read of the pipe to its end in a task held one of the cooperative pool's two threads for
        // the dashboard's whole run. Killed, and the test failed, after 60 s.
        let run = try await BoundedRun.run(executable, ["--once", "configs/demo.yaml"], directory: root.path, timeout: .seconds(60))
        let text = run.stdout
        #expect(run.termination == .exited(0), "\(text)")
        #expect(text.hasPrefix("hammock demo · data · "), "\(text)")
        #expect(text.contains("greeting  hello from hammock"), "\(text)")
        #expect(text.contains("status    info: Edit configs/demo-data/status.json"), "\(text)")
        #expect(text.contains("uptime    "), "\(text)")
        // The clock source's content is the time of day: HH:MM:SS.
        #expect(text.contains(/clock     \d\d:\d\d:\d\d/), "\(text)")
    }
}
