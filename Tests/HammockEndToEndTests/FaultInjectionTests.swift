import Foundation
import HammockJSON
import Synchronization
import Testing

/// Plugins that fail in every way the fixture knows (Tests/Fixtures/misbehaving-plugin.py). For each: the
/// engine stays up, another source keeps updating, the affected source shows a clear error and keeps its
/// last content, hammock's memory stays bounded, and nothing is left running once hammock has exited.
///
/// Serialized: the flood and the 20 MB line use a core each, and RSS figures mean more one at a time.
@Suite("Fault injection, end to end", .serialized)
struct FaultInjectionTests {
    /// The bound on hammock's own resident memory, whatever its plugin does.
    static let rssBoundKiB = 200 * 1024

    /// Samples hammock's process tree and resident memory every 50 ms, in the background.
    final class Observer: Sendable {
        private struct Seen {
            var tree: [ProcessEntry] = []
            var peakKiB = 0
            var stopped = false
        }
        private let seen = Mutex(Seen())

        init(_ hammock: HammockProcess) {
            // A thread of its own, not a task: tests that block the cooperative pool's few threads while
            // they wait for a plugin must not starve the sampling, or a short-lived plugin goes unseen.
            let thread = Thread { [self] in
                while !seen.withLock({ $0.stopped }) {
                    let processes = ProcessTable.descendants(of: hammock.pid)
                    let resident = hammock.residentKiB() ?? 0
                    seen.withLock { seen in
                        for process in processes where !seen.tree.contains(process) { seen.tree.append(process) }
                        seen.peakKiB = max(seen.peakKiB, resident)
                    }
                    usleep(50_000)
                }
            }
            thread.start()
        }

        func stop() { seen.withLock { $0.stopped = true } }
        var tree: [ProcessEntry] { seen.withLock { $0.tree } }
        var peakKiB: Int { seen.withLock { $0.peakKiB } }
    }

    /// Runs hammock with source `t` served by the fixture in `mode` and a fake source `tick` refreshed every
    /// 200 ms; runs `body` (the mode's own checks, returning pids known to escape hammock), then checks what
    /// every mode must: the engine is up, `tick` keeps updating, and after SIGTERM hammock exits 0 with no
    /// process of its tree left and a bounded peak RSS. Returns how long hammock took to exit, and its stderr.
    @discardableResult
    static func run(
        mode: String, _ argument: Int? = nil, source: String = "t: { kind: test, refresh: 300ms, retry: 200ms }",
        environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation,
        _ body: (HammockProcess) async throws -> Set<Int32>
    ) async throws -> (took: Duration, stderr: String) {
        let fixture = TestFiles.fixture("misbehaving-plugin.py")
        let command = ["python3", TestFiles.yamlQuoted(fixture), mode] + (argument.map { [TestFiles.yamlQuoted("\($0)")] } ?? [])
        let config = """
            version: 1
            sources:
              \(source)
              tick: { kind: fake, content: 1, refresh: 200ms }
            plugins:
              test: { command: [\(command.joined(separator: ", "))] }
            """
        var observed: [ProcessEntry] = []
        defer {
            // Whatever the outcome, leave nothing behind (all of these are processes this test started).
            for process in observed where ProcessTable.isAlive(process) { kill(process.pid, SIGKILL) }
        }
        return try await HammockProcess.withRunning(config: config, environment: environment, sourceLocation: sourceLocation) {
            hammock in
            let observer = Observer(hammock)
            defer { observer.stop() }
            let escaped = try await body(hammock)

            #expect(hammock.isRunning, "the engine stays up", sourceLocation: sourceLocation)
            let mark = hammock.lineCount
            try await hammock.waitUntil("tick refreshed twice after the fault", timeout: .seconds(8), sourceLocation: sourceLocation) {
                lines in lines[mark...].filter { $0.id == "tick" && $0.event == "newData" }.count >= 2
            }

            let stopping = ContinuousClock.now
            hammock.signal(SIGTERM)
            let termination = try await hammock.waitForExit(timeout: .seconds(10), sourceLocation: sourceLocation)
            let took = ContinuousClock.now - stopping
            observer.stop()
            observed = observer.tree
            let tree = observed.filter { !escaped.contains($0.pid) }
            let allGone = try await ProcessTable.eventually(within: .seconds(5)) { !tree.contains(where: ProcessTable.isAlive) }
            #expect(allGone, "left behind: \(tree.filter(ProcessTable.isAlive))", sourceLocation: sourceLocation)
            #expect(!tree.isEmpty, "the plugin was seen in hammock's tree", sourceLocation: sourceLocation)
            #expect(termination == .exited(0), "\(termination); stderr: \(hammock.stderrText.suffix(2000))", sourceLocation: sourceLocation)

            let peak = observer.peakKiB
            print("fault mode \(mode): hammock's peak RSS \(peak / 1024) MiB (bound \(rssBoundKiB / 1024) MiB); exit \(took) after SIGTERM")
            #expect(peak > 0 && peak < rssBoundKiB, "peak RSS \(peak) KiB", sourceLocation: sourceLocation)
            return (took, hammock.stderrText)
        }
    }

    /// Waits for `t` to have data, then an error; checks the error keeps the latest content and says
    /// `says`. Returns the error line.
    @discardableResult
    static func expectErrorKeepingContent(
        _ hammock: HammockProcess, says: [String], timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> HammockLine {
        try await hammock.waitFor(type: "source", id: "t", sourceLocation: sourceLocation) { $0.event == "newData" }
        let error = try await hammock.waitFor(type: "source", id: "t", timeout: timeout, sourceLocation: sourceLocation) {
            $0.event == "error"
        }
        let before = hammock.lines.last { $0.id == "t" && $0.event == "newData" && ($0.seq ?? 0) < (error.seq ?? 0) }
        #expect(error.content == before?.content && error.content?.isNull == false, "keeps its content: \(error)", sourceLocation: sourceLocation)
        #expect(error[pointer: "/state/latestError/code"] == "pluginFailed", "\(error)", sourceLocation: sourceLocation)
        #expect(
            error.errorMessage.contains("test plugin") && says.contains { error.errorMessage.contains($0) },
            "a clear message (\(says)): \(error)", sourceLocation: sourceLocation)
        return error
    }

