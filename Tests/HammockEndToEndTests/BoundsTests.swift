import Foundation
import HammockJSON
import HammockTestSupport
import Synchronization
import Testing

/// What a consumer cannot do to hammock by what it does not read or by what it writes: a stderr never read,
/// a flood of control lines, a slow reader of the output (`OutputBoundsTests`). Each test runs the attack
/// against the real binary and checks the engine goes on (or ends) as promised.
///
/// Serialized: floods use the machine's cores, and memory figures mean more one at a time.
@Suite("Bounds: stderr never read, control floods", .serialized)
struct BoundsTests {
    /// A plugin of the kind named by its argument that answers every load with `{"n": count}` and, from its
    /// start, writes lines to stderr as fast as it can (a few MB a second) until it ends.
    static let noisyPlugin = #"""
        import json, os, sys, threading, time

        def noise():
            line = "noise " + "x" * 150 + "\n"
            while True:
                try:
                    sys.stderr.write(line * 50)
                    sys.stderr.flush()
                except BrokenPipeError:
                    os._exit(0)
                time.sleep(0.002)

        threading.Thread(target=noise, daemon=True).start()
        loads = 0
        for text in sys.stdin:
            message = json.loads(text)
            op = message.get("op")
            if op == "hello":
                answer = {"type": "hello", "protocol": 1, "kinds": [sys.argv[1]], "version": "0.0.1"}
            elif op == "configure":
                answer = {"type": "configured", "source": message["source"]}
            elif op == "load":
                loads += 1
                answer = {"type": "newData", "source": message["source"], "id": message["id"], "content": {"n": loads}}
            elif op == "shutdown":
                break
            else:
                continue
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
        os._exit(0)
        """#

    /// One noisy plugin more than the cores: whatever once wrote a plugin's stderr lines with a blocking
    /// write from the Swift concurrency pool (one thread a core) would have every thread of it stuck.
    static let noisyKinds = min(8, max(3, ProcessInfo.processInfo.activeProcessorCount + 1))

    /// Runs `body` with hammock running a fake source `tick` (every 100 ms) and `noisyKinds` noisy sources,
    /// each of a kind of its own, debug logs on, and stderr left unread.
    static func withNoisyEngine(_ body: (HammockProcess) async throws -> Void) async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let plugin = folder + "/noisy.py"
        try Data(noisyPlugin.utf8).write(to: URL(fileURLWithPath: plugin))
        var config = "version: 1\nsources:\n  tick: { kind: fake, content: 1, refresh: 100ms }\n"
        for index in 0..<noisyKinds { config += "  noise\(index): { kind: noisy\(index), refresh: 300ms }\n" }
        config += "plugins:\n"
        for index in 0..<noisyKinds {
            config += "  noisy\(index): { command: [python3, \(TestFiles.yamlQuoted(plugin)), noisy\(index)] }\n"
        }
        try await HammockProcess.withRunning(config: config, arguments: ["--log-level", "debug"], readingStderr: false) {
            hammock in
            try await hammock.waitUntil("every noisy source has data", timeout: .seconds(20)) { lines in
                Set(lines.filter { $0.event == "newData" }.compactMap(\.id)).count == noisyKinds + 1
            }
            // The plugin writes without pause, so a pipe that stays as it is takes no more: it is full, and
            // every further write to stderr would block.
            try await Self.waitUntilFull("stderr", timeout: .seconds(20)) { hammock.unreadStderrBytes }
            try await body(hammock)
        }
    }

    /// Waits until the pipe that `unread` measures holds at least `minimum` bytes that stay unread and unchanged
    /// for 300 ms while hammock has more to write: hammock is waiting for room. (How many bytes make a full
    /// pipe depends on how the writes fell into its pages, so the amount alone does not tell.)
    static func waitUntilFull(
        _ name: String, minimum: Int = 16 * 1024, timeout: Duration, sourceLocation: SourceLocation = #_sourceLocation,
        _ unread: () -> Int
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        var last = -1
        var since = ContinuousClock.now
        while true {
            let now = unread()
            if now != last {
                last = now
                since = .now
            } else if now >= minimum && ContinuousClock.now - since >= .milliseconds(300) {
                return
            }
            if ContinuousClock.now >= deadline {
                throw HammockHarnessError(
                    message: "\(name)'s pipe never filled within \(timeout) (\(now) bytes unread)", sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test("with stderr never read and a plugin flooding it, stdout keeps flowing and SIGTERM gives bye and exit 0")
    func stderrNeverRead() async throws {
        try await Self.withNoisyEngine { hammock in
            let mark = hammock.lineCount
            try await hammock.waitUntil("tick and noise refreshed again with stderr full", timeout: .seconds(20)) { lines in
                let since = lines[mark...]
                return since.filter { $0.id == "tick" && $0.event == "newData" }.count >= 10
                    && since.filter { $0.id == "noise0" && $0.event == "newData" }.count >= 3
            }
            let stopping = ContinuousClock.now
            hammock.signal(SIGTERM)
            let bye = try await hammock.waitFor(type: "bye", timeout: .seconds(10))
            #expect(bye["reason"] == "signal")
            let termination = try await hammock.waitForExit(timeout: .seconds(10))
            let took = ContinuousClock.now - stopping
            print("stderr never read: \(hammock.lineCount - mark) stdout lines while it was full; exit \(took) after SIGTERM")
            #expect(termination == .exited(0))
            #expect(took < .seconds(5), "SIGTERM to exit took \(took)")
        }
    }

    @Test("lines that stderr could not take are counted and said in one line once it is read again")
    func droppedStderrLinesAreReported() async throws {
        try await Self.withNoisyEngine { hammock in
            hammock.resumeReadingStderr()
            try await hammock.waitUntil("stderr reports the lines it dropped", timeout: .seconds(20)) { _ in
                hammock.stderrText.contains("lines of log were dropped because stderr was not read")
            }
            let notice = hammock.stderrText.split(separator: "\n").first { $0.contains("were dropped because stderr") }
            print("stderr, once read again: \(notice ?? "")")
            #expect(notice?.hasPrefix("hammock: warning: ") == true, "\(notice ?? "")")
            // Whole lines only, even around what was dropped.
            let lines = hammock.stderrText.split(separator: "\n")
            #expect(lines.dropLast().allSatisfy { $0.hasPrefix("noisy") && $0.contains(": noise x") || $0.hasPrefix("hammock: ") })
        }
    }

    // MARK: Control floods

    /// Writes `chunk` (whole control lines) to hammock's stdin again and again on a thread of its own, for
    /// `duration` or until hammock stops reading or `stop()` is called.
    final class Flood: Sendable {
        private struct State {
            var stopped = false
            var bytes = 0
            var ended = false
        }
        private let state = Mutex(State())

        init(_ hammock: HammockProcess, chunk: [UInt8], for duration: Duration) {
            let deadline = ContinuousClock.now + duration
            let thread = Thread { [self] in
                while !state.withLock({ $0.stopped }) && ContinuousClock.now < deadline {
                    guard hammock.send(bytes: chunk) else { break }
                    state.withLock { $0.bytes += chunk.count }
                }
                state.withLock { $0.ended = true }
            }
            thread.start()
        }

        func stop() { state.withLock { $0.stopped = true } }
        var bytes: Int { state.withLock { $0.bytes } }
        var hasEnded: Bool { state.withLock { $0.ended } }

        func waitUntilEnded() async throws {
            while !hasEnded { try await Task.sleep(for: .milliseconds(20)) }
        }
    }

    /// Samples hammock's peak resident memory and the `sleep` commands below it, every 50 ms, on a thread.
    final class Sampler: Sendable {
        private struct Seen {
            var stopped = false
            var mostSleeps = 0
        }
        private let seen = Mutex(Seen())

        init(_ hammock: HammockProcess) {
            let thread = Thread { [self] in
                while !seen.withLock({ $0.stopped }) {
                    let sleeps = ProcessTable.descendants(of: hammock.pid).filter { $0.command == "sleep" && $0.state != "Z" }.count
                    seen.withLock { $0.mostSleeps = max($0.mostSleeps, sleeps) }
                    usleep(50_000)
                }
            }
            thread.start()
        }

        func stop() { seen.withLock { $0.stopped = true } }
        var mostSleeps: Int { seen.withLock { $0.mostSleeps } }
    }

    /// The most resident memory the process has used so far (`VmHWM`), in KiB.
    static func peakResidentKiB(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }

    /// Memory a flood may add to what hammock used before it, whatever its length: the control mailbox
    /// (8 MiB at most), the lines waiting for stdout, the allocator's slack. Without bounds, the flood of
    /// these tests grows hammock by hundreds of MiB.
    static let floodGrowthLimitKiB = 96 * 1024

    /// Floods hammock with `line` for `duration`, then sends SIGTERM while the flood goes on; checks that
    /// memory stayed bounded and that hammock said bye and exited 0 soon after. Returns the sampler.
    static func flood(
        _ hammock: HammockProcess, with line: String, for duration: Duration, name: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Sampler {
        // Steady state first: the memory used so far is the baseline of this very run.
        _ = try await hammock.linesUntilQuiet(quiet: .milliseconds(300), timeout: .seconds(3))
        let baseline = try #require(peakResidentKiB(hammock.pid), sourceLocation: sourceLocation)
        let sampler = Sampler(hammock)
        let chunk = Array(String(repeating: line + "\n", count: max(1, 65536 / (line.utf8.count + 1))).utf8)
        let started = ContinuousClock.now
        let flood = Flood(hammock, chunk: chunk, for: .seconds(600))
        defer { flood.stop() }
        try await Task.sleep(for: duration)
        let peak = try #require(peakResidentKiB(hammock.pid), "hammock is gone", sourceLocation: sourceLocation)
        let sent = flood.bytes
        let elapsed = (ContinuousClock.now - started).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18

        // The flood goes on: the stop must not wait behind it.
        let stopping = ContinuousClock.now
        hammock.signal(SIGTERM)
        let termination = try await hammock.waitForExit(timeout: .seconds(60), sourceLocation: sourceLocation)
        let took = ContinuousClock.now - stopping
        sampler.stop()
        flood.stop()
        let lines = sent / (line.utf8.count + 1)
        print(
            """
            \(name) flood: \(lines) lines (\(sent / 1024) KiB) in \(seconds) s; peak RSS \(peak / 1024) MiB against \
            \(baseline / 1024) MiB before (+\((peak - baseline) / 1024) MiB); exit \(took) after SIGTERM; \
            at most \(sampler.mostSleeps) sleep commands at once
            """)
        #expect(termination == .exited(0), sourceLocation: sourceLocation)
        #expect(took < .seconds(5), "SIGTERM to exit took \(took) under the \(name) flood", sourceLocation: sourceLocation)
        #expect(
            peak - baseline < floodGrowthLimitKiB,
            "peak RSS \(peak) KiB against \(baseline) KiB before the \(name) flood", sourceLocation: sourceLocation)
        #expect(hammock.lines.last?.type == "bye", "bye is the last line", sourceLocation: sourceLocation)
        return sampler
    }

    @Test("an override flood keeps hammock's memory bounded, shows the newest content, and SIGTERM ends it at once")
    func overrideFlood() async throws {
        let config = """
            version: 1
            sources:
              a: { kind: fake, content: 0 }
              tick: { kind: fake, content: 1, refresh: 200ms }
            """
        let padding = String(repeating: "x", count: 1000)
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitFor(type: "source", id: "a") { $0.event == "newData" }
            _ = try await Self.flood(
                hammock, with: #"{"op":"override","source":"a","content":{"pad":"\#(padding)"}}"#,
                for: .seconds(4), name: "override")
            #expect(hammock.lines.contains { $0.origin == "override" && $0[pointer: "/state/content/pad"]?.stringValue == padding })
        }
    }

    @Test("a load flood for a loading source runs one command at a time, keeps memory bounded, and SIGTERM ends it at once")
    func loadFlood() async throws {
        let config = """
            version: 1
            sources:
              slow: { kind: shell, command: [sleep, "30"], timeout: 60s }
              tick: { kind: fake, content: 1, refresh: 200ms }
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitFor(type: "source", id: "slow") { $0.event == "requested" }
            let started = try await ProcessTable.eventually(within: .seconds(10)) {
                ProcessTable.descendants(of: hammock.pid).contains { $0.command == "sleep" }
            }
            #expect(started, "the first load's command runs")
            let sampler = try await Self.flood(
                hammock, with: #"{"op":"load","source":"slow"}"#, for: .seconds(4), name: "load")
            // The command in flight goes on; the loads asked for meanwhile are one follow-up, started when
            // it ends. Without that rule each line started a `sleep` of its own.
            #expect(sampler.mostSleeps == 1, "\(sampler.mostSleeps) sleep commands ran at once for one source")
        }
    }

    // MARK: The output

    /// Sources whose `newData` lines are longer than the pipe's atomic write (4 KiB), some longer than the pipe
    /// (64 KiB), about 1.3 MB in all.
    static func largeSources(_ count: Int, size: (Int) -> Int, refresh: String? = nil) -> String {
        var yaml = "version: 1\nsources:\n"
        for index in 0..<count {
            let text = String(repeating: String(UnicodeScalar(UInt8(97 + index % 26))), count: size(index))
            yaml += "  s\(index): { kind: fake, content: { i: \(index), text: \"\(text)\" }\(refresh.map { ", refresh: \($0)" } ?? "") }\n"
        }
        return yaml
    }
}

