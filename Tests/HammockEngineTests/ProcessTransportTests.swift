import Glibc
import HammockSystem
import Synchronization
import Testing

@testable import HammockPluginHost

/// `ProcessTransport` with real guards and plugins: how a run ends when what its plugin left holds the
/// pipes, and when the run is cancelled.
@Suite(.timeLimit(.minutes(1)))
struct ProcessTransportTests {
    @Test("a guard killed while a process its plugin left (setsid) holds the pipes: the run ends at once, with the line written before")
    func escapedHolderDoesNotHideTheGuardsEnd() async throws {
        // The plugin leaves a sleeper in a session of its own (which the guard's group kill does not reach),
        // writes a line without its newline, and kills its guard.
        let transport = ProcessTransport(
            command: ["/bin/sh", "-c", "setsid sleep 30 & printf 'left %s' $!; kill -9 $PPID; sleep 30"],
            reapsOrphans: false
        ) { _ in }
        let lines = Mutex<[String]>([])
        let start = ContinuousClock.now
        let exit = await transport.run { pieces in
            for case .line(let bytes) in pieces { lines.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
        }
        let elapsed = ContinuousClock.now - start
        let received = lines.withLock { $0 }
        for line in received where line.hasPrefix("left ") {
            // It comes to this process when the tests made it a subreaper.
            if let pid = pid_t(line.dropFirst(5)), kill(pid, SIGKILL) == 0 { reapChild(pid, within: .seconds(1)) }
        }
        #expect(exit == .killed(signal: SIGKILL))
        #expect(received.count == 1 && received.first?.hasPrefix("left ") == true)
        // Without the guard's end, the run would last as long as the sleeper holds the pipes: 30 s.
        #expect(elapsed < .seconds(10))
    }

    @Test("a cancelled run ends its plugin, and returns once the guard has ended")
    func cancellingARunEndsThePlugin() async throws {
        // The plugin says it runs, so the guard has taken its signals: a SIGUSR1 that came before would end
        // the guard by its default action (a start-up race of the test, not of the cancellation).
        let transport = ProcessTransport(command: ["/bin/sh", "-c", "echo running; exec sleep 30"], reapsOrphans: false) { _ in }
        let (running, saidRunning) = AsyncStream.makeStream(of: Void.self)
        let run = Task {
            let exit = await transport.run { pieces in
                for case .line(let bytes) in pieces where bytes.elementsEqual("running".utf8) { saidRunning.yield() }
            }
            saidRunning.finish()  // a plugin that ended without saying so fails the test below, not hangs it
            return exit
        }
        var said = running.makeAsyncIterator()
        let saidIt = await said.next() != nil
        try #require(saidIt, "the plugin ended without saying it runs")
        let start = ContinuousClock.now
        run.cancel()
        let exit = await run.value
        // The guard ends its plugin and exits as killed by SIGKILL (`endGuardedPlugin`).
        #expect(exit == .killed(signal: SIGKILL))
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    @Test("the orphan sweep spares a child that started after a spawn in flight began, a zombie too: it may be that spawn's guard")
    func sweepSparesASpawnInFlight() {
        let me: pid_t = 100
        let zombie = ProcessStat(state: "Z", parent: me, group: 200, startTime: 5_000)
        let running = ProcessStat(state: "S", parent: me, group: 200, startTime: 5_000)
        let inFlight: (guards: Set<pid_t>, oldestSpawnStart: UInt64?) = ([], 5_000)
        #expect(OrphanReaper.verdict(on: 200, zombie, me: me, plugins: inFlight) == .spare)
        #expect(OrphanReaper.verdict(on: 200, running, me: me, plugins: inFlight) == .spare)
        // Started before the spawn began, or with no spawn in flight: an orphan.
        #expect(OrphanReaper.verdict(on: 200, zombie, me: me, plugins: ([], 6_000)) == .reap)
        #expect(OrphanReaper.verdict(on: 200, zombie, me: me, plugins: ([], nil)) == .reap)
        #expect(OrphanReaper.verdict(on: 200, running, me: me, plugins: ([], nil)) == .kill)
        // A live guard, or another's child: never touched.
        #expect(OrphanReaper.verdict(on: 200, running, me: me, plugins: ([200], nil)) == .spare)
        #expect(OrphanReaper.verdict(on: 200, zombie, me: me, plugins: ([200], nil)) == .spare)
        let strangers = ProcessStat(state: "Z", parent: 1, group: 200, startTime: 5_000)
        #expect(OrphanReaper.verdict(on: 200, strangers, me: me, plugins: ([], nil)) == .spare)
    }
}
