import Foundation
import HammockCore
import HammockJSON
import HammockProtocol
import Testing

/// hammock-plugin-shell, driven over its protocol: the test plays the engine. What a process is needed for
/// is tested here (process groups, kills, streams, the plugin's own environment); options, output formats
/// and one-shot runs are tested in-process, in HammockShellPluginTests.
@Suite struct ShellPluginTests {
    private func plugin() throws -> PluginProcess {
        let plugin = try PluginProcess(executable: "hammock-plugin-shell")
        #expect(plugin.hello() != nil)
        return plugin
    }

    /// Configures a source and expects it to be accepted.
    private func configured(_ plugin: PluginProcess, _ source: String, _ options: JSONValue) {
        #expect(plugin.configure(source, options) == .configured(source: source))
    }

    private func content(_ message: PluginMessage?) -> JSONValue? {
        if case .newData(_, _, let content, _, _) = message { return content }
        return nil
    }

    private func error(_ message: PluginMessage?) -> SourceError? {
        if case .error(_, _, let error) = message { return error }
        return nil
    }

    /// Waits until `condition` holds, for at most `seconds`.
    private func eventually(within seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    private func readPID(_ url: URL) -> Int32? {
        var pid: Int32?
        _ = eventually(within: 3) {
            pid = (try? String(contentsOf: url, encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return pid != nil
        }
        return pid
    }

    @Test func answersHello() throws {
        let plugin = try PluginProcess(executable: "hammock-plugin-shell")
        #expect(plugin.hello() == .hello(protocol: 1, kinds: ["shell"], version: "0.1.0"))
    }

    @Test func nonZeroExitCarriesStatusAndStderrTail() throws {
        let plugin = try plugin()
        configured(plugin, "fail", ["script": "echo noise >&2; echo 'disk is full' >&2; exit 3"])
        let failure = error(plugin.load("fail", id: 1))
        #expect(failure?.exitStatus == 3)
        #expect(failure?.message.hasPrefix("exited with status 3: ") == true, "\(String(describing: failure))")
        #expect(failure?.message.hasSuffix("disk is full") == true, "\(String(describing: failure))")
    }

    @Test func timeoutEndsTheWholeProcessGroup() throws {
        let plugin = try plugin()
        let folder = try makeTemporaryDirectory()
        let pidFile = folder.appendingPathComponent("child.pid")
        configured(plugin, "slow", ["script": .string("sleep 30 & echo $! > '\(pidFile.path)'; sleep 30; wait")])
        let started = Date()
        let failure = error(plugin.load("slow", id: 1, timeout: 1))
        #expect(failure?.code == "timeout")
        #expect(failure?.message == "timed out after 1s")
        #expect(Date().timeIntervalSince(started) < 4)
        let child = try #require(readPID(pidFile))
        #expect(eventually(within: 1) { !isAlive(child) }, "the background child \(child) survived the timeout")
    }

    @Test func cancelEndsTheProcessGroup() throws {
        let plugin = try plugin()
        let folder = try makeTemporaryDirectory()
        let pidFile = folder.appendingPathComponent("child.pid")
        configured(plugin, "slow", ["script": .string("sleep 30 & echo $! > '\(pidFile.path)'; sleep 30; wait")])
        plugin.send(.load(source: "slow", id: 7, etag: nil, lastModified: nil, timeout: nil))
        let child = try #require(readPID(pidFile))
        #expect(isAlive(child))
        plugin.send(.cancel(id: 7))
        #expect(plugin.next { $0.loadID == 7 } == .cancelled(id: 7))
        #expect(eventually(within: 3) { !isAlive(child) }, "the background child \(child) survived the cancel")
    }

    @Test func aSlowCommandDoesNotHoldUpAnotherSource() throws {
        let plugin = try plugin()
        configured(plugin, "slow", ["script": "sleep 2; echo slow"])
        configured(plugin, "fast", ["command": ["echo", "fast"]])
        plugin.send(.load(source: "slow", id: 1, etag: nil, lastModified: nil, timeout: nil))
        plugin.send(.load(source: "fast", id: 2, etag: nil, lastModified: nil, timeout: nil))
        let first = plugin.next { $0.loadID != nil }
        #expect(first?.loadID == 2)
        #expect(content(first) == "fast")
        #expect(content(plugin.next { $0.loadID == 1 }) == "slow")
    }

    @Test func outputBeyondMaxBytesIsAnError() throws {
        let plugin = try plugin()
        configured(plugin, "big", ["script": "head -c 100000 /dev/zero | tr '\\0' a; sleep 30", "maxBytes": "1KiB"])
        let started = Date()
        let failure = error(plugin.load("big", id: 1))
        #expect(failure?.code == "outputTooLarge")
        #expect(failure?.message.contains("maxBytes") == true)
        #expect(Date().timeIntervalSince(started) < 4, "the command was not ended")

        configured(plugin, "fits", ["script": "printf 12345", "maxBytes": 5])
        #expect(content(plugin.load("fits", id: 2)) == "12345")
    }

    @Test func environmentAndWorkingDirectory() throws {
        let plugin = try plugin()
        let folder = try makeTemporaryDirectory().resolvingSymlinksInPath()
        configured(plugin, "where", ["script": "echo \"$GREETING $(pwd -P) $HOME\"", "env": ["GREETING": "hello"], "cwd": .string(folder.path)])
        let home = ProcessInfo.processInfo.environment["HOME"] ?? ""
        #expect(content(plugin.load("where", id: 1)) == .string("hello \(folder.path) \(home)"))
    }

    @Test func streamLinesArriveInOrderAndAnExitIsPushedThenRestarted() throws {
        let plugin = try plugin()
        // Pauses between the lines, so each arrives in a read of its own (lines read together coalesce).
        configured(plugin, "lines", ["script": "echo one; sleep 0.2; echo two; sleep 0.2; echo three; sleep 0.2; echo bye >&2; exit 4", "mode": "stream"])
        #expect(content(plugin.load("lines", id: 1)) == "one")
        let pushes = (0..<3).map { _ in plugin.next { $0.loadID == nil } }
        #expect(pushes[0] == .newData(id: nil, source: "lines", content: "two", etag: nil, lastModified: nil))
        #expect(pushes[1] == .newData(id: nil, source: "lines", content: "three", etag: nil, lastModified: nil))
        #expect(pushes[2] == .error(id: nil, source: "lines", error: SourceError(message: "exited with status 4: bye", exitStatus: 4)))
        // Restarted after the 1 s backoff: the lines come again, as pushes.
        let again = plugin.next(timeout: .seconds(5)) { $0.loadID == nil }
        #expect(again == .newData(id: nil, source: "lines", content: "one", etag: nil, lastModified: nil))
    }

    @Test func streamJSONLinesAndALoadWhileRunningGetsTheLatest() throws {
        let plugin = try plugin()
        configured(plugin, "json", ["script": "echo '{\"n\":1}'; sleep 0.2; echo '{\"n\":2}'; sleep 30", "mode": "stream", "parse": "json"])
        #expect(content(plugin.load("json", id: 1)) == ["n": 1])
        #expect(content(plugin.next { $0.loadID == nil }) == ["n": 2])
        #expect(content(plugin.load("json", id: 2)) == ["n": 2])
        plugin.send(.remove(source: "json"))
    }

    @Test func streamLinesReadTogetherPushOnlyTheNewestButReportABadOne() throws {
        let plugin = try plugin()
        // One write of four lines: a pipe hands them over in one read.
        configured(plugin, "burst", ["script": "printf '{\"n\":1}\\n{\"n\":2}\\nnot json\\n{\"n\":3}\\n{\"n\":4}\\n'; sleep 30", "mode": "stream", "parse": "json"])
        // The load is answered by the newest good line before the bad one; the bad one is an error of its
        // own; of the good lines after it, only the newest is pushed.
        #expect(content(plugin.load("burst", id: 1)) == ["n": 2])
        let error = plugin.next { $0.loadID == nil }
        guard case .error(_, "burst", let sourceError)? = error else {
            Issue.record("expected the bad line's error, got \(String(describing: error))")
            return
        }
        #expect(sourceError.message.contains("JSON"), "\(sourceError)")
        #expect(content(plugin.next { $0.loadID == nil }) == ["n": 4])
        plugin.send(.remove(source: "burst"))
    }

    @Test func streamLoadAfterABadLineKeepsTheErrorUntilAGoodLine() throws {
        let plugin = try plugin()
        let folder = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let next = folder.appendingPathComponent("next")
        // A good line, a bad one, then nothing until the test creates `next`.
        let script = "echo '{\"i\":1}'; echo 'not json'; while [ ! -e '\(next.path)' ]; do sleep 0.02; done; echo '{\"i\":2}'; sleep 30"
        configured(plugin, "s", ["script": .string(script), "mode": "stream", "parse": "json"])
        #expect(content(plugin.load("s", id: 1)) == ["i": 1])
        let pushed = try #require(error(plugin.next { $0.loadID == nil }), "the bad line is pushed as an error")
        #expect(pushed.code == "parseFailed", "\(pushed)")

        // The command has printed nothing since the bad line: a load answers with that line's error, not
        // with the older good line as if it were new; and again, for the error stays.
        for id in [2, 3] {
            let answer = plugin.load("s", id: id)
            #expect(error(answer) == pushed, "load \(id) after the bad line: \(String(describing: answer))")
        }

        // Only a new good line clears the error: it is pushed, and then answers a load.
        try Data().write(to: next)
        #expect(content(plugin.next { $0.loadID == nil }) == ["i": 2])
        #expect(content(plugin.load("s", id: 4)) == ["i": 2])
        plugin.send(.remove(source: "s"))
    }

    @Test func aBlankStreamLineIsAnEmptyTextValue() throws {
        let plugin = try plugin()
        configured(plugin, "blank", ["script": "echo status; sleep 0.2; echo; sleep 30", "mode": "stream"])
        #expect(content(plugin.load("blank", id: 1)) == "status")
        #expect(plugin.next { $0.loadID == nil } == .newData(id: nil, source: "blank", content: "", etag: nil, lastModified: nil))
        plugin.send(.remove(source: "blank"))
    }

    @Test func aStreamLinePastMaxBytesEndsTheCommandWithoutWaitingForItsEnd() throws {
        let plugin = try plugin()
        // The line never ends: the command is ended as soon as the line is too long.
        configured(plugin, "long", ["script": "head -c 100000 /dev/zero | tr '\\0' a; sleep 30", "mode": "stream", "maxBytes": "1KiB"])
        let started = Date()
        let failure = error(plugin.load("long", id: 1))
        #expect(failure == SourceError(message: "a line exceeded maxBytes (1024 bytes); the command was ended", code: "outputTooLarge"))
        #expect(Date().timeIntervalSince(started) < 10, "the command was not ended")
        plugin.send(.remove(source: "long"))
    }

    @Test func closingInputEndsThePluginAndItsStreamCommand() throws {
        let plugin = try plugin()
        let folder = try makeTemporaryDirectory()
        let pidFile = folder.appendingPathComponent("child.pid")
        configured(plugin, "stream", ["script": .string("sleep 30 & echo $! > '\(pidFile.path)'; echo ready; wait"), "mode": "stream"])
        #expect(content(plugin.load("stream", id: 1)) == "ready")
        let child = try #require(readPID(pidFile))
        #expect(isAlive(child))
        plugin.closeInput()
        #expect(plugin.waitForExit(timeout: .seconds(5)) == 0)
        #expect(!isAlive(child), "the stream command's child \(child) outlived the plugin")
    }
}
