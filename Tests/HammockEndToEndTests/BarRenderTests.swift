import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// What a bar shows while a view has no content, and where render problems go. docs/configuration.md,
/// "Rendering a view".
@Suite("Bar rendering")
struct BarRenderTests {
    /// Each line of `--format waybar`, parsed.
    private func objects(_ lines: [String]) throws -> [JSONValue] {
        try lines.map { try JSONValue(parsing: Array($0.utf8)) }
    }

    @Test("--format waybar: no template over nothing; an empty text until there is content, then the last text shown while the content is gone")
    func noTemplateOverNothing() async throws {
        let config = """
            sources:
              repo: { kind: fake, content: { stars: 5, forks: 2 }, delay: 300ms }
            views:
              v:
                sources: [repo]
                render: { text: "forks {{ repo.forks }} stars {{ repo.stars }}" }
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "waybar", "--view", "v"], stdoutIsJSON: false
        ) { hammock in
            let shown = try objects(
                try await hammock.waitForStdoutLines("the view's data") { $0.contains { $0.contains("\"forks 2 stars 5\"") } })
            let beforeData = shown.prefix { $0["alt"] != "data" }
            #expect(!beforeData.isEmpty, "the view had a state before its content: \(shown)")
            for object in beforeData {
                #expect(object["text"] == "", "a line before the content shows the template over nothing: \(object)")
            }
            // The content goes (a wipe): the bar keeps what it showed, in the view's new status.
            let count = hammock.stdoutLines.count
            try hammock.send(controlLine: #"{"op":"wipe","source":"repo"}"#)
            let after = try objects(
                Array(try await hammock.waitForStdoutLines("a line without content") { $0.count > count }.dropFirst(count)))
            #expect(after.first?["alt"] != "data", "\(after)")
            #expect(after.first?["text"] == "forks 2 stars 5", "\(after)")
            #expect(!hammock.stderrText.contains("has no value"), "a template not rendered has no problem: \(hammock.stderrText)")
        }
    }

    @Test("--format waybar: a render problem goes to stderr once, however often the view renders")
    func renderProblemOnStderrOnce() async throws {
        // `tick` changes every 200 ms, so the view renders again and again, with the same problem each time.
        let config = """
            sources:
              repo: { kind: fake, content: { stars: 5 } }
              tick:
                kind: shell
                command: [sh, -c, 'echo x >> "$HOME/ticks"; wc -l < "$HOME/ticks"']
                refresh: 200ms
            views:
              v:
                sources: [repo, tick]
                render: { text: "forks {{ repo.forks }} tick {{ tick }}" }
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "waybar", "--view", "v"], stdoutIsJSON: false
        ) { hammock in
            let problem = #"view "v": text: {{ repo.forks }} has no value"#
            try await hammock.waitForStderr(containing: problem)
            let lines = try await hammock.waitForStdoutLines("five renders with the problem") { lines in
                lines.filter { $0.contains("\"forks  tick ") }.count >= 5
            }
            #expect(hammock.stderrText.components(separatedBy: problem).count == 2, "reported once: \(hammock.stderrText)")
            #expect(hammock.stderrText.contains("warning"), "\(hammock.stderrText)")
            #expect(try objects(lines).allSatisfy { $0["text"]?.stringValue?.hasPrefix("forks  tick ") ?? false || $0["text"] == "" })
        }
    }
}
