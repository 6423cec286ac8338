import Foundation
import HammockJSON
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

    @Test("every process hammock started is gone within 5 s of its end", arguments: Ending.allCases)
    func noOrphans(ending: Ending) async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let watchedPath = folder + "/watched.txt"
        try TestFiles.writeInPlace("hello\n", to: watchedPath)
        let config = """
            version: 1
            sources:
              streaming:
                kind: shell
                mode: stream
                script: "echo up; sleep 300; echo never"
              polling:
                kind: shell
                script: "sleep 300; echo never"
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
        var tree: [ProcessEntry] = []
        defer {
            // Whatever the outcome, leave nothing behind (these are all processes this test started).
            for process in tree where ProcessTable.isAlive(process) { kill(process.pid, SIGKILL) }
        }
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitUntil("the stream and the file have data") { lines in
                ["streaming", "watched"].allSatisfy { id in lines.contains { $0.id == id && $0.event == "newData" } }
            }

            // Collect the whole tree, repeatedly for a while, so that commands still starting are caught.
            let deadline = ContinuousClock.now + .seconds(1)
            while ContinuousClock.now < deadline {
                for process in ProcessTable.descendants(of: hammock.pid) where !tree.contains(process) {
                    tree.append(process)
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            let live = tree.filter(ProcessTable.isAlive)
            let plugins = live.filter { $0.command.hasPrefix("hammock-plugin") }
            let sleeps = live.filter { $0.command == "sleep" }
            // Without these the test would prove nothing.
            #expect(plugins.count == 2, "the shell and file plugins run: \(live)")
            #expect(sleeps.count >= 3, "one sleep per shell source runs: \(live)")

            hammock.signal(ending.signal)
            let allGone = try await ProcessTable.eventually(within: .seconds(5)) {
                !tree.contains(where: ProcessTable.isAlive)
            }
            #expect(allGone, "still running \(ending.rawValue) + 5 s: \(tree.filter(ProcessTable.isAlive))")
            let termination = try await hammock.waitForExit(timeout: .seconds(5))
            switch ending {
            case .sigterm: #expect(termination == .exited(0), "\(termination); stderr: \(hammock.stderrText)")
            case .sigkill: #expect(termination == .signaled(SIGKILL))
            }
        }
    }

    @Test("the commands of a plugin killed from outside do not outlive the engine")
    func commandsOfAKilledPlugin() async throws {
        let config = """
            version: 1
            sources:
              streaming:
                kind: shell
                mode: stream
                script: "echo up; sleep 300; echo never"
                retry: { initial: 200ms }
            """
        var tree: [ProcessEntry] = []
        defer {
            for process in tree where ProcessTable.isAlive(process) { kill(process.pid, SIGKILL) }
        }
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitFor(type: "source", id: "streaming") { $0.event == "newData" }
            let collect = {
                for process in ProcessTable.descendants(of: hammock.pid) where !tree.contains(process) {
                    tree.append(process)
                }
            }
            collect()
            let plugin = try #require(
                ProcessTable.children(of: hammock.pid, named: "hammock-plugin-shell").first, "the shell plugin: \(tree)")
            #expect(tree.contains { $0.command == "sleep" && ProcessTable.isAlive($0) }, "the command runs: \(tree)")
            let firstCommands = tree.filter { $0.command == "sleep" }
            kill(plugin.pid, SIGKILL)
            // The restarted plugin runs the command again.
            try await hammock.waitFor(type: "source", id: "streaming") { $0.event == "error" }
            // hammock is a child subreaper: the dead plugin's commands are re-parented to it and ended at once,
            // not when hammock exits.
            let orphansEnded = try await ProcessTable.eventually(within: .seconds(3)) {
                !firstCommands.contains(where: ProcessTable.isAlive)
            }
            #expect(orphansEnded, "the killed plugin's commands still run: \(firstCommands.filter(ProcessTable.isAlive))")
            try await hammock.waitFor(type: "source", id: "streaming") { $0.event == "newData" }
            collect()

            hammock.signal(SIGTERM)
            _ = try await hammock.waitForExit(timeout: .seconds(5))
            let allGone = try await ProcessTable.eventually(within: .seconds(5)) {
                !tree.contains(where: ProcessTable.isAlive)
            }
            // hammock is a child subreaper: the killed plugin's commands are re-parented to it and ended.
            #expect(allGone, "still running 5 s after hammock ended: \(tree.filter(ProcessTable.isAlive))")
        }
    }
}
