import Foundation
import HammockCore
import HammockJSON
import HammockProtocol
import HammockTestSupport
import Testing

/// hammock-plugin-shell, driven over its protocol: the test plays the engine.
@Suite struct ShellPluginTests {
    private func plugin() async throws -> PluginProcess {
        let plugin = try PluginProcess(executable: "hammock-plugin-shell")
        #expect(await plugin.hello() != nil)
        return plugin
    }

    /// Configures a source and expects it to be accepted.
    private func configured(
        _ plugin: PluginProcess, _ source: String, _ options: JSONValue, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        #expect(await plugin.configure(source, options) == .configured(source: source), sourceLocation: sourceLocation)
    }

    private func content(_ message: PluginMessage?) -> JSONValue? {
        switch message {
        case .newData(_, _, let content, _, _)?, .pushedData(_, let content)?: content
        default: nil
        }
    }

    private func error(_ message: PluginMessage?) -> SourceError? {
        switch message {
        case .error(_, _, let error)?, .pushedError(_, let error)?: error
        default: nil
        }
    }

    /// Waits until `condition` holds, for at most `seconds`.
    private func eventually(within seconds: Double, _ condition: () -> Bool) async -> Bool {
        (try? await ProcessTable.eventually(within: .milliseconds(Int(seconds * 1000)), condition)) ?? condition()
    }

