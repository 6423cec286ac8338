import Foundation
import HammockTestSupport
import Testing

/// `hammock check`, `--version`, `--help`, and the options' values.
@Suite("Command line")
struct CommandLineTests {
    @Test("check: a valid file exits 0 with a one-line summary")
    func checkValid() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            version: 1
            sources:
              a: { kind: fake, content: 1 }
              b: { kind: fake, state: error, refresh: 5s }
            views:
              v: { sources: [a, b], ready: any, display: standard }
            """, in: directory)
        let run = try await HammockProcess.execute(["check", path])
        #expect(run.termination == .exited(0), "stderr: \(run.stderr)")
        let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == 1, "one line: \(run.stdout)")
        let summary = String(lines.first ?? "")
        #expect(summary.hasPrefix(path), "\(summary)")
        #expect(summary.contains("2 sources"), "\(summary)")
        #expect(summary.contains("1 view"), "\(summary)")
    }

    @Test("check: every problem of a broken file as PATH:LINE:COLUMN: message, exit 2")
    func checkBroken() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Line numbers are in the comments on the right of the Swift source, not in the file.
        let path = try HammockProcess.writeConfig(
            """
            version: 1
            sources:
              a:
                kind: fake
                refresh: 5 parsecs
                delya: 50ms
              b:
                kind: fake
                content: 1
            views:
              v:
                sources: [a, ghost]
            colour: blue
            """, in: directory)
        //  1 version: 1
        //  5     refresh: 5 parsecs          the value starts at column 14
        //  6     delya: 50ms                 the key starts at column 5
        // 12     sources: [a, ghost]         "ghost" starts at column 18
        // 13 colour: blue                    column 1
        let run = try await HammockProcess.execute(["check", path])
        #expect(run.termination == .exited(2), "stdout: \(run.stdout) stderr: \(run.stderr)")
        #expect(run.stdout.isEmpty, "problems go to stderr: \(run.stdout)")
        let problems = run.stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix(path + ":") }

        func problem(at position: String, _ fragments: String...) {
            let matching = problems.filter { $0.hasPrefix("\(path):\(position): ") }
            #expect(matching.count == 1, "one problem at \(position); problems: \(problems)")
            for fragment in fragments {
                #expect(matching.first?.contains(fragment) == true, "\(position) should mention \(fragment): \(matching)")
            }
        }
        problem(at: "5:14", "refresh", "5 parsecs")
        problem(at: "6:5", "unknown key", "delya")
        problem(at: "12:18", "ghost")
        problem(at: "13:1", "colour")
        let positioned = problems.filter { $0.wholeMatch(of: /.+:\d+:\d+: .+/) != nil }
        #expect(positioned.count == 4, "exactly the four problems: \(problems)")
    }

    @Test("check: a view's render templates are checked, each problem at its line and column")
    func checkRenderTemplates() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            sources:
              load: { kind: fake, content: "0.5 0.6" }
            views:
              v:
                sources: [load]
                render:
                  text: "{{ load | splt(' ') | first }}"
                  error: { txt: "⚠ {{ latestError.message }}" }
            """, in: directory)
        //  7       text: "{{ load | splt(' ') | first }}"     "splt" starts at column 24
        //  8       error: { txt: … }                          "txt" starts at column 16
        let run = try await HammockProcess.execute(["check", path])
        #expect(run.termination == .exited(2), "stdout: \(run.stdout) stderr: \(run.stderr)")
        let problems = run.stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix(path + ":") }
        #expect(
            problems == [
                "\(path):7:24: render.text of view \"v\": unknown filter \"splt\" (did you mean \"split\"?); filters: "
                    + RenderFilterNames.all,
                "\(path):8:16: unknown key \"txt\" in render.error of view \"v\" (did you mean \"text\"?)",
                "\(path): 2 errors",
            ], "\(run.stderr)")
    }

    @Test("check: every configuration in configs/ is valid, and the README shows configs/bar.yaml as it is")
    func bundledConfigurationsCheck() async throws {
        let root = FileManager.default.currentDirectoryPath
        let files = try FileManager.default.contentsOfDirectory(atPath: root + "/configs").filter { $0.hasSuffix(".yaml") }
        #expect(files.count >= 4, "\(files)")
        // From the project's root, as their comments say to run them (their paths are relative to it).
        for file in files.sorted() {
            // Bounded: a check that hangs (a plugin that never answers) fails the test instead of holding it.
            let check = try await BoundedRun.run(
                try HammockProcess.executablePath(), ["check", "configs/" + file],
                environment: ProcessInfo.processInfo.environment.merging(["GITHUB_TOKEN": "not-a-token"]) { $1 },
                directory: root, timeout: .seconds(30))
            #expect(check.termination == .exited(0), "\(file): \(check.stderr)")
        }
        // The README's status bar example is configs/bar.yaml without its first three comment lines (the
        // editors' `$schema` line, whose relative path means nothing in ~/.config, and two lines of how to run it).
        let bar = try String(contentsOfFile: root + "/configs/bar.yaml", encoding: .utf8)
        let shown = "# ~/.config/hammock/bar.yaml\n" + bar.split(separator: "\n", omittingEmptySubsequences: false).dropFirst(3).joined(separator: "\n")
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        #expect(readme.contains("```yaml\n" + shown + "```"), "README.md no longer shows configs/bar.yaml as it is")
    }

    @Test("check: a missing file is reported with exit 2")
    func checkMissingFile() async throws {
        let run = try await HammockProcess.execute(["check", "/nonexistent/hammock.yaml"])
        #expect(run.termination == .exited(2))
        #expect(run.stderr.contains("/nonexistent/hammock.yaml:1:1: "), "\(run.stderr)")
    }

    @Test("--version prints 0.1.0")
    func version() async throws {
        let run = try await HammockProcess.execute(["--version"])
        #expect(run.termination == .exited(0))
        #expect(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0.1.0")
    }

    @Test("--help exits 0 and names the commands")
    func help() async throws {
        let run = try await HammockProcess.execute(["--help"])
        #expect(run.termination == .exited(0))
        for word in ["run", "check", "USAGE"] {
            #expect(run.stdout.contains(word), "\(word) in: \(run.stdout)")
        }
    }

    @Test("run --help lists the formats and the defaults, and shell completions offer the formats")
    func runHelpListsTheValues() async throws {
        let help = try await HammockProcess.execute(["run", "--help"])
        #expect(help.termination == .exited(0), "\(help.stderr)")
        // Help wraps its lines to the terminal's width: compare the words, not the line breaks.
        let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for shown in [
            "--format <format>", "(values: json, waybar, polybar, text, tmux, i3bar, tui; default: json)",
            "--deadline <deadline>", "(default: 30s)", "--metrics <metrics>", "--log-level <log-level>",
        ] {
            #expect(words.contains(shown), "\(shown) in: \(help.stdout)")
        }
        // `plugin check --help` would hand `--help` to the plugin's command (it captures what follows): ask `help`.
        let pluginHelp = try await HammockProcess.execute(["help", "plugin", "check"])
        #expect(pluginHelp.termination == .exited(0), "\(pluginHelp.stderr)")
        #expect(pluginHelp.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ").contains("(default: {})"), "\(pluginHelp.stdout)")
        // Each shell's list of the values, as swift-argument-parser writes it (zsh and fish also quote the
        // help text, which names the formats too: the list is what completes).
        let formats = ["json", "waybar", "polybar", "text", "tmux", "i3bar", "tui"]
        let lists = [
            "bash": formats.map { "'\($0)'" }.joined(separator: "$'\\n'"),
            "zsh": "___format=(" + formats.map { "'\($0)'" }.joined(separator: " ") + ")",
            "fish": "-l 'format'",
        ]
        for (shell, list) in lists.sorted(by: { $0.key < $1.key }) {
            let script = try await HammockProcess.execute(["--generate-completion-script", shell])
            #expect(script.termination == .exited(0), "\(shell): \(script.stderr)")
            #expect(script.stdout.contains(list), "\(shell) completes --format with the formats: \(script.stdout)")
            if shell == "fish" {
                let line = script.stdout.split(separator: "\n").first { $0.contains("\"hammock run\" format") } ?? ""
                #expect(line.hasSuffix("-rfka '\(formats.joined(separator: " "))'"), "fish completes --format with the formats: \(line)")
            }
        }
    }

    @Test("a wrong --format, --metrics, --deadline or --options says what to write instead, with the exit status it always had")
    func wrongOptionValues() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig("sources:\n  n: { kind: fake, content: 1 }\n", in: directory)
        let cases: [([String], Int32, String)] = [
            // hammock's own usage errors: exit 2 (docs/formats.md, docs/service.md).
            (["run", "--format", "nonsense", path], 2,
             #"hammock: error: --format "nonsense" is not a format (formats: json, waybar, polybar, text, tmux, i3bar, tui)"#),
            (["run", "--metrics", "[::1]", path], 2,
             #"hammock: error: --metrics "[::1]" is not HOST:PORT; for example --metrics 127.0.0.1:9464"#),
            // swift-argument-parser's validation errors, with hammock's words: exit 64, as ever.
            (["run", "--once", "--deadline", "5", path], 64, #"Error: --deadline: "5" has no unit; write 5s, 5ms, 5m or 5h"#),
            (["run", "--once", "--deadline", "soon", path], 64, #"Error: --deadline: "soon" is not a duration"#),
            (["serve", "--idle-exit", "5", path], 64, #"Error: --idle-exit: "5" has no unit; write 5s, 5ms, 5m or 5h"#),
            (["plugin", "check", "--options", "[1]", "--", "hammock-plugin-shell"], 64,
             #"Error: --options must be a JSON object, e.g. '{"path":"/etc/hostname"}'"#),
            // Numbers at their limits: `nan` once crashed the conversion to milliseconds (SIGILL).
            (["plugin", "check", "--load-timeout", "nan", "--", "hammock-plugin-shell"], 64,
             #"Error: --load-timeout: "nan" is not a number of seconds above 0 and at most 24h"#),
            (["plugin", "check", "--load-timeout", "1e300", "--", "hammock-plugin-shell"], 64,
             #"Error: --load-timeout: "1e300" is not a number of seconds"#),
            (["plugin", "check", "--expect-push", "0", "--", "hammock-plugin-shell"], 64,
             #"Error: --expect-push: "0" is not a number of seconds"#),
            (["plugin", "check", "--expect-push", "inf", "--", "hammock-plugin-shell"], 64,
             #"Error: --expect-push: "inf" is not a number of seconds"#),
        ]
        for (arguments, status, message) in cases {
            let run = try await HammockProcess.execute(arguments)
            #expect(run.termination == .exited(status), "\(arguments): \(run.stderr)")
            #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
            #expect(run.stdout.isEmpty, "\(arguments): \(run.stdout)")
        }
    }

    @Test("run with a broken file exits 2 and writes nothing on stdout")
    func runBroken() async throws {
        try await HammockProcess.withRunning(config: "version: 1\nsources:\n  a: { kind: nothing-like-this }\n") { hammock in
            let termination = try await hammock.waitForExit()
            #expect(termination == .exited(2))
            // Both pipes read to their ends: what is checked is all there is.
            try await hammock.waitUntilStdoutEnds()
            try await hammock.waitUntilStderrEnds()
            #expect(hammock.stdoutText.isEmpty, "\(hammock.stdoutText)")
            #expect(hammock.stderrText.contains("\(hammock.configPath):3:"), "\(hammock.stderrText)")
        }
    }

    /// Memory is a feature: full Foundation and its ICU data cost each process about 6 MiB and milliseconds of
    /// loading, which hammock and the shell, file and rest plugins do without (FoundationEssentials only). One
    /// `import Foundation` brings it back; this says where.
    @Test("hammock, hammock-guard and the shell, file and rest plugins do not load full Foundation or ICU")
    func noFullFoundation() async throws {
        for product in ["hammock", "hammock-guard", "hammock-plugin-shell", "hammock-plugin-file", "hammock-plugin-rest"] {
            let path = try HammockProcess.productPath(product)
            let ldd = try HammockProcess.launch(program: "/usr/bin/ldd", arguments: [path])
            _ = try await ldd.waitForExit()
            try await ldd.waitUntilStdoutEnds()
            let libraries = ldd.stdoutLines.compactMap { $0.split(whereSeparator: \.isWhitespace).first.map(String.init) }
            #expect(libraries.contains { $0.hasPrefix("libc.so") }, "\(product): ldd said \(ldd.stdoutText)")
            let heavy = libraries.filter { $0.hasPrefix("libFoundation.so") || $0.hasPrefix("lib_FoundationICU") || $0.hasPrefix("libFoundationInternationalization") }
            #expect(heavy.isEmpty, "\(product) loads \(heavy): an `import Foundation` crept in; use FoundationEssentials")
        }
    }

    @Test("without hammock-guard beside it, run, check and plugin check refuse at start, saying where they looked (exit 2)")
    func refusesWithoutTheGuard() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // hammock alone in a folder: a link or a copy of the file, as /proc/self/exe names the file behind a symlink.
        let lonely = directory + "/hammock"
        let built = try HammockProcess.executablePath()
        if (try? FileManager.default.linkItem(atPath: built, toPath: lonely)) == nil {
            try FileManager.default.copyItem(atPath: built, toPath: lonely)
        }
        let config = try HammockProcess.writeConfig(
            """
            version: 1
            sources:
              a: { kind: shell, command: [echo, "1"] }
            """, in: directory)
        for arguments in [["run", config], ["check", config], ["plugin", "check", "--", "hammock-plugin-shell"]] {
            // stderr to a file, not a pipe, so no descriptor of it can leak into another test's child.
            let errorsPath = directory + "/stderr"
            #expect(FileManager.default.createFile(atPath: errorsPath, contents: nil))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: lonely)
            process.arguments = arguments
            process.environment = HammockProcess.environment([:], home: directory)
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle(forWritingAtPath: errorsPath)
            try process.run()
            let deadline = ContinuousClock.now + .seconds(30)
            while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            if process.isRunning { process.terminate() }
            let errors = (try? String(contentsOfFile: errorsPath, encoding: .utf8)) ?? ""
            #expect(process.terminationReason == .exit && process.terminationStatus == 2, "\(arguments): \(errors)")
            #expect(errors.contains("hammock-guard"), "\(arguments): \(errors)")
            #expect(errors.contains(directory + "/hammock-guard"), "names where it looked: \(errors)")
        }
    }
}

private enum RenderFilterNames {
    static let all = "default, round, truncate, upper, lower, first, last, split, join, bytes, duration, ago"
}
