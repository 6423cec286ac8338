import Foundation
import HammockTestSupport
import Synchronization
import Testing

/// `hammock watch` on a pseudo-terminal: the screen is drawn, `q` quits with status 0, and the terminal is
/// put back (main screen, cursor, cooked mode). tests/consumers/tmux does the same in a real tmux, with keys,
/// signals and plugins.
@Suite("hammock watch on a terminal")
struct WatchTerminalTests {
    /// A pseudo-terminal whose controller side is read on a thread of its own until hammock closes its side.
    final class Terminal: Sendable {
        let controller: Int32
        let device: Int32
        private let output = Mutex<[UInt8]>([])

        init() throws {
            var ends: (controller: Int32, device: Int32) = (-1, -1)
            guard openpty(&ends.controller, &ends.device, nil, nil, nil) == 0 else { throw POSIXError(.ENOTTY) }
            (controller, device) = ends
            let reading = Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = read(controller, &buffer, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { return }  // EIO: every process closed the device
                    output.withLock { $0 += buffer[..<count] }
                }
            }
            reading.start()
        }

        var text: String { String(decoding: output.withLock { $0 }, as: UTF8.self) }

        func type(_ keys: String) {
            _ = Array(keys.utf8).withUnsafeBytes { write(controller, $0.baseAddress, $0.count) }
        }

        func waitFor(_ what: String, timeout: Duration = .seconds(20), _ condition: (String) -> Bool) async throws {
            let deadline = ContinuousClock.now + timeout
            while !condition(text) {
                guard ContinuousClock.now < deadline else {
                    Issue.record("waited \(timeout) for \(what); the terminal shows: \(text.suffix(2000).debugDescription)")
                    throw CancellationError()
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        /// The terminal's mode as hammock left it.
        var isCooked: Bool {
            var mode = termios()
            guard tcgetattr(device, &mode) == 0 else { return false }
            return mode.c_lflag & tcflag_t(ICANON) != 0 && mode.c_lflag & tcflag_t(ECHO) != 0
        }
    }

    static let koalaAndDingo = """
        version: 1
        sources:
          koala: { kind: fake, content: "KOALA 7" }
          dingo: { kind: fake, state: error, error: { message: "DINGO down" } }
        views:
          bush: { sources: [koala, dingo] }
        """

    /// Starts `hammock watch` on `terminal` with `config`, with `environment` only (and PATH, HOME).
    func launch(on terminal: Terminal, config yaml: String = koalaAndDingo, environment: [String: String]) throws -> (Process, String) {
        let directory = try HammockProcess.makeTemporaryDirectory()
        let config = try HammockProcess.writeConfig(yaml, in: directory)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try HammockProcess.executablePath())
        process.arguments = ["watch", config]
        var base = HammockProcess.environment([:], home: directory)
        base["LANG"] = nil
        process.environment = base.merging(environment) { _, new in new }
        let device = FileHandle(fileDescriptor: terminal.device, closeOnDealloc: false)
        process.standardInput = device
        process.standardOutput = device
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, directory)
    }

    func waitForExit(_ process: Process) async throws { try await Self.waitForExit(process) }

    /// Waits up to 20 s for `process` (a `hammock watch` on a terminal) to exit; a test issue if it does not.
    static func waitForExit(_ process: Process) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.terminate()
                Issue.record("hammock watch did not exit")
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test("the screen shows each row with its mark, in colors; q quits with 0 and puts the terminal back")
    func quitRestoresTheTerminal() async throws {
        let terminal = try Terminal()
        let (process, directory) = try launch(on: terminal, environment: ["LANG": "C.UTF-8", "TERM": "xterm"])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // With colors, each mark is wrapped in its color: green for data, red for an error.
        try await terminal.waitFor("both sources and the view") { text in
            text.contains("\u{1B}[32m●\u{1B}[0;7m koala") && text.contains("KOALA 7")
                && text.contains("\u{1B}[31m✗\u{1B}[0m dingo") && text.contains("error: DINGO down")
                && text.contains("\u{1B}[31m✗\u{1B}[0m bush")
        }
        let screen = terminal.text
        #expect(screen.hasPrefix("\u{1B}[?1049h\u{1B}[?25l"), "the alternate screen, no cursor: \(screen.debugDescription)")
        #expect(!terminal.isCooked, "keys are read one by one")
        terminal.type("q")
        try await waitForExit(process)
        #expect(process.terminationStatus == 0)
        let end = terminal.text
        #expect(end.hasSuffix("\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l"), "the main screen and the cursor are back: \(end.suffix(80).debugDescription)")
        #expect(terminal.isCooked, "the terminal's mode is put back")
    }

    @Test("NO_COLOR and a locale that is not UTF-8: no colors, ASCII marks")
    func noColorsAndASCII() async throws {
        let terminal = try Terminal()
        let (process, directory) = try launch(on: terminal, environment: ["NO_COLOR": "1", "TERM": "xterm"])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await terminal.waitFor("the rows in ASCII") { $0.contains("* koala") && $0.contains("x dingo") }
        process.terminate()  // SIGTERM: the terminal is put back as well
        try await waitForExit(process)
        #expect(process.terminationStatus == 0)
        let text = terminal.text
        #expect(!text.contains("●") && !text.contains("\u{1B}[32m") && !text.contains("\u{1B}[7m"), "\(text.debugDescription)")
        #expect(text.hasSuffix("\u{1B}[?1049l") && terminal.isCooked)
    }

    /// The screen shows a source's content and a view's rendered text: a secret the content echoes must be
    /// redacted there as on stdout.
    @Test("a secret that a source's content echoes is shown [redacted] in its row and its view's")
    func secretsAreRedacted() async throws {
        let secret = "s3cr3t-w4tch"
        let config = """
            version: 1
            sources:
              vault: { kind: shell, command: [sh, -c, 'echo "key $TOKEN"'], env: { TOKEN: "${TOKEN}" }, refresh: 1h }
            views:
              safe: { sources: [vault], render: { text: "T {{ vault }}" } }
            """
        let terminal = try Terminal()
        let (process, directory) = try launch(
            on: terminal, config: config, environment: ["NO_COLOR": "1", "TERM": "xterm", "TOKEN": secret])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await terminal.waitFor("the source's row and the view's") { $0.contains("* vault") && $0.contains("T key") }
        process.terminate()
        try await waitForExit(process)
        let text = terminal.text
        #expect(!text.contains(secret), "\(text.debugDescription)")
        #expect(text.contains("key [redacted]") && text.contains("T key [redacted]"), "\(text.debugDescription)")
    }
}