/// Slow readers of the output: a `--once` consumer that reads late or leaves, and a stop while nobody reads.
///
/// Apart from `BoundsTests` and not serialized: these attack no core (the reader mostly waits), so they run
/// beside the floods rather than one after another behind them.
@Suite("Bounds: slow readers of the output")
struct OutputBoundsTests {
    @Test("--once with a reader that starts reading after 5 s gets every line whole, bye last, and exit 0")
    func onceWithASlowReader() async throws {
        let config = BoundsTests.largeSources(30) { index in index % 10 == 0 ? 100_000 : 40_000 }
        try await HammockProcess.withRunning(config: config, arguments: ["--once"], readingStdout: false) { hammock in
            // The attack itself: a consumer that starts reading late, long after --once is done.
            try await Task.sleep(for: .seconds(5))
            hammock.resumeReading()
            let bye = try await hammock.waitFor(type: "bye", timeout: .seconds(20))
            #expect(bye["reason"] == "once")
            #expect(bye["failed"] == [])
            #expect(try await hammock.waitForExit(timeout: .seconds(10)) == .exited(0))
            let lines = hammock.lines
            #expect(lines.last?.type == "bye", "bye is the last line")
            let loaded = Set(lines.filter { $0.event == "newData" }.compactMap(\.id))
            #expect(loaded.count == 30, "every source's content reached the consumer: \(loaded.count) of 30")
            let bytes = lines.reduce(0) { $0 + $1.text.utf8.count + 1 }
            print("--once with a late reader: \(lines.count) lines, \(bytes / 1024) KiB, all whole")
        }
    }