    private func readPID(_ url: URL) async -> Int32? {
        var pid: Int32?
        _ = await eventually(within: 3) {
            pid = (try? String(contentsOf: url, encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return pid != nil
        }
        return pid
    }

    @Test func answersHello() async throws {
        let plugin = try PluginProcess(executable: "hammock-plugin-shell")
        let script = TemplateRules(refused: [
            JSONPointer(tokens: ["script"]):
                "a template inside `script:` is not allowed (a value could change the script); use `command: [...]` so each value is passed as one argument"
        ])
        guard case .hello(let version, let kinds, let pluginVersion, let templates, let queues, let schemas)? = await plugin.hello() else {
            Issue.record("no hello")
            return
        }
        #expect(version == 1 && kinds == ["shell"] && pluginVersion == "0.1.0" && queues)
        #expect(templates == ["shell": script])
        // Its options, described for `hammock schema` (their content is ShellOptionsSchemaTests' to check).
        #expect(schemas.keys.sorted() == ["shell"])
        #expect(schemas["shell"]?["properties"]?["command"] != nil)
    }

    /// `HAMMOCK_SHELL_CONCURRENCY=2`: ten loads of `sleep 0.3` at once run two at a time, in waves, each
    /// with `started` when its command is spawned; all answer, though the last start about 1.2 s after they
    /// were sent and their timeout is 1 s, since the timeout counts from the start.
    @Test func atMostTheLimitOfCommandsRunAtOnceAndTheTimeoutCountsFromTheStart() async throws {
        let folder = try makeTemporaryDirectory()
        let log = folder.appendingPathComponent("log").path
        let plugin = try PluginProcess(executable: "hammock-plugin-shell", environment: ["HAMMOCK_SHELL_CONCURRENCY": "2"])
        #expect(await plugin.hello() != nil)
        let ids = 1...10
        for id in ids {
            // Appends of a line this short are atomic: the log is in the order the commands began and ended.
            await configured(plugin, "s\(id)", ["script": .string("echo + >> '\(log)'; sleep 0.3; echo - >> '\(log)'; echo \(id)")])
        }
        for id in ids { plugin.send(.load(source: "s\(id)", id: id, etag: nil, lastModified: nil, timeout: 1)) }
        var started: Set<Int> = []
        var answered: [Int: JSONValue] = [:]
        while answered.count < ids.count {
            guard let message = await plugin.next(timeout: .seconds(30)) else { break }
            switch message {
            case .started(let id):
                #expect(answered[id] == nil, "started after its answer")
                started.insert(id)
            case .newData(let id, _, let content, _, _):
                answered[id] = content
            default:
                Issue.record("unexpected \(message)")
                answered[-answered.count - 1] = .null
            }
        }
        #expect(started == Set(ids))
        #expect(answered == Dictionary(uniqueKeysWithValues: ids.map { ($0, JSONValue.string("\($0)")) }))
        let marks = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        #expect(marks.count == 20)
        var running = 0
        var most = 0
        for mark in marks {
            running += mark == "+" ? 1 : -1
            most = max(most, running)
        }
        #expect(most == 2, "at most 2 at once, and the limit used: \(marks)")
    }

    @Test func nonZeroExitCarriesStatusAndStderrTail() async throws {
        let plugin = try await plugin()
        await configured(plugin, "fail", ["script": "echo noise >&2; echo 'disk is full' >&2; exit 3"])
        let failure = error(await plugin.load("fail", id: 1))
        #expect(failure?.exitStatus == 3)
        #expect(failure?.message.hasPrefix("exited with status 3: ") == true, "\(String(describing: failure))")
        #expect(failure?.message.hasSuffix("disk is full") == true, "\(String(describing: failure))")
    }

    @Test func timeoutEndsTheWholeProcessGroup() async throws {
        let plugin = try await plugin()
        let folder = try makeTemporaryDirectory()
        let pidFile = folder.appendingPathComponent("child.pid")
        await configured(plugin, "slow", ["script": .string("sleep 30 & echo $! > '\(pidFile.path)'; sleep 30; wait")])
        let started = Date()
        let failure = error(await plugin.load("slow", id: 1, timeout: 1))
        #expect(failure?.code == .timeout)
        #expect(failure?.message == "timed out after 1s")
        // Ended by the timeout, not by the command's 30 s (a bound of 4 s failed under the whole suite's load).
        #expect(Date().timeIntervalSince(started) < 20)
        let child = try #require(await readPID(pidFile))
        #expect(await eventually(within: 1) { !isAlive(child) }, "the background child \(child) survived the timeout")
    }

    @Test func cancelEndsTheProcessGroup() async throws {
        let plugin = try await plugin()
        let folder = try makeTemporaryDirectory()
        let pidFile = folder.appendingPathComponent("child.pid")
        await configured(plugin, "slow", ["script": .string("sleep 30 & echo $! > '\(pidFile.path)'; sleep 30; wait")])
        plugin.send(.load(source: "slow", id: 7, etag: nil, lastModified: nil, timeout: nil))
        let child = try #require(await readPID(pidFile))
        #expect(isAlive(child))
        plugin.send(.cancel(id: 7))
        #expect(await plugin.next { $0.loadID == 7 } == .cancelled(id: 7))
        #expect(await eventually(within: 3) { !isAlive(child) }, "the background child \(child) survived the cancel")
    }

    @Test func aSlowCommandDoesNotHoldUpAnotherSource() async throws {
        let plugin = try await plugin()
        await configured(plugin, "slow", ["script": "sleep 2; echo slow"])
        await configured(plugin, "fast", ["command": ["echo", "fast"]])
        plugin.send(.load(source: "slow", id: 1, etag: nil, lastModified: nil, timeout: nil))
        plugin.send(.load(source: "fast", id: 2, etag: nil, lastModified: nil, timeout: nil))
        let first = await plugin.next { $0.loadID != nil }
        #expect(first?.loadID == 2)
        #expect(content(first) == "fast")
        #expect(content(await plugin.next { $0.loadID == 1 }) == "slow")
    }

    @Test func outputBeyondMaxBytesIsAnError() async throws {
        let plugin = try await plugin()
        await configured(plugin, "big", ["script": "head -c 100000 /dev/zero | tr '\\0' a; sleep 30", "maxBytes": "1KiB"])
        let started = Date()
        let failure = error(await plugin.load("big", id: 1))
        #expect(failure?.code == .outputTooLarge)
        #expect(failure?.message.contains("maxBytes") == true)
        #expect(Date().timeIntervalSince(started) < 4, "the command was not ended")

        await configured(plugin, "fits", ["script": "printf 12345", "maxBytes": 5])
        #expect(content(await plugin.load("fits", id: 2)) == "12345")
    }

    @Test func environmentAndWorkingDirectory() async throws {
        let plugin = try await plugin()
        let folder = try makeTemporaryDirectory().resolvingSymlinksInPath()
        await configured(plugin, "where", ["script": "echo \"$GREETING $(pwd -P) $HOME\"", "env": ["GREETING": "hello"], "cwd": .string(folder.path)])
        let home = plugin.home
        #expect(content(await plugin.load("where", id: 1)) == .string("hello \(folder.path) \(home)"))
    }

    @Test func streamLinesArriveInOrderAndAnExitIsPushedThenRestarted() async throws {
        let plugin = try await plugin()
        // Pauses between the lines, so each arrives in a read of its own (lines read together coalesce).
        await configured(plugin, "lines", ["script": "echo one; sleep 0.2; echo two; sleep 0.2; echo three; sleep 0.2; echo bye >&2; exit 4", "mode": "stream"])
        #expect(content(await plugin.load("lines", id: 1)) == "one")
        var pushes: [PluginMessage?] = []
        for _ in 0..<3 { pushes.append(await plugin.next { $0.loadID == nil }) }
        #expect(pushes[0] == .pushedData(source: "lines", content: "two"))
        #expect(pushes[1] == .pushedData(source: "lines", content: "three"))
        #expect(pushes[2] == .pushedError(source: "lines", error: SourceError(message: "exited with status 4: bye", exitStatus: 4)))
        // Restarted after the 1 s backoff: the lines come again, as pushes.
        let again = await plugin.next(timeout: .seconds(5)) { $0.loadID == nil }
        #expect(again == .pushedData(source: "lines", content: "one"))
    }

    @Test func streamJSONLinesAndALoadWhileRunningGetsTheLatest() async throws {
        let plugin = try await plugin()
        await configured(plugin, "json", ["script": "echo '{\"n\":1}'; sleep 0.2; echo '{\"n\":2}'; sleep 30", "mode": "stream", "parse": "json"])
        #expect(content(await plugin.load("json", id: 1)) == ["n": 1])
        #expect(content(await plugin.next { $0.loadID == nil }) == ["n": 2])
        #expect(content(await plugin.load("json", id: 2)) == ["n": 2])
        plugin.send(.remove(source: "json"))
    }

    @Test func streamLinesReadTogetherPushOnlyTheNewestButReportABadOne() async throws {
        let plugin = try await plugin()
        // One write of four lines: a pipe hands them over in one read.
        await configured(plugin, "burst", ["script": "printf '{\"n\":1}\\n{\"n\":2}\\nnot json\\n{\"n\":3}\\n{\"n\":4}\\n'; sleep 30", "mode": "stream", "parse": "json"])
        // The load is answered by the newest good line before the bad one; the bad one is an error of its
        // own; of the good lines after it, only the newest is pushed.
        #expect(content(await plugin.load("burst", id: 1)) == ["n": 2])
        let error = await plugin.next { $0.loadID == nil }
        guard case .pushedError("burst", let sourceError)? = error else {
            Issue.record("expected the bad line's error, got \(String(describing: error))")
            return
        }
        #expect(sourceError.message.contains("JSON"), "\(sourceError)")
        #expect(content(await plugin.next { $0.loadID == nil }) == ["n": 4])
        plugin.send(.remove(source: "burst"))
    }

    @Test func streamLoadAfterABadLineKeepsTheErrorUntilAGoodLine() async throws {
        let plugin = try await plugin()
        let folder = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let next = folder.appendingPathComponent("next")
        // A good line, a bad one, then nothing until the test creates `next`.
        let script = "echo '{\"i\":1}'; echo 'not json'; while [ ! -e '\(next.path)' ]; do sleep 0.02; done; echo '{\"i\":2}'; sleep 30"
        await configured(plugin, "s", ["script": .string(script), "mode": "stream", "parse": "json"])
        #expect(content(await plugin.load("s", id: 1)) == ["i": 1])
        let pushed = try #require(error(await plugin.next { $0.loadID == nil }), "the bad line is pushed as an error")
        #expect(pushed.code == .parseFailed, "\(pushed)")

        // The command has printed nothing since the bad line: a load answers with that line's error, not
        // with the older good line as if it were new; and again, for the error stays.
        for id in [2, 3] {
            let answer = await plugin.load("s", id: id)
            #expect(error(answer) == pushed, "load \(id) after the bad line: \(String(describing: answer))")
        }

        // Only a new good line clears the error: it is pushed, and then answers a load.
        try Data().write(to: next)
        #expect(content(await plugin.next { $0.loadID == nil }) == ["i": 2])
        #expect(content(await plugin.load("s", id: 4)) == ["i": 2])
        plugin.send(.remove(source: "s"))
    }

    @Test func aBlankStreamLineIsAnEmptyTextValue() async throws {
        let plugin = try await plugin()
        await configured(plugin, "blank", ["script": "echo status; sleep 0.2; echo; sleep 30", "mode": "stream"])
        #expect(content(await plugin.load("blank", id: 1)) == "status")
        #expect(await plugin.next { $0.loadID == nil } == .pushedData(source: "blank", content: ""))
        plugin.send(.remove(source: "blank"))
    }

    @Test func aStreamLinePastMaxBytesEndsTheCommandWithoutWaitingForItsEnd() async throws {
        let plugin = try await plugin()
        // The line never ends: the command is ended as soon as the line is too long.
        await configured(plugin, "long", ["script": "head -c 100000 /dev/zero | tr '\\0' a; sleep 30", "mode": "stream", "maxBytes": "1KiB"])
        let started = Date()
        let failure = error(await plugin.load("long", id: 1))
        #expect(failure == SourceError(message: "a line exceeded maxBytes (1024 bytes); the command was ended", code: .outputTooLarge))
        #expect(Date().timeIntervalSince(started) < 10, "the command was not ended")
        plugin.send(.remove(source: "long"))
    }

    @Test func closingInputEndsThePluginAndItsStreamCommand() async throws {
        let plugin = try await plugin()
        let folder = try makeTemporaryDirectory()
        let pidFile = folder.appendingPathComponent("child.pid")
        await configured(plugin, "stream", ["script": .string("sleep 30 & echo $! > '\(pidFile.path)'; echo ready; wait"), "mode": "stream"])
        #expect(content(await plugin.load("stream", id: 1)) == "ready")
        let child = try #require(await readPID(pidFile))
        #expect(isAlive(child))
        plugin.closeInput()
        #expect(await plugin.waitForExit(timeout: .seconds(5)) == 0)
        #expect(!isAlive(child), "the stream command's child \(child) outlived the plugin")
    }
}
