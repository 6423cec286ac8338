import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// No plugin or command outlives the engine, however the engine ends.
@Suite("No orphans, end to end")
struct NoOrphanTests {
    enum Ending: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case sigterm = "SIGTERM"
        case sigkill = "SIGKILL"
        var testDescription: String { rawValue }
        var signal: Int32 { self == .sigterm ? SIGTERM : SIGKILL }
    }

    /// Shell commands in every form (a stream, a poll, an argv, each with a `setsid`'d child that leaves their
    /// process group and session) and a watched file.
    static func config(folder: String) throws -> String {
        let watchedPath = folder + "/watched.txt"
        try TestFiles.writeInPlace("hello\n", to: watchedPath)
        return """
            version: 1
            sources:
              streaming:
                kind: shell
                mode: stream
                script: "setsid sleep 300 & echo up; sleep 300; echo never"
              polling:
                kind: shell
                script: "setsid sleep 300 & sleep 300; echo never"
                timeout: 60s
              argv:
                kind: shell
                command: [sleep, "300"]
                timeout: 60s
              watched:
                kind: file
                path: \(TestFiles.yamlQuoted(watchedPath))
                watch: true
            """
    }

    /// Every process hammock started, found by a variable in its environment (set for hammock, inherited by
    /// all it starts however it detaches), must be gone within 5 s of hammock's end. One run at steady state,
    /// where the test first checks that every plugin and command runs, then runs ended at random moments of
    /// their first 1.5 s: start-up, plugin hand-shakes and first commands included.
    @Test("every process hammock started, setsid'd commands included, is gone within 5 s of its end, at steady state and at random moments from start-up on", arguments: Ending.allCases)
    func noOrphans(ending: Ending) async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let configPath = try HammockProcess.writeConfig(try Self.config(folder: folder), in: folder)
        for trial in 0..<4 {
            let run = UUID().uuidString
            let marker = "HAMMOCK_NO_ORPHAN_RUN=\(run)"
            defer {
                // Whatever the outcome, leave nothing behind (these are all processes this test started).
                for process in ProcessTable.processes(withEnvironment: marker) { kill(process.pid, SIGKILL) }
            }
            var killedAfter = Duration.zero
            try await HammockProcess.withRunning(configPath: configPath, environment: ["HAMMOCK_NO_ORPHAN_RUN": run]) { hammock in
                let started = ContinuousClock.now
                if trial == 0 {
                    try await hammock.waitUntil("the stream and the file have data") { lines in
                        ["streaming", "watched"].allSatisfy { id in lines.contains { $0.id == id && $0.event == "newData" } }
                    }
                    // Without these the test would prove nothing: both plugins, and a sleep per shell source
                    // plus the two setsid'd ones.
                    var live: [ProcessEntry] = []
                    let running = try await ProcessTable.eventually(within: .seconds(5)) {
                        live = ProcessTable.processes(withEnvironment: marker)
                        return live.filter { $0.command.hasPrefix("hammock-plugin") }.count == 2
                            && live.filter { $0.command == "sleep" }.count >= 5
                    }
                    #expect(running, "the shell and file plugins and five sleeps run: \(live)")
                } else {
                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...1500)))
                }
                killedAfter = ContinuousClock.now - started
                hammock.signal(ending.signal)
                let termination = try await hammock.waitForExit(timeout: .seconds(5))
                let allGone = try await ProcessTable.eventually(within: .seconds(5)) {
                    ProcessTable.processes(withEnvironment: marker).isEmpty
                }
                #expect(
                    allGone,
                    "trial \(trial), \(ending.rawValue) after \(killedAfter): still running 5 s after hammock's end: \(ProcessTable.processes(withEnvironment: marker))")
                switch ending {
                case .sigterm:
                    // A SIGTERM before hammock set up its handlers (its first milliseconds) ends it by default.
                    #expect(
                        termination == .exited(0) || (trial > 0 && termination == .signaled(SIGTERM)),
                        "trial \(trial) after \(killedAfter): \(termination); stderr: \(hammock.stderrText)")
                case .sigkill: #expect(termination == .signaled(SIGKILL))
                }
            }
        }
    }

    /// hammock running a streamed shell source whose script starts a setsid'd `sleep` beside its own: `body`
    /// gets hammock, the shell plugin's process (the guard's child), both sleeps once they run, and the
    /// marker in the environment of every process of the run, each of which is killed at the end.
    private func withTwoSleeps(
        _ body: (HammockProcess, ProcessEntry, [ProcessEntry], String) async throws -> Void
    ) async throws {
        let config = """
            version: 1
            sources:
              streaming:
                kind: shell
                mode: stream
                script: "setsid sleep 300 & echo up; sleep 300; echo never"
                retry: { initial: 200ms }
            """
        let run = UUID().uuidString
        let marker = "HAMMOCK_NO_ORPHAN_RUN=\(run)"
        defer {
            for process in ProcessTable.processes(withEnvironment: marker) { kill(process.pid, SIGKILL) }
        }
        try await HammockProcess.withRunning(config: config, environment: ["HAMMOCK_NO_ORPHAN_RUN": run]) { hammock in
            try await hammock.waitFor(type: "source", id: "streaming") { $0.event == "newData" }
            let plugin = try #require(
                ProcessTable.plugins(of: hammock.pid, named: "hammock-plugin-shell").first,
                "the shell plugin process (the guard's child, not the guard)")
            var commands: [ProcessEntry] = []
            let running = try await ProcessTable.eventually(within: .seconds(5)) {
                commands = ProcessTable.processes(withEnvironment: marker).filter { $0.command == "sleep" }
                return commands.count == 2
            }
            #expect(running, "the command's sleep and its setsid'd sleep run: \(commands)")
            try await body(hammock, plugin, commands, marker)
        }
    }

    @Test("the commands of a plugin killed from outside, setsid'd ones included, do not outlive it, nor the engine however it ends", arguments: Ending.allCases)
    func commandsOfAKilledPlugin(ending: Ending) async throws {
        try await withTwoSleeps { hammock, plugin, firstCommands, marker in
            kill(plugin.pid, SIGKILL)
            try await hammock.waitFor(type: "source", id: "streaming") { $0.event == "error" }
            // The plugin's guard is a child subreaper: the dead plugin's commands are re-parented to it and
            // ended at once, not when hammock exits.
            let orphansEnded = try await ProcessTable.eventually(within: .seconds(3)) {
                !firstCommands.contains(where: ProcessTable.isAlive)
            }
            #expect(orphansEnded, "the killed plugin's commands still run: \(firstCommands.filter(ProcessTable.isAlive))")
            // The restarted plugin runs the command again.
            try await hammock.waitFor(type: "source", id: "streaming") { $0.event == "newData" }

            hammock.signal(ending.signal)
            _ = try await hammock.waitForExit(timeout: .seconds(5))
            let allGone = try await ProcessTable.eventually(within: .seconds(5)) {
                ProcessTable.processes(withEnvironment: marker).isEmpty
            }
            #expect(allGone, "still running 5 s after hammock's \(ending.rawValue): \(ProcessTable.processes(withEnvironment: marker))")
        }
    }

    @Test("a guard killed from outside: its plugin's commands, setsid'd ones included, come to hammock, whose sweep ends them")
    func commandsOfAKilledGuard() async throws {
        try await withTwoSleeps { hammock, plugin, commands, _ in
            // The guard (the plugin's parent) dies at once: no guard is left to end what the plugin started,
            // which the kernel hands to hammock, a child subreaper.
            kill(plugin.parent, SIGKILL)
            let ended = try await ProcessTable.eventually(within: .seconds(8)) {
                !commands.contains(where: ProcessTable.isAlive)
            }
            #expect(ended, "the dead guard's commands still run: \(commands.filter(ProcessTable.isAlive))")
            #expect(hammock.isRunning)
        }
    }
}