    @Test("--once whose consumer closes stdout before reading it exits 1 and says why on stderr")
    func onceWithAConsumerThatLeaves() async throws {
        let config = BoundsTests.largeSources(10) { _ in 40_000 }
        try await HammockProcess.withRunning(config: config, arguments: ["--once"], readingStdout: false) { hammock in
            await hammock.closeStdout()
            let termination = try await hammock.waitForExit(timeout: .seconds(10))
            #expect(termination == .exited(1))
            #expect(hammock.stderrText.contains("stdout was closed before --once"), "\(hammock.stderrText)")
        }
    }

    /// A shell's `out=$(hammock run --once …)` reads only once hammock has exited. The whole output fits in
    /// the pipe, but a line over 4 KiB used to wait for an empty pipe, which never came: hammock ran on past
    /// its deadline for ever.
    @Test("--once --deadline 2s whose consumer reads only after the exit: lines over 4 KiB that fit in the pipe go in, and it exits 0 in time")
    func onceWithAReaderAfterTheExit() async throws {
        let config = BoundsTests.largeSources(2) { _ in 20_000 }
        try await HammockProcess.withRunning(config: config, arguments: ["--once", "--deadline", "2s"], readingStdout: false) { hammock in
            let termination = try await hammock.waitForExit(timeout: .seconds(20))
            // From the launch, not from before `withRunning`, which may wait for a slot among the suite's runs.
            let took = ContinuousClock.now - hammock.launchedAt
            #expect(termination == .exited(0), "\(hammock.stderrText)")
            #expect(took < .seconds(8), "--deadline 2s, and 2 s to write: \(took)")
            hammock.resumeReading()
            try await hammock.waitUntilStdoutEnds()
            let lines = hammock.lines
            #expect(hammock.malformedLines.isEmpty)
            #expect(lines.last?.type == "bye" && lines.last?["reason"] == "once", "\(lines.last?.text.prefix(200) ?? "")")
            #expect(Set(lines.filter { $0.event == "newData" }.compactMap(\.id)) == ["s0", "s1"])
        }
    }

