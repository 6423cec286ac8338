import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// `hammock run --format i3bar`: i3bar's (and swaybar's) protocol on stdout, its click events on stdin, and
/// its stop and cont signals. docs/formats.md, "i3bar".
@Suite("i3bar format")
struct I3barFormatTests {
    /// A block line: an array of blocks followed by the comma of the endless array.
    private func blocks(_ line: String) throws -> [JSONValue] {
        #expect(line.hasSuffix(","), "\(line)")
        guard case .array(let blocks) = try JSONValue(parsing: String(line.dropLast())) else {
            Issue.record("not an array: \(line)")
            return []
        }
        return blocks
    }

    private func fullTexts(_ line: String) -> [String] {
        guard line.hasPrefix("[{"), let blocks = try? blocks(line) else { return [] }
        return blocks.compactMap { $0["full_text"]?.stringValue }
    }

    @Test("the header, the array's opening, then an array with a block per view (every view without --view)")
    func headerAndBlocks() async throws {
        let config = """
            sources:
              n: { kind: fake, content: 42 }
            views:
              answer:
                sources: [n]
                render:
                  text: "n={{ n }}"
                  color: "#00ff00"
              plain: { sources: [n] }
            """
        try await HammockProcess.withRunning(config: config, arguments: ["--format", "i3bar"], stdoutIsJSON: false) { hammock in
            // Both views change with n's answer, but the writer may take the first view's line before the
            // engine sends the second's: wait for the array that shows both.
            let lines = try await hammock.waitForStdoutLines("the blocks") { lines in
                lines.contains { fullTexts($0) == ["n=42", "42"] }
            }
            let header = try JSONValue(parsing: lines[0])
            #expect(header["version"]?.numberValue?.intValue == 1)
            #expect(header["click_events"] == .bool(true))
            #expect(header["stop_signal"]?.numberValue?.intValue == Int(SIGURG))
            #expect(header["cont_signal"]?.numberValue?.intValue == Int(SIGCONT))
            #expect(lines[1] == "[")
            for line in lines.dropFirst(2) { _ = try blocks(line) }
            let shown = try blocks(lines.first { fullTexts($0) == ["n=42", "42"] }!)
            #expect(shown.count == 2)
            #expect(shown[0]["name"] == .string("answer"))
            #expect(shown[0]["full_text"] == .string("n=42"))
            #expect(shown[0]["color"] == .string("#00ff00"))
            #expect(shown[0]["urgent"] == .bool(false))
            #expect(shown[1]["name"] == .string("plain"))
            #expect(shown[1]["full_text"] == .string("42"))
        }
    }

    private let clickConfig = """
        sources:
          flaky:
            kind: shell
            command: [sh, -c, 'if [ -e "$HOME/ok" ]; then echo fine; else echo broken >&2; exit 3; fi']
            retry: off
          count:
            kind: shell
            command: [sh, -c, 'echo x >> "$HOME/count"; echo "c$(wc -l < "$HOME/count")"']
        views:
          flaky: { sources: [flaky] }
          count: { sources: [count] }
        """

