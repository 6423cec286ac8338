import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// The engine's supervision of plugin processes: a plugin killed from outside, and plugins that misbehave
/// on purpose (Tests/Fixtures/misbehaving-plugin.py).
@Suite("Plugin supervision, end to end")
struct SupervisionTests {
    /// A configuration whose kind `test` is served by the misbehaving fixture in `mode` (with its arguments).
    static func misbehavingConfig(mode: String, sources: String) -> String {
        let fixture = TestFiles.fixture("misbehaving-plugin.py")
        let arguments = mode.split(separator: " ").map { TestFiles.yamlQuoted(String($0)) }.joined(separator: ", ")
        return """
            version: 1
            sources:
            \(sources)
            plugins:
              test: { command: [python3, \(TestFiles.yamlQuoted(fixture)), \(arguments)] }
            """
    }

    @Test("a shell plugin killed from outside: its sources show pluginFailed with their content, then recover")
    func killedPlugin() async throws {
        // Every run prints something new, so "fresh data" can be told from the content kept.
        let config = """
            version: 1
            sources:
              first:
                kind: shell
                command: [cat, /proc/sys/kernel/random/uuid]
                retry: { initial: 200ms }
              second:
                kind: shell
                script: "cat /proc/sys/kernel/random/uuid"
                retry: { initial: 200ms }
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitUntil("both sources have data") { lines in
                ["first", "second"].allSatisfy { id in lines.contains { $0.id == id && $0.event == "newData" } }
            }
            var before: [String: JSONValue] = [:]
            for id in ["first", "second"] {
                before[id] = hammock.lines.last { $0.id == id && $0.event == "newData" }?.content
            }
            // The plugin process itself (the guard's child), not its guard: killing the guard would end the
            // plugin by another path (its parent-death signal).
            let plugins = ProcessTable.plugins(of: hammock.pid, named: "hammock-plugin-shell")
            let plugin = try #require(plugins.count == 1 ? plugins.first : nil, "one shell plugin: \(plugins)")
            let mark = hammock.lineCount
            kill(plugin.pid, SIGKILL)

            // Each source shows an error after the kill, then new data after the restart.
            try await hammock.waitUntil("both sources have an error, then new data, after the kill", timeout: .seconds(8)) {
                lines in
                // The condition runs with the harness's lock held: use `lines`, not `hammock.lines`.
                let after = lines[mark...]
                return ["first", "second"].allSatisfy { id in
                    guard let error = after.firstIndex(where: { $0.id == id && $0.event == "error" }) else { return false }
                    return after[error...].contains { $0.id == id && $0.event == "newData" }
                }
            }
            let after = hammock.lines(since: mark)
            for id in ["first", "second"] {
                let lines = after.filter { $0.type == "source" && $0.id == id }
                let errorIndex = try #require(lines.firstIndex { $0.event == "error" }, "\(id): \(lines.map(\.text))")
                let error = lines[errorIndex]
                #expect(error[pointer: "/state/latestError/code"] == "pluginFailed", "\(error)")
                #expect(error.errorMessage.contains("shell plugin"), "the message names the plugin: \(error)")
                #expect(error.content == before[id], "the error keeps the content: \(error)")
                let recovery = try #require(
                    lines[errorIndex...].first { $0.event == "newData" }, "\(id) recovers: \(lines.map(\.text))")
                #expect(recovery.content != before[id], "fresh data, not the old content: \(recovery)")
                #expect(recovery.latestError?.isNull == true, "\(recovery)")
            }
            let restarted = ProcessTable.plugins(of: hammock.pid, named: "hammock-plugin-shell")
            #expect(restarted.count == 1 && restarted.first?.pid != plugin.pid, "a new plugin process: \(restarted)")
        }
    }

    @Test("a plugin that crashes during a load: the load fails with pluginFailed, the plugin restarts and serves again")
    func crashAfterOneLoad() async throws {
        // The fixture answers one load per process, then exits with status 4 on the next.
        let config = Self.misbehavingConfig(
            mode: "crash-after 1", sources: "  t: { kind: test, refresh: 300ms, retry: { initial: 200ms } }")
        try await HammockProcess.withRunning(config: config) { hammock in
            let first = try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" }
            let firstPID = first[pointer: "/state/content/pid"]
            #expect(first[pointer: "/state/content/n"] == 1, "\(first)")
            let error = try await hammock.waitFor(type: "source", id: "t") { $0.event == "error" }
            #expect(error[pointer: "/state/latestError/code"] == "pluginFailed", "\(error)")
            #expect(error.errorMessage.contains("test plugin") && error.errorMessage.contains("exited with status 4"), "\(error)")
            #expect(error.content == first.content, "the content is kept: \(error)")
            let again = try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" }
            #expect(again[pointer: "/state/content/n"] == 1, "a new process, configured again, answers: \(again)")
            #expect(again[pointer: "/state/content/pid"] != firstPID, "\(again)")
            // stderr is read apart from stdout: wait for the plugin's line, which comes with its kind as prefix.
            try await hammock.waitForStderr(containing: "crashing after 1 loads, as asked")
            #expect(
                hammock.stderrText.split(separator: "\n").contains { $0.hasPrefix("test: ") && $0.contains("crashing after 1 loads, as asked") },
                "the plugin's stderr, prefixed with its kind: \(hammock.stderrText)")
        }
    }

    /// The starts a fixture logged to `path` (`$HAMMOCK_TEST_START_LOG`), in seconds of the monotonic clock.
    static func starts(loggedIn path: String) -> [Double] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { Double($0) }
    }

    @Test("a plugin that crashes at once is restarted 4 times, after 250 ms, 500 ms, 1 s and 2 s, then given up with a clear message; its stderr is passed on")
    func crashAtOnce() async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let startLog = folder + "/starts"
        let config = Self.misbehavingConfig(mode: "crash-at-once", sources: "  t: { kind: test, retry: 200ms }")
        try await HammockProcess.withRunning(config: config, environment: ["HAMMOCK_TEST_START_LOG": startLog]) { hammock in
            // Restarts wait 250 ms, 500 ms, 1 s, 2 s: the fifth crash comes after about 4 s, plus five Python
            // start-ups, which take seconds each on a loaded machine.
            let gaveUp = try await hammock.waitFor(type: "source", id: "t", timeout: .seconds(25)) {
                $0.event == "error" && $0.errorMessage.contains("gave up")
            }
            #expect(gaveUp.errorMessage.contains("test plugin"), "\(gaveUp)")
            #expect(gaveUp.errorMessage.contains("gave up after 5 failures within 1m"), "\(gaveUp)")
            #expect(gaveUp[pointer: "/state/latestError/code"] == "pluginGaveUp", "\(gaveUp)")
            #expect(gaveUp[pointer: "/state/isLoading"] == false, "\(gaveUp)")

            // Exactly five starts, each after the documented backoff. A start is logged after Python's own
            // start-up, and the gap to the next also holds the crash, its noticing and the next start-up: each
            // gap is at least its backoff (which is what tells no backoff, or no doubling, from the right one),
            // and on a loaded machine may be seconds more (4.3 s for the 500 ms one was seen in a full run).
            let starts = Self.starts(loggedIn: startLog)
            #expect(starts.count == 5, "the plugin started \(starts.count) times: \(starts)")
            let gaps = zip(starts, starts.dropFirst()).map { $1 - $0 }
            let backoffs = [0.25, 0.5, 1.0, 2.0]
            print("crash-at-once: restart gaps \(gaps.map { String(format: "%.3f", $0) }) s (backoffs \(backoffs))")
            for (index, (gap, backoff)) in zip(gaps, backoffs).enumerated() {
                #expect(gap >= backoff && gap < backoff + 10, "restart \(index + 1) came \(gap) s after the start before (backoff \(backoff) s)")
            }
            // stderr is read apart from stdout: wait for the last restart's line before reading it.
            try await hammock.waitForStderr(containing: "restarting it in 2s")
            let stderr = hammock.stderrText
            for delay in ["250ms", "500ms", "1s", "2s"] {
                #expect(stderr.contains("restarting it in \(delay)"), "the restart after \(delay) is logged: \(stderr)")
            }

            // Every crash before the give-up fails the load that waited for the plugin (the engine retries it
            // every 200 ms or so): the source must not sit loading through the restarts with only the first
            // failure shown. One error per crash at most; lines of one source waiting for stdout may replace
            // each other on a loaded machine, so a lost one is allowed.
            let lines = hammock.lines
            let giveUpIndex = try #require(lines.firstIndex { $0.text == gaveUp.text })
            let errorsBefore = lines[..<giveUpIndex].filter { $0.id == "t" && $0.event == "error" }
            #expect((3...4).contains(errorsBefore.count), "an error for each of the 4 crashes before the give-up: \(errorsBefore.map(\.text))")
            #expect(
                errorsBefore.allSatisfy { $0[pointer: "/state/latestError/code"] == "pluginFailed" },
                "\(errorsBefore.map(\.text))")
            let failures = gaveUp[pointer: "/state/failures"]?.numberValue?.intValue ?? 0
            #expect((5...6).contains(failures), "a failed load per crash, and the give-up's: \(gaveUp)")
            #expect(!hammock.lines.contains { $0.id == "t" && $0.event == "newData" })
            #expect(
                stderr.split(separator: "\n").contains { $0.hasPrefix("test: ") && $0.contains("crashing at once, as asked") },
                "the plugin's stderr, prefixed with its kind: \(stderr)")
            // No sixth start: after the give-up a restart would come 4 s after the fifth crash at the latest
            // by the backoff; a load asked for now must not start it either.
            try hammock.send(controlLine: #"{"op":"load","source":"t"}"#)
            try await hammock.waitFor(type: "source", id: "t") { $0.event == "error" && $0.errorMessage.contains("gave up") }
            #expect(Self.starts(loggedIn: startLog).count == 5, "started again after the give-up")
            #expect(hammock.isRunning, "a plugin that gave up does not end the engine")
        }
    }
}