    @Test("--once --deadline 2s whose consumer never reads exits 1 soon after its deadline, saying why")
    func onceWithAReaderThatNeverReads() async throws {
        // 1.2 MB of output, far more than a pipe holds.
        let config = BoundsTests.largeSources(30) { _ in 40_000 }
        try await HammockProcess.withRunning(config: config, arguments: ["--once", "--deadline", "2s"], readingStdout: false) { hammock in
            let termination = try await hammock.waitForExit(timeout: .seconds(30))
            let took = ContinuousClock.now - hammock.launchedAt
            #expect(termination == .exited(1))
            #expect(took < .seconds(8), "--deadline 2s, and 2 s to write: \(took)")
            #expect(hammock.stderrText.contains("stdout was not read before --once's deadline"), "\(hammock.stderrText)")
            hammock.resumeReading()
            try await hammock.waitUntilStdoutEnds()
            #expect(hammock.malformedLines.isEmpty, "a line was cut: \(hammock.malformedLines.map { $0.prefix(80) })")
        }
    }

    /// docs/protocol.md: on a stop hammock gives a consumer that does not read 2 s; a second signal during
    /// that time ends the wait at once.
    @Test("a second SIGTERM during the drain for a consumer that does not read ends it at once")
    func aSecondSignalEndsTheDrain() async throws {
        let config = BoundsTests.largeSources(6, size: { _ in 20_000 }, refresh: "50ms")
        try await HammockProcess.withRunning(config: config, arguments: ["--log-level", "info"]) { hammock in
            try await hammock.waitUntil("every source has data") { lines in
                Set(lines.filter { $0.event == "newData" }.compactMap(\.id)).count == 6
            }
            hammock.pauseReading()
            try await BoundsTests.waitUntilFull("stdout", minimum: 1, timeout: .seconds(20)) { hammock.unreadStdoutBytes }
            hammock.signal(SIGTERM)
            // The plugins are down and the drain has begun.
            try await hammock.waitForStderr(containing: "stopping", timeout: .seconds(10))
            let second = ContinuousClock.now
            hammock.signal(SIGTERM)
            let termination = try await hammock.waitForExit(timeout: .seconds(15))
            let took = ContinuousClock.now - second
            #expect(termination == .exited(0))
            #expect(took < .milliseconds(1200), "the drain alone lasts 2 s: \(took)")
            hammock.resumeReading()
            try await hammock.waitUntilStdoutEnds()
            #expect(hammock.malformedLines.isEmpty)
        }
    }

