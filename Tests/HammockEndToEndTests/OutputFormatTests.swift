import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// `hammock run --format waybar|polybar|text --view ID`: a status bar's lines instead of the protocol's, one
/// per change of what the bar shows; SIGUSR1 and SIGUSR2 act for bars that have no stdin. docs/formats.md.
@Suite("Output formats")
struct OutputFormatTests {
    @Test("--format text writes the rendered text once per change, nothing while the render stays the same")
    func textOncePerChange() async throws {
        // `tick` changes every 300 ms, so the view changes; what it renders does not.
        let config = """
            sources:
              name: { kind: fake, content: hi }
              tick:
                kind: shell
                command: [sh, -c, 'echo x >> "$HOME/ticks"; wc -l < "$HOME/ticks"']
                refresh: 300ms
            views:
              v:
                sources: [name, tick]
                render:
                  text: "name {{ name | default('?') }}"
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "text", "--view", "v"], stdoutIsJSON: false
        ) { hammock in
            _ = try await hammock.waitForStdoutLines("the rendered text") { $0.contains("name hi") }
            let ticks = hammock.directory + "/ticks"
            let deadline = ContinuousClock.now + .seconds(15)
            while ((try? String(contentsOfFile: ticks, encoding: .utf8))?.split(separator: "\n").count ?? 0) < 5 {
                #expect(ContinuousClock.now < deadline, "tick did not refresh 5 times")
                if ContinuousClock.now >= deadline { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            let lines = hammock.stdoutLines
            #expect(lines.filter { $0 == "name hi" }.count == 1, "\(lines)")
            #expect(lines.last == "name hi", "\(lines)")
            #expect(zip(lines, lines.dropFirst()).allSatisfy { $0 != $1 }, "a line repeats the one before: \(lines)")
        }
    }

    @Test("a template with ago is rendered again as time passes, with no new state; one without ago is not")
    func agoIsRenderedAgain() async throws {
        // `at` loads once (its refresh is an hour away): every later line comes from the clock alone.
        let config = """
            sources:
              at: { kind: shell, command: [date, +%s], refresh: 1h }
            views:
              age: { sources: [at], render: { text: "loaded {{ at | ago }}" } }
              plain: { sources: [at], render: { text: "loaded at {{ at }}" } }
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "text", "--view", "age"], stdoutIsJSON: false
        ) { hammock in
            // "1 s ago" comes between, unless a very busy machine held the writer past its second.
            let lines = try await hammock.waitForStdoutLines("two seconds of age") { $0.contains("loaded 2 s ago") }
            #expect(zip(lines, lines.dropFirst()).allSatisfy { $0 != $1 }, "a line repeats the one before: \(lines)")
        }
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "text", "--view", "plain"], stdoutIsJSON: false
        ) { hammock in
            let shown = try await hammock.waitForStdoutLines("the time loaded") { $0.last?.last?.isNumber == true }
            try await Task.sleep(for: .milliseconds(2500))
            #expect(hammock.stdoutLines == shown)
        }
    }

    @Test("--format waybar writes one JSON object per change with text, alt, tooltip, class and percentage")
    func waybar() async throws {
        let config = """
            sources:
              n: { kind: fake, content: 42 }
            views:
              v:
                sources: [n]
                render:
                  text: "n={{ n }}"
                  tooltip: "the answer"
                  class: answer
                  percentage: "{{ n }}"
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "waybar", "--view", "v"], stdoutIsJSON: false
        ) { hammock in
            let lines = try await hammock.waitForStdoutLines("the view's data") { lines in
                lines.contains { $0.contains("\"n=42\"") }
            }
            for line in lines {
                let value = try JSONValue(parsing: Array(line.utf8))
                guard case .object(let object) = value else {
                    Issue.record("not a JSON object: \(line)")
                    continue
                }
                #expect(Set(object.keys).isSubset(of: ["text", "alt", "tooltip", "class", "percentage"]), "\(line)")
            }
            let data = try JSONValue(parsing: Array(lines.first { $0.contains("\"n=42\"") }!.utf8))
            #expect(data["text"] == .string("n=42"))
            #expect(data["alt"] == .string("data"))
            #expect(data["tooltip"] == .string("the answer"))
            #expect(data["class"] == .string("answer"))
            #expect(data["percentage"]?.numberValue?.intValue == 42)
        }
    }

    @Test("--format polybar wraps a colored block in %{F#rrggbb} … %{F-}; several views are joined")
    func polybar() async throws {
        let config = """
            sources:
              n: { kind: fake, content: 7 }
              m: { kind: fake, content: plain }
            views:
              red:
                sources: [n]
                render:
                  text: "{{ n }} up"
                  color: "#ff0000"
              bare:
                sources: [m]
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "polybar", "--view", "red", "--view", "bare"], stdoutIsJSON: false
        ) { hammock in
            _ = try await hammock.waitForStdoutLines("the colored line") { $0.contains("%{F#ff0000}7 up%{F-} | plain") }
        }
    }

    @Test("SIGUSR1 loads a failing source again; SIGUSR2 loads every source")
    func signals() async throws {
        let config = """
            sources:
              flaky:
                kind: shell
                command: [sh, -c, 'if [ -e "$HOME/ok" ]; then echo fine; else echo broken >&2; exit 3; fi']
                retry: off
              a:
                kind: shell
                command: [sh, -c, 'echo x >> "$HOME/a"; echo "a$(wc -l < "$HOME/a")"']
              b:
                kind: shell
                command: [sh, -c, 'echo x >> "$HOME/b"; echo "b$(wc -l < "$HOME/b")"']
            views:
              flaky: { sources: [flaky] }
              both: { sources: [a, b] }
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "text", "--view", "flaky", "--view", "both"], stdoutIsJSON: false
        ) { hammock in
            _ = try await hammock.waitForStdoutLines("flaky failed, a and b loaded") {
                $0.contains { $0.hasPrefix("error") && $0.hasSuffix(" | a1 · b1") }
            }
            _ = FileManager.default.createFile(atPath: hammock.directory + "/ok", contents: nil)
            hammock.signal(SIGUSR1)
            // Only the failing source loads: a and b stay at their first load.
            _ = try await hammock.waitForStdoutLines("flaky loaded again") { $0.last == "fine | a1 · b1" }
            hammock.signal(SIGUSR2)
            _ = try await hammock.waitForStdoutLines("every source loaded again") { $0.last == "fine | a2 · b2" }
            #expect(hammock.isRunning)
        }
    }

    @Test("a bad --format or --view is a clear error with exit status 2")
    func badArguments() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            sources:
              n: { kind: fake, content: 1 }
            views:
              v: { sources: [n] }
              w: { sources: [n] }
            """, in: directory)
        let runCases: [([String], String)] = [
            (["--format", "xml"], #"--format "xml" is not a format (formats: json, waybar, polybar, text, tmux, i3bar, tui)"#),
            (["--format", "waybar"], "--format waybar shows one view per process: give exactly one --view"),
            (["--format", "waybar", "--view", "v", "--view", "w"], "give exactly one --view"),
            (["--format", "text"], "--format text needs at least one --view"),
            (["--format", "tmux"], "--format tmux needs at least one --view"),
            (["--view", "v"], "--view applies to the bar formats"),
            (["--format", "text", "--view", "nope"], #"--view "nope": \#(path) has no such view (views: v, w)"#),
            // stdout is a pipe here: the watch screen needs a terminal (tests/consumers/tmux tests it in one).
            (["--format", "tui"], "watch draws on a terminal and stdout is not one"),
            (["--format", "tui", "--view", "v"], "--view applies to the bar formats (waybar, polybar, text, tmux, i3bar), not to tui"),
        ]
        let cases = runCases.map { (["run"] + $0.0, $0.1) } + [(["watch"], "watch draws on a terminal and stdout is not one")]
        for (arguments, message) in cases {
            let run = try await HammockProcess.execute(arguments + [path])
            #expect(run.termination == .exited(2), "\(arguments): \(run.stderr)")
            #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
            #expect(run.stdout.isEmpty, "\(arguments): \(run.stdout)")
        }
    }
}
