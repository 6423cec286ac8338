import Foundation
import HammockJSON
import HammockTestSupport
import Synchronization
import Testing

/// `hammock plugin check`, run for real on the shipped plugins, the Python example and the misbehaving
/// fixture.
@Suite("hammock plugin check, end to end")
struct PluginCheckTests {
    /// plugins/examples/sysmetrics.py, found from this source file.
    static let sysmetrics = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("plugins/examples/sysmetrics.py").path

    /// Runs `hammock plugin check ARGUMENTS -- COMMAND`; prints its report so a failure shows it.
    static func check(
        _ arguments: [String], _ command: [String], environment: [String: String] = [:], timeout: Duration = .seconds(40)
    ) async throws -> CompletedRun {
        let run = try await HammockProcess.execute(
            ["plugin", "check"] + arguments + ["--"] + command, environment: environment, timeout: timeout)
        print("$ hammock plugin check \((arguments + ["--"] + command).joined(separator: " "))\n\(run.stdout)\(run.stderr)")
        return run
    }

    static func lines(_ run: CompletedRun, _ verdict: String) -> [String] {
        run.stdout.split(separator: "\n").map(String.init).filter { $0.hasPrefix(verdict) }
    }

    /// Every check a well-behaved plugin must pass, by name.
    static let required = ["handshake", "configure valid", "configure invalid", "load", "cancel", "load unconfigured", "shutdown", "protocol"]