    @Test("stopped while its consumer does not read, hammock exits within the drain time and leaves only whole lines")
    func stopWithAnUnreadPipeCutsNoLine() async throws {
        let config = BoundsTests.largeSources(6, size: { _ in 20_000 }, refresh: "50ms")
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitUntil("every source has data") { lines in
                Set(lines.filter { $0.event == "newData" }.compactMap(\.id)).count == 6
            }
            hammock.pauseReading()
            // Lines over 4 KiB go out only into an empty pipe, so what waits may be small.
            try await BoundsTests.waitUntilFull("stdout", minimum: 1, timeout: .seconds(20)) { hammock.unreadStdoutBytes }
            let stopping = ContinuousClock.now
            hammock.signal(SIGTERM)
            let termination = try await hammock.waitForExit(timeout: .seconds(15))
            let took = ContinuousClock.now - stopping
            #expect(termination == .exited(0))
            #expect(took < .seconds(6), "the drain time is 2 s: \(took)")
            hammock.resumeReading()
            try await hammock.waitUntilStdoutEnds()
            print("stopped with stdout unread: exit \(took) after SIGTERM; \(hammock.lineCount) lines read in all, every one whole")
            #expect(hammock.malformedLines.isEmpty, "a line was cut: \(hammock.malformedLines.map { $0.prefix(80) })")
            #expect(hammock.lineCount > 0)
        }
    }
}