    @Test("crash-after 1: a plugin that exits after one answer")
    func crashAfter() async throws {
        try await Self.run(mode: "crash-after", 1) { hammock in
            try await Self.expectErrorKeepingContent(hammock, says: ["exited with status 4"])
            return []
        }
    }

    @Test("garbage: a line that is not JSON")
    func garbage() async throws {
        try await Self.run(mode: "garbage") { hammock in
            let error = try await hammock.waitFor(type: "source", id: "t") { $0.event == "error" }
            #expect(error.errorMessage.contains("wrote a line that is not protocol"), "\(error)")
            return []
        }
    }

    @Test("half-line 1: half a line, then exit")
    func halfLine() async throws {
        try await Self.run(mode: "half-line", 1) { hammock in
            try await Self.expectErrorKeepingContent(hammock, says: ["wrote a line that is not protocol", "exited with status 5"])
            return []
        }
    }

    @Test("huge-line 1: a line of 20 MB, over the 16 MiB limit, fails its load, not the engine")
    func hugeLine() async throws {
        // Skipping 20 MB takes the (debug) engine a few seconds of CPU.
        try await Self.run(mode: "huge-line", 1) { hammock in
            try await Self.expectErrorKeepingContent(hammock, says: ["over the limit of 16777216"], timeout: .seconds(30))
            return []
        }
    }

    @Test("flood: 100,000 pushes a second are coalesced per source, and what is shown is current")
    func flood() async throws {
        try await Self.run(mode: "flood", source: "t: { kind: test }") { hammock in
            try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" && $0.origin == "push" }
            // Let the flood run, then look at what reached stdout over two seconds.
            try await Task.sleep(for: .seconds(1))
            let mark = hammock.lineCount
            try await Task.sleep(for: .seconds(2))
            let pushes = hammock.lines(since: mark).filter { $0.id == "t" && $0.event == "newData" }
            let numbers = pushes.compactMap { $0[pointer: "/state/content/n"]?.numberValue?.intValue }
            let newest = try #require(pushes.last?[pointer: "/state/content/t"]?.numberValue?.doubleValue)
            let lag = Date().timeIntervalSince1970 - newest
            print("flood: \(pushes.count) pushes of t on stdout in 2 s, n from \(numbers.first ?? -1) to \(numbers.last ?? -1), newest written \(lag) s ago")
            #expect(pushes.count > 10, "\(pushes.count) pushes in 2 s")
            #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }, "newest first, in order: \(numbers.prefix(20))...")
            // A backlog (every push queued for the engine) would fall further behind each second; the
            // plugin wrote over 100,000 pushes in these 3 s.
            #expect(lag < 1, "what the engine shows was written \(lag) s ago: it is working through a backlog")
            #expect((numbers.last ?? 0) - (numbers.first ?? 0) > 1000, "they are the newest, not a backlog: \(numbers.first ?? -1)...\(numbers.last ?? -1)")
            return []
        }
    }

    @Test("silent-loads: loads never answered time out")
    func silentLoads() async throws {
        try await Self.run(mode: "silent-loads", source: "t: { kind: test, timeout: 1s, retry: 200ms }") { hammock in
            // No content to keep: the plugin never answers a load. The load fails after its timeout.
            let error = try await hammock.waitFor(type: "source", id: "t", timeout: .seconds(8)) { $0.event == "error" }
            #expect(error.errorMessage.contains("no answer from the \"test\" loader within 1s"), "\(error)")
            return []
        }
    }

    @Test("ignore-shutdown: a plugin slow to shut down is killed after the 2 s grace")
    func ignoreShutdown() async throws {
        let (took, stderr) = try await Self.run(mode: "ignore-shutdown") { hammock in
            try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" }
            return []
        }
        #expect(took >= .milliseconds(1500) && took < .seconds(6), "hammock waits its grace, then kills: \(took)")
        #expect(stderr.contains("did not exit within 2s of shutdown; killing it"), "\(stderr)")
    }

    @Test("leave-child 1: a plugin that leaves a child in its own session, then crashes")
    func leaveChild() async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pidFile = folder + "/child.pid"
        var child: Int32?
        defer { if let child, ProcessTable.isAlive(pid: child) { kill(child, SIGKILL) } }
        try await Self.run(mode: "leave-child", 1, environment: ["HAMMOCK_TEST_CHILD_PID_FILE": pidFile]) { hammock in
            try await Self.expectErrorKeepingContent(hammock, says: ["exited with status 6"])
            let text = try String(contentsOfFile: pidFile, encoding: .utf8)
            child = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
            // What hammock guarantees is checked by `run`: every process that is still in its tree (the
            // plugins, their process groups) ends. The escaped child is not in its tree any more.
            return Set([child].compactMap { $0 })
        }
        let escaped = try #require(child)
        let gone = try await ProcessTable.eventually(within: .seconds(2)) { !ProcessTable.isAlive(pid: escaped) }
        // hammock is a child subreaper: the grandchild is re-parented to hammock when its plugin dies, and
        // hammock ends it, session or not.
        #expect(gone, "sleep \(escaped), left by the crashed plugin, still runs after hammock exited")
    }
}