    @Test("after the stop signal nothing is written until the cont signal, which writes what changed meanwhile")
    func stopAndCont() async throws {
        try await HammockProcess.withRunning(
            config: clickConfig, arguments: ["--format", "i3bar", "--view", "count"], stdoutIsJSON: false
        ) { hammock in
            try await hammock.waitForStdoutLines("count loaded") { self.fullTexts($0.last ?? "") == ["c1"] }
            hammock.signal(SIGURG)
            // The signal's way to the writer is much shorter than a click's to a finished load; the wait
            // below only gives the second load every chance to be written, were the writer not paused.
            try await Task.sleep(for: .milliseconds(200))
            try hammock.send(controlLine: "[")
            try hammock.send(controlLine: #"{"name":"count","button":1}"#)
            let count = hammock.directory + "/count"
            let deadline = ContinuousClock.now + .seconds(15)
            while ((try? String(contentsOfFile: count, encoding: .utf8))?.split(separator: "\n").count ?? 0) < 2 {
                try #require(ContinuousClock.now < deadline, "the click did not load count again")
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(700))
            #expect(!hammock.stdoutLines.contains { self.fullTexts($0) == ["c2"] }, "written while stopped")
            #expect(hammock.isRunning)
            hammock.signal(SIGCONT)
            try await hammock.waitForStdoutLines("the change made while stopped") { self.fullTexts($0.last ?? "") == ["c2"] }
        }
    }

    @Test("on-click: each button's op or command; a command's output goes to the log, and it ends with hammock")
    func onClick() async throws {
        let config = """
            sources:
              count:
                kind: shell
                command: [sh, -c, 'echo x >> "$HOME/count"; echo "c$(wc -l < "$HOME/count")"']
            views:
              count:
                sources: [count]
                render: { text: "{{ count }}", short: "#" }
                on-click:
                  left: { run: 'echo "$HAMMOCK_VIEW $HAMMOCK_BUTTON" > "$HOME/clicked"; echo said-on-stdout; echo said-on-stderr >&2; exit 3' }
                  middle: load
                  right: { run: 'echo $$$$ > "$HOME/sleeper.tmp"; mv "$HOME/sleeper.tmp" "$HOME/sleeper"; exec sleep 600' }
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "i3bar"], stdoutIsJSON: false
        ) { hammock in
            try await hammock.waitForStdoutLines("count loaded") { self.fullTexts($0.last ?? "") == ["c1"] }
            #expect(hammock.stdoutLines.last?.contains(##""short_text":"#""##) == true)
            try hammock.send(controlLine: "[")
            try hammock.send(controlLine: #"{"name":"count","button":1}"#)
            try await hammock.waitForStderr(containing: #"on-click of view "count": `echo"#)
            try await hammock.waitForStderr(containing: "exited with status 3")
            #expect(try String(contentsOfFile: hammock.directory + "/clicked", encoding: .utf8) == "count 1\n")
            #expect(hammock.stderrText.contains(#"on-click of view "count": said-on-stdout"#))
            #expect(hammock.stderrText.contains(#"on-click of view "count": said-on-stderr"#))
            #expect(!hammock.stdoutText.contains("said-on"), "a command's output reached the bar")

            try hammock.send(controlLine: #",{"name":"count","button":2}"#)
            try await hammock.waitForStdoutLines("middle loads") { self.fullTexts($0.last ?? "") == ["c2"] }

            try hammock.send(controlLine: #",{"name":"count","button":3}"#)
            let sleeperFile = hammock.directory + "/sleeper"
            let deadline = ContinuousClock.now + .seconds(15)
            while !FileManager.default.fileExists(atPath: sleeperFile) {
                try #require(ContinuousClock.now < deadline, "the right button's command did not start")
                try await Task.sleep(for: .milliseconds(20))
            }
            let sleeper = try #require(Int32(try String(contentsOfFile: sleeperFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            let running = try #require(ProcessTable.entry(sleeper))
            #expect(ProcessTable.isAlive(running))
            hammock.signal(SIGTERM)
            let termination = try await hammock.waitForExit(timeout: .seconds(10))
            #expect(termination == .exited(0), "the stop waited for the command, or failed: \(hammock.stderrText)")
            let gone = ContinuousClock.now + .seconds(5)
            while ProcessTable.isAlive(running), ContinuousClock.now < gone { try await Task.sleep(for: .milliseconds(20)) }
            #expect(!ProcessTable.isAlive(running), "the on-click command outlived hammock")
        }
    }

    @Test("a flood of clicks on a button whose command still runs starts it once")
    func clickFlood() async throws {
        let config = """
            sources:
              n: { kind: fake, content: 1 }
            views:
              n:
                sources: [n]
                on-click:
                  scroll-up: { run: 'echo x >> "$HOME/runs"; exec sleep 60' }
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "i3bar", "--log-level", "info"], stdoutIsJSON: false
        ) { hammock in
            try await hammock.waitForStdoutLines("the block") { self.fullTexts($0.last ?? "") == ["1"] }
            try hammock.send(controlLine: "[")
            // Spread over a second: clicks that come together are taken as one already (the mailbox coalesces).
            for index in 0..<20 {
                try hammock.send(controlLine: (index == 0 ? "" : ",") + #"{"name":"n","button":4}"#)
                try await Task.sleep(for: .milliseconds(50))
            }
            try await hammock.waitForStderr(containing: "click ignored")
            let runs = try String(contentsOfFile: hammock.directory + "/runs", encoding: .utf8)
            #expect(runs == "x\n", "the command ran more than once while it was running")
            #expect(hammock.isRunning)
        }
    }
}