/// What the machine cannot give: a shell plugin out of file descriptors.
@Suite("Bounds: a plugin out of descriptors")
struct DescriptorBoundsTests {
    /// 30 commands that hold their pipes for 2 s, all started at once under a limit of 40 descriptors (each
    /// running command holds three in the plugin): those that cannot start fail with the reason, and the
    /// plugin goes on, and keeps none of what the failed starts opened. A probe polled every 300 ms answers
    /// once the others have ended.
    @Test("commands that cannot get descriptors fail saying so; the plugin goes on and loads once some are free")
    func outOfDescriptors() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var yaml = "sources:\n  probe: { kind: shell, command: [echo, hi], refresh: 300ms }\n"
        for n in 0..<30 { yaml += "  hog\(n): { kind: shell, command: [sleep, '2'], timeout: 10s, retry: off }\n" }
        let config = try HammockProcess.writeConfig(yaml, in: folder)
        let hammock = try HammockProcess.launch(
            program: "/bin/sh", arguments: ["-c", #"ulimit -n 40 && exec "$0" run "$1""#, try HammockProcess.executablePath(), config],
            environment: ["HAMMOCK_SHELL_CONCURRENCY": "64"])
        defer { Task { await hammock.stop() } }

        typealias State = (id: String, event: String, message: String, content: JSONValue?)
        func states(_ lines: [String]) -> [State] {
            lines.compactMap { text -> State? in
                guard let line = try? JSONValue(parsing: text), let id = line["id"]?.stringValue,
                      let event = line["event"]?.stringValue else { return nil }
                return (id, event, line["state"]?["latestError"]?["message"]?.stringValue ?? "", line["state"]?["content"])
            }
        }
        let exhausted = "could not run sleep: Too many open files"
        let lines = try await hammock.waitForStdoutLines(
            "a hog that started ends, and the probe answers after a command could not start", timeout: .seconds(30)
        ) { lines in
            let seen = states(lines)
            guard let failed = seen.firstIndex(where: { $0.event == "error" && $0.message.hasPrefix("could not run") }) else { return false }
            return seen.contains { $0.id.hasPrefix("hog") && $0.event == "newData" }
                && seen[failed...].contains { $0.id == "probe" && $0.event == "newData" && $0.content == "hi" }
        }
        let seen = states(lines)
        let failures = seen.filter { $0.event == "error" }
        #expect(failures.allSatisfy { $0.message == exhausted || $0.id == "probe" && $0.message.hasPrefix("could not run echo") },
                "\(failures.map(\.message))")
        #expect(failures.contains { $0.id.hasPrefix("hog") }, "the limit was never reached: no hog failed")
        #expect(!hammock.stderrText.contains("plugin"), "the plugin was restarted: \(hammock.stderrText)")

        // Nothing a command opened is kept: once every hog has answered, the plugin holds what it holds at rest
        // (11 descriptors: stdio, its own pipes and threads' and the command watcher's) and a probe's three at
        // most. Leaving each command's pidfd open, for one, makes it over 20 by then.
        try await hammock.waitForStdoutLines("every hog has answered", timeout: .seconds(30)) { lines in
            Set(states(lines).filter { $0.id.hasPrefix("hog") && $0.event != "requested" }.map(\.id)).count == 30
        }
        let plugin = try #require(ProcessTable.descendants(of: hammock.pid).first { $0.command.hasPrefix("hammock-plugin") })
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(plugin.pid)/fd").count) ?? -1
        #expect(open > 0 && open <= 20, "the shell plugin holds \(open) descriptors")
    }
}