    static func expectAllPassed(_ run: CompletedRun, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(run.termination == .exited(0), "\(run.stdout)\(run.stderr)", sourceLocation: sourceLocation)
        #expect(lines(run, "FAIL").isEmpty, "\(run.stdout)", sourceLocation: sourceLocation)
        let passed = lines(run, "ok   ")
        for name in required {
            #expect(
                passed.contains { $0.hasPrefix("ok   \(name)") && ($0.count == 5 + name.count || $0.dropFirst(5 + name.count).first == ":") },
                "ok \(name): \(run.stdout)", sourceLocation: sourceLocation)
        }
    }

    // MARK: Shipped plugins pass

    @Test("the shell plugin passes")
    func shell() async throws {
        // A bare name is looked for beside hammock, as hammock finds its plugins.
        let run = try await Self.check(["--kind", "shell", "--options", #"{"command":["echo","hi"]}"#], ["hammock-plugin-shell"])
        Self.expectAllPassed(run)
    }

    @Test("the file plugin passes")
    func file() async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/data.txt"
        try TestFiles.writeInPlace("hello\n", to: path)
        let options = JSONValue.object(["path": .string(path)]).jsonString
        let run = try await Self.check(["--kind", "file", "--options", options], ["hammock-plugin-file"])
        Self.expectAllPassed(run)
    }

    @Test("the rest plugin passes, an error answer (connection refused) being a valid answer")
    func rest() async throws {
        let executable = (try HammockProcess.executablePath() as NSString).deletingLastPathComponent + "/hammock-plugin-rest"
        let run = try await Self.check(["--kind", "rest", "--options", #"{"url":"http://127.0.0.1:1/"}"#], [executable])
        Self.expectAllPassed(run)
        #expect(run.stdout.contains("ok   load: answered with error"), "\(run.stdout)")
    }

    @Test("the Python example passes, push included")
    func python() async throws {
        let run = try await Self.check(
            ["--kind", "sysmetric", "--options", #"{"metric":"cpu","watch":"200ms"}"#, "--expect-push", "3"],
            ["python3", Self.sysmetrics])
        Self.expectAllPassed(run)
        #expect(Self.lines(run, "ok   push").count == 1, "\(run.stdout)")
    }

    @Test("a plugin that should push and does not fails the push check")
    func missingPush() async throws {
        let run = try await Self.check(
            ["--options", #"{"metric":"memory"}"#, "--expect-push", "1"], ["python3", Self.sysmetrics])
        #expect(run.termination == .exited(1))
        #expect(Self.lines(run, "FAIL").map { $0.prefix(10) } == ["FAIL push:"], "\(run.stdout)")
    }

    // MARK: Misbehaving plugins fail, saying why

    enum Mode: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case garbage, noHello = "no-hello", crashAtOnce = "crash-at-once", silentLoads = "silent-loads"
        var testDescription: String { rawValue }

        /// A FAIL line it must give: its start and something it must say.
        var expected: (prefix: String, says: String) {
            switch self {
            case .garbage: ("FAIL load: ", "got a line that is not protocol")
            case .noHello: ("FAIL handshake: ", "got nothing within 5s")
            case .crashAtOnce: ("FAIL handshake: ", "exited with status 3; its stderr ends: crashing at once, as asked")
            case .silentLoads: ("FAIL load: ", "got nothing within 3s")
            }
        }
    }

    @Test("the misbehaving fixture fails with FAIL lines and a non-zero exit", arguments: Mode.allCases)
    func misbehaving(mode: Mode) async throws {
        let run = try await Self.check(
            ["--kind", "test", "--load-timeout", "1"], ["python3", TestFiles.fixture("misbehaving-plugin.py"), mode.rawValue])
        #expect(run.termination == .exited(1), "\(run.stdout)\(run.stderr)")
        let failures = Self.lines(run, "FAIL")
        let (prefix, says) = mode.expected
        #expect(failures.contains { $0.hasPrefix(prefix) && $0.contains(says) }, "a \(prefix)... \(says) line: \(run.stdout)")
        // What was expected is said, too.
        #expect(failures.allSatisfy { $0.contains("expected") || $0.hasPrefix("FAIL protocol") }, "\(run.stdout)")
        #expect(run.stdout.hasSuffix("failed\n"), "a summary line: \(run.stdout)")
    }

    @Test("a plugin that ignores shutdown fails the shutdown check and is killed")
    func ignoresShutdown() async throws {
        // This check's own plugin is known by a variable in its environment: other suites run the same
        // fixture in parallel.
        let run = UUID().uuidString
        let marker = "HAMMOCK_PLUGIN_CHECK_RUN=\(run)"
        defer { for process in ProcessTable.processes(withEnvironment: marker) { kill(process.pid, SIGKILL) } }
        // Watches, while the check runs, that the marker finds its plugin: otherwise "none left" proves nothing.
        // A thread, not a task: tests that block the cooperative pool's few threads must not starve it.
        let seen = Mutex((plugin: false, stopped: false))
        Thread {
            while !seen.withLock({ $0.stopped || $0.plugin }) {
                if ProcessTable.processes(withEnvironment: marker).contains(where: { $0.command.hasPrefix("python") }) {
                    seen.withLock { $0.plugin = true }
                }
                usleep(20_000)
            }
        }.start()
        defer { seen.withLock { $0.stopped = true } }
        let start = ContinuousClock.now
        let check = try await Self.check(
            ["--kind", "test"], ["python3", TestFiles.fixture("misbehaving-plugin.py"), "ignore-shutdown"],
            environment: ["HAMMOCK_PLUGIN_CHECK_RUN": run])
        #expect(seen.withLock { $0.plugin }, "the plugin was never seen by its marker")
        #expect(check.termination == .exited(1))
        #expect(Self.lines(check, "FAIL shutdown: expected an exit within 2s").count == 1, "\(check.stdout)")
        // Only a hang is caught here: the fixture answers every other step at once, and the 2 s grace is the
        // check's own line above. A loaded CI machine took 11.9 s for the whole check, so the bound is far from it
        // and well under the harness's 40 s timeout.
        #expect(ContinuousClock.now - start < .seconds(30))
        let left = ProcessTable.processes(withEnvironment: marker)
        #expect(left.isEmpty, "the plugin was killed: \(left)")
    }

    @Test("a plugin whose guard is killed while a process it left (setsid) holds its pipes: the check sees the end at once")
    func escapedHolderDoesNotHideTheEnd() async throws {
        // Known by a variable in its environment, to end the sleeper that outlives the check.
        let run = UUID().uuidString
        let marker = "HAMMOCK_PLUGIN_CHECK_RUN=\(run)"
        defer { for process in ProcessTable.processes(withEnvironment: marker) { kill(process.pid, SIGKILL) } }
        let start = ContinuousClock.now
        // The sleeper's session is its own: the guard's group kill would not reach it, and `check` sweeps no
        // orphans. It holds the pipes for 60 s, longer than the harness waits.
        let check = try await Self.check(
            ["--kind", "test"], ["/bin/sh", "-c", "setsid sleep 60 & kill -9 $PPID; sleep 60"],
            environment: ["HAMMOCK_PLUGIN_CHECK_RUN": run])
        #expect(check.termination == .exited(1), "\(check.stdout)\(check.stderr)")
        #expect(Self.lines(check, "FAIL handshake").contains { $0.contains("was killed by signal 9") }, "\(check.stdout)")
        #expect(ContinuousClock.now - start < .seconds(30))
    }

    @Test("a line over 16 MiB is a violation")
    func hugeLine() async throws {
        let run = try await Self.check(
            ["--kind", "test", "--load-timeout", "1"], ["python3", TestFiles.fixture("misbehaving-plugin.py"), "huge-line", "0"],
            timeout: .seconds(60))
        #expect(run.termination == .exited(1))
        #expect(run.stdout.contains("bytes, not kept"), "\(run.stdout)")
    }

    // MARK: The Python example in a real run

    @Test("a configuration using the Python plugin runs with --once and gives its content")
    func pythonRun() async throws {
        let config = """
            version: 1
            sources:
              memory: { kind: sysmetric, metric: memory }
              disk: { kind: sysmetric, metric: disk, path: / }
            plugins:
              sysmetric: { command: [python3, \(TestFiles.yamlQuoted(Self.sysmetrics))] }
            """
        try await HammockProcess.withRunning(config: config, arguments: ["--once"]) { hammock in
            let termination = try await hammock.waitForExit(timeout: .seconds(15))
            #expect(termination == .exited(0), "\(hammock.stderrText)")
            let memory = try #require(hammock.lines.last { $0.id == "memory" && $0.event == "newData" })
            let total = memory[pointer: "/state/content/totalBytes"]?.numberValue?.intValue ?? 0
            #expect(total > 0, "\(memory)")
            let disk = try #require(hammock.lines.last { $0.id == "disk" && $0.event == "newData" })
            #expect(disk[pointer: "/state/content/path"] == "/", "\(disk)")
            #expect(hammock.lines.last?.type == "bye")
        }
    }

    @Test("the Python plugin's option problems are reported at their YAML line and column")
    func pythonValidation() async throws {
        let directory = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            version: 1
            sources:
              cpu:
                kind: sysmetric
                metric: gpu
                wacth: 1s
            plugins:
              sysmetric: { command: [python3, \(TestFiles.yamlQuoted(Self.sysmetrics))] }
            """, in: directory)
        let check = try await HammockProcess.execute(["check", path])
        #expect(check.termination == .exited(2), "\(check.stdout)\(check.stderr)")
        let output = check.stdout + check.stderr
        #expect(output.contains(path + ":5:5: "), "the bad metric at 5:5: \(output)")
        #expect(output.contains(path + ":6:5: ") && output.contains("did you mean \"watch\""), "the unknown key at 6:5: \(output)")
    }
}
