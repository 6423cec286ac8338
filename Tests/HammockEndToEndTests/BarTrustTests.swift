import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// Issue 25: what a bar shows quotes no secret, whichever format writes it; stderr's records carry no raw
/// control character from an id or a click line. docs/formats.md.
@Suite("Secrets and control characters in bar formats")
struct BarTrustTests {
    static let secret = "s3cr3t-b4r"

    /// A shell source whose output echoes a secret from the environment (`${TOKEN}`), rendered into every
    /// field a bar shows: the content never saw the configuration's literal, only the engine's redactor at
    /// the output can catch it.
    static let config = """
        sources:
          vault: { kind: shell, command: [sh, -c, 'echo "key $TOKEN"'], env: { TOKEN: "${TOKEN}" }, refresh: 1h }
        views:
          safe:
            sources: [vault]
            render:
              text: "T {{ vault }}"
              short: "S {{ vault }}"
              tooltip: "P {{ vault }}"
              color: "#00ff00"
        """

    /// Runs `--format FORMAT` until a line holds `marker`, and returns stdout's lines.
    static func lines(format: String, views: [String] = ["--view", "safe"], until marker: String) async throws -> [String] {
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", format] + views, environment: ["TOKEN": secret],
            stdoutIsJSON: false
        ) { hammock in
            let lines = try await hammock.waitForStdoutLines("a line with \(marker)") { $0.contains { $0.contains(marker) } }
            #expect(!hammock.stderrText.contains(secret), "\(hammock.stderrText)")
            return lines
        }
    }

    @Test("--format text, tmux and polybar show [redacted] where the content echoes a secret")
    func textFormats() async throws {
        for (format, expected) in [
            ("text", "T key [redacted]"), ("tmux", "T key [redacted]"), ("polybar", "%{F#00ff00}T key [redacted]%{F-}"),
        ] {
            let lines = try await Self.lines(format: format, until: "T key")
            #expect(!lines.joined().contains(Self.secret), "\(format): \(lines)")
            #expect(lines.last == expected, "\(format): \(lines)")
        }
    }

    @Test("--format waybar redacts the secret in text and tooltip")
    func waybar() async throws {
        let lines = try await Self.lines(format: "waybar", until: "T key")
        #expect(!lines.joined().contains(Self.secret), "\(lines)")
        let last = try JSONValue(parsing: Array(try #require(lines.last).utf8))
        #expect(last["text"] == "T key [redacted]", "\(lines)")
        #expect(last["tooltip"] == "P key [redacted]", "\(lines)")
    }

    @Test("--format i3bar redacts the secret in full_text and short_text")
    func i3bar() async throws {
        let lines = try await Self.lines(format: "i3bar", views: [], until: "T key")
        #expect(!lines.joined().contains(Self.secret), "\(lines)")
        let blocks = try #require(lines.last { $0.contains("T key") })
        guard case .array(let array) = try JSONValue(parsing: Array(blocks.dropLast().utf8)), let block = array.first else {
            Issue.record("not an array of blocks: \(blocks)")
            return
        }
        #expect(block["full_text"] == "T key [redacted]", "\(blocks)")
        #expect(block["short_text"] == "S key [redacted]", "\(blocks)")
    }

    /// i3bar's clicks come on stdin, written by whoever can write there: a view name or a line with ESC and
    /// NUL must reach the terminal that shows stderr escaped.
    @Test("a click's name and a click line with control characters reach stderr escaped")
    func clickControlCharactersOnStderr() async throws {
        try await HammockProcess.withRunning(
            config: "sources:\n  a: { kind: fake, content: 1 }\nviews:\n  v: { sources: [a] }\n",
            arguments: ["--format", "i3bar"], stdoutIsJSON: false
        ) { hammock in
            try await hammock.waitForStdoutLines("the first blocks") { $0.contains { $0.contains("full_text") } }
            _ = hammock.send(bytes: Array("[\n".utf8))
            // As i3bar writes them: `[`, then a click a line, each after the first led by a comma.
            _ = hammock.send(bytes: Array(#"{"name":"v\u001b[2J\u0000x","button":1}"#.utf8) + Array("\n".utf8))
            _ = hammock.send(bytes: Array(",{\"name\":\"v\",\u{1B}]0;owned\u{7}\n".utf8))
            try await hammock.waitForStderr(containing: #"a click on "v\u{1B}[2J\u{0}x", which is not a view"#)
            try await hammock.waitForStderr(containing: #"\u{1B}]0;owned\u{7}"#)
            let raw = Array(hammock.stderrText.utf8)
            #expect(!raw.contains(0x1B) && !raw.contains(0) && !raw.contains(7), "\(hammock.stderrText.debugDescription)")
        }
    }
}
