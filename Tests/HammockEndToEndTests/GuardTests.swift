import Foundation
import HammockTestSupport
import Testing

/// `hammock-guard` run directly, as hammock runs it: the windows of its start-up that random SIGKILL trials
/// cannot reach (microseconds wide) are opened by the debug build's seam, `HAMMOCK_TEST_GUARD_STOP_AT`, which
/// makes the guard stop itself (SIGSTOP) at that moment; the test kills the guard's parent (the "engine", a
/// shell here) meanwhile, then continues the guard. And its sweep of orphans, every 2 s.
@Suite("hammock-guard, run directly")
struct GuardTests {
    /// A subreaper of the test's own between the test runner and the stand-in engine, which only reaps: the
    /// test runner is a subreaper too once an in-process engine test has run, and its orphan sweep would end a
    /// guard handed to it before this test could see what the guard does by itself.
    static let reapingParent = """
        import ctypes, os, subprocess, sys
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        subprocess.Popen(sys.argv[1:])
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
        """

    /// Starts a shell that starts the guard as hammock does (HAMMOCK_ENGINE_PID its own pid) over `sleep 300`,
    /// below `reapingParent`, the guard stopping itself at `moment`; kills the shell while the guard is
    /// stopped, continues the guard, and checks that the guard exits at once and never started its plugin.
    func engineDiesWhileTheGuardIsStopped(at moment: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let guardPath = try HammockProcess.productPath("hammock-guard")
        let run = UUID().uuidString
        let marker = "HAMMOCK_GUARD_TEST_RUN=\(run)"
        defer {
            // Whatever the outcome, nothing this test started stays (a stopped guard dies of SIGKILL too).
            for process in ProcessTable.processes(withEnvironment: marker) { kill(process.pid, SIGKILL) }
        }
        let reaper = try HammockProcess.launch(
            program: "/usr/bin/python3",
            arguments: ["-c", Self.reapingParent, "/bin/sh", "-c", #"HAMMOCK_ENGINE_PID=$$ "$0" /bin/sleep sleep 300 & wait"#, guardPath],
            environment: ["HAMMOCK_TEST_GUARD_STOP_AT": moment, "HAMMOCK_GUARD_TEST_RUN": run])
        // Stopped at the end; if a check throws first, the harness's deinit kills it.

        var stopped: ProcessEntry?
        let found = try await ProcessTable.eventually(within: .seconds(10), every: .milliseconds(5)) {
            stopped = ProcessTable.descendants(of: reaper.pid).first { $0.command == "hammock-guard" && $0.state == "T" }
            return stopped != nil
        }
        let guardProcess = try #require(
            found ? stopped : nil, "the guard stopped itself at \(moment): \(ProcessTable.descendants(of: reaper.pid))",
            sourceLocation: sourceLocation)
        let engine = guardProcess.parent
        #expect(engine != reaper.pid, "the guard's parent is the stand-in engine", sourceLocation: sourceLocation)

        // The engine dies inside the window: the guard is handed to another parent before it looks.
        kill(engine, SIGKILL)
        let handedOver = try await ProcessTable.eventually(within: .seconds(5), every: .milliseconds(5)) {
            ProcessTable.entry(guardProcess.pid)?.parent == reaper.pid
        }
        #expect(handedOver, "the guard was not handed to the reaping parent: \(ProcessTable.entry(guardProcess.pid).map(String.init(describing:)) ?? "gone")", sourceLocation: sourceLocation)
        kill(guardProcess.pid, SIGCONT)

        let ended = try await ProcessTable.eventually(within: .seconds(5)) { !ProcessTable.isAlive(guardProcess) }
        let left = ProcessTable.processes(withEnvironment: marker).filter { $0.pid != reaper.pid }
        #expect(ended, "the guard runs on after its engine died at \(moment): \(left)", sourceLocation: sourceLocation)
        #expect(left.isEmpty, "left running: \(left)", sourceLocation: sourceLocation)
        await reaper.stop()
    }

