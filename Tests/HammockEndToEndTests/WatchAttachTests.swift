import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// `hammock watch --attach` on a pseudo-terminal, over a real `hammock serve` (issue 27): the screen shows
/// the shared engine's state, its keys act for every client, and `q` ends the screen, not the engine.
@Suite("hammock watch --attach")
struct WatchAttachTests {
    static let config = """
        version: 1
        sources:
          koala: { kind: fake, content: "KOALA 7" }
        views:
          bush: { sources: [koala], render: { text: "bush says {{ koala }}" } }
        """

    /// `hammock watch --attach ARGUMENTS... CONFIG` on `terminal`; its stderr goes to `stderrPath`.
    func launch(_ fixture: SharedFixture, on terminal: WatchTerminalTests.Terminal, arguments: [String] = []) throws -> (Process, String) {
        let stderrPath = fixture.directory + "/watch-\(UUID().uuidString).stderr"
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try HammockProcess.executablePath())
        process.arguments = ["watch", "--attach", "--idle-exit", "1s"] + arguments + [fixture.configPath]
        process.environment = HammockProcess.environment(
            fixture.environment.merging(["NO_COLOR": "1", "TERM": "xterm"]) { _, new in new }, home: fixture.directory)
        let device = FileHandle(fileDescriptor: terminal.device, closeOnDealloc: false)
        process.standardInput = device
        process.standardOutput = device
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        try process.run()
        return (process, stderrPath)
    }

    func waitForExit(_ process: Process) async throws { try await WatchTerminalTests.waitForExit(process) }

    @Test("the screen shows the shared engine's state; a ctl override shows on it; l loads for every client; q ends the screen, not the engine")
    func showsTheSharedEngine() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let attach = try fixture.attach()
            defer { Task { await attach.stop() } }
            try await attach.waitFor(type: "source", id: "koala") { $0.event == "newData" }
            let engines = fixture.serves.map(\.pid)
            #expect(engines.count == 1)

            let terminal = try WatchTerminalTests.Terminal()
            let (watch, stderrPath) = try launch(fixture, on: terminal)
            try await terminal.waitFor("the source's row and the view's") { $0.contains("● koala") && $0.contains("bush says KOALA 7") }
            #expect(fixture.serves.map(\.pid) == engines, "watch --attach started no engine of its own")

            // State set by another client shows on the screen: one engine, one state.
            let override = try await fixture.run(["ctl", fixture.configPath, #"{"op":"override","source":"koala","content":"WOMBAT 9"}"#])
            #expect(override.termination == .exited(0), "\(override.stderr)")
            try await terminal.waitFor("the override") { $0.contains("bush says WOMBAT 9") }

            // `l` on the selected row (the first: koala) is a load every client sees.
            let mark = attach.lineCount
            let drawn = terminal.text.utf8.count
            terminal.type("l")
            try await attach.waitFor(type: "source", id: "koala") { $0.event == "newData" && $0.origin == "load" }
            #expect(attach.lines(since: mark).contains { $0.id == "koala" && $0.event == "newData" && $0.origin == "load" })
            try await terminal.waitFor("the loaded content again") {
                String(decoding: Array($0.utf8.dropFirst(drawn)), as: UTF8.self).contains("bush says KOALA 7")
            }

            terminal.type("q")
            try await waitForExit(watch)
            #expect(watch.terminationStatus == 0, "\((try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")")
            #expect(terminal.text.hasSuffix("\u{1B}[?1049l") && terminal.isCooked, "the terminal is put back")
            #expect(fixture.serves.map(\.pid) == engines, "the engine goes on for its other clients")
            let after = try await fixture.run(["ctl", fixture.configPath, #"{"op":"override","source":"koala","content":"EMU 1"}"#])
            #expect(after.termination == .exited(0), "\(after.stderr)")
            try await attach.waitFor(type: "source", id: "koala") { $0[pointer: "/state/content"] == "EMU 1" }
        }
    }

    @Test("with no engine it starts one; the engine's SIGTERM ends the screen with 0 and says why; --no-start with no engine exits 2")
    func startsAndOutlivesNothing() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let refused = try WatchTerminalTests.Terminal()
            let (noStart, noStartStderr) = try launch(fixture, on: refused, arguments: ["--no-start"])
            try await waitForExit(noStart)
            #expect(noStart.terminationStatus == 2)
            #expect(try String(contentsOfFile: noStartStderr, encoding: .utf8).contains("no engine serves"))
            #expect(fixture.serves.isEmpty)

            let terminal = try WatchTerminalTests.Terminal()
            let (watch, stderrPath) = try launch(fixture, on: terminal)
            try await terminal.waitFor("the rows") { $0.contains("● koala") && $0.contains("bush says KOALA 7") }
            let engines = fixture.serves
            #expect(engines.count == 1, "watch --attach started the engine")
            for engine in engines { kill(engine.pid, SIGTERM) }
            try await waitForExit(watch)
            #expect(watch.terminationStatus == 0)
            let stderr = try String(contentsOfFile: stderrPath, encoding: .utf8)
            #expect(stderr.contains("stopped (signal)"), "\(stderr)")
            #expect(terminal.text.hasSuffix("\u{1B}[?1049l") && terminal.isCooked, "the terminal is put back")
        }
    }
}
