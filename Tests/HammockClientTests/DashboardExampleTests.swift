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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--once", "configs/demo.yaml"]
        process.currentDirectoryURL = root
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let (ended, end) = AsyncStream.makeStream(of: Int32.self)
        process.terminationHandler = { end.yield($0.terminationStatus) }
        try process.run()
        defer { if process.isRunning { process.terminate() } }  // only when the wait below timed out
        let reading = Task.detached { output.fileHandleForReading.readDataToEndOfFile() }

        let status = try await first("the dashboard's exit", of: ended, within: .seconds(60)) { _ in true }
        let text = String(decoding: await reading.value, as: UTF8.self)
        #expect(status == 0, "\(text)")
        #expect(text.hasPrefix("hammock demo · data · "), "\(text)")
        #expect(text.contains("greeting  hello from hammock"), "\(text)")
        #expect(text.contains("status    info: Edit configs/demo-data/status.json"), "\(text)")
        #expect(text.contains("uptime    "), "\(text)")
        // The clock source's content is the time of day: HH:MM:SS.
        #expect(text.contains(/clock     \d\d:\d\d:\d\d/), "\(text)")
    }
}