    @Test("an engine that dies before the guard reads its parent: the guard sees another parent than HAMMOCK_ENGINE_PID and exits without starting its plugin")
    func engineDeadBeforeTheGuardLooks() async throws {
        try await engineDiesWhileTheGuardIsStopped(at: "start")
    }

    @Test("an engine that dies before the guard asks for its parent-death signal: the guard sees its parent changed and exits without starting its plugin")
    func engineDeadBeforeTheDeathSignal() async throws {
        try await engineDiesWhileTheGuardIsStopped(at: "death-signal")
    }

    @Test("an orphan that reaches the guard is ended by its next sweep, 2 s after the guard started; the plugin runs on")
    func orphansAreSweptEveryTwoSeconds() async throws {
        let guardPath = try HammockProcess.productPath("hammock-guard")
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { HammockProcess.removeTemporaryDirectory(folder) }
        let pidFile = folder + "/orphan.pid"
        let run = UUID().uuidString
        let marker = "HAMMOCK_GUARD_TEST_RUN=\(run)"
        defer {
            for process in ProcessTable.processes(withEnvironment: marker) { kill(process.pid, SIGKILL) }
        }
        // The plugin starts a shell that leaves `sleep 300` behind and exits: the sleep is an orphan, handed
        // to the guard (a subreaper). The plugin itself sleeps on.
        let script = "sh -c 'sleep 300 & echo $! > \"$0\"' '\(pidFile)'; exec sleep 300"
        let guardProcess = try HammockProcess.launch(
            program: guardPath, arguments: ["/bin/sh", "sh", "-c", script], environment: ["HAMMOCK_GUARD_TEST_RUN": run])

        var orphanPid: Int32 = 0
        let written = try await ProcessTable.eventually(within: .seconds(10), every: .milliseconds(5)) {
            let text = (try? String(contentsOfFile: pidFile, encoding: .utf8)) ?? ""
            orphanPid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            return orphanPid > 0
        }
        #expect(written, "the plugin's shell wrote its orphan's pid")
        guard let orphan = ProcessTable.entry(orphanPid) else {
            // A loaded machine read the file late, after the first sweep: it still cannot have come sooner.
            let sinceLaunch = ContinuousClock.now - guardProcess.launchedAt
            #expect(sinceLaunch >= .milliseconds(1900), "the orphan was gone \(sinceLaunch) after the guard's launch")
            #expect(guardProcess.isRunning, "the guard and its plugin run on")
            await guardProcess.stop()
            return
        }
        let seen = ContinuousClock.now
        let adopted = try await ProcessTable.eventually(within: .seconds(5), every: .milliseconds(5)) {
            ProcessTable.entry(orphanPid)?.parent == guardProcess.pid
        }
        #expect(adopted, "the orphan was handed to the guard: \(ProcessTable.entry(orphanPid).map(String.init(describing:)) ?? "gone")")

        let swept = try await ProcessTable.eventually(within: .seconds(6), every: .milliseconds(10)) { !ProcessTable.isAlive(orphan) }
        let sinceLaunch = ContinuousClock.now - guardProcess.launchedAt
        print("guard sweep: the orphan ended \(sinceLaunch) after the guard's launch, \(ContinuousClock.now - seen) after it was seen")
        #expect(swept, "the orphan still runs 6 s after it was seen")
        // The first sweep comes 2 s after the guard's start (which follows the launch): not at once. That it
        // comes at all is `swept`, within its 6 s; how soon after is not measured here: on a loaded machine the
        // test's own polls run seconds late (a CI run measured 8.8 s after the orphan was seen, the sweep itself
        // on time), and timing checks stay out of the suite.
        #expect(sinceLaunch >= .milliseconds(1900), "swept before the first 2 s had passed: \(sinceLaunch)")
        #expect(guardProcess.isRunning, "the guard and its plugin run on")
        let plugins = ProcessTable.descendants(of: guardProcess.pid).filter { ProcessTable.isAlive($0) }
        #expect(plugins.map(\.command) == ["sleep"], "only the plugin is left below the guard: \(plugins)")
        await guardProcess.stop()
    }
}
