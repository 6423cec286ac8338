import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// The shipped `file` and `shell` plugins, driven through the real `hammock` executable, which finds them
/// beside itself.
@Suite("Shipped plugins, end to end")
struct PluginTests {
    // MARK: file

    enum Edit: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case inPlace = "edited in place"
        case atomicRename = "replaced by an atomic rename"
        var testDescription: String { rawValue }
    }

    @Test("a watched file that changes gives exactly one push with the new content", arguments: Edit.allCases)
    func watchedFile(edit: Edit) async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/data.json"
        try TestFiles.writeInPlace(#"{"v": 1}"# + "\n", to: path)
        let config = """
            version: 1
            sources:
              watched:
                kind: file
                path: \(TestFiles.yamlQuoted(path))
                parse: json
                watch: true
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            let first = try await hammock.waitFor(type: "source", id: "watched") { $0.event == "newData" }
            #expect(first.origin == "load")
            #expect(first.content == ["v": 1])
            // The watch is set up at configure time, before the first load; let anything the first write
            // might still stir up settle, so that what follows is only the edit's doing.
            _ = try await hammock.linesUntilQuiet(quiet: .milliseconds(200))
            let mark = hammock.lineCount

            switch edit {
            case .inPlace: try TestFiles.writeInPlace(#"{"v": 2, "edit": "in place"}"# + "\n", to: path)
            case .atomicRename: try TestFiles.replaceAtomically(#"{"v": 2, "edit": "rename"}"# + "\n", at: path)
            }
            let expected: JSONValue = edit == .inPlace ? ["v": 2, "edit": "in place"] : ["v": 2, "edit": "rename"]
            let push = try await hammock.waitFor(type: "source", id: "watched") { $0.event == "newData" }
            #expect(push.origin == "push", "\(push)")
            #expect(push.content == expected, "\(push)")
            #expect(push.latestError?.isNull == true, "\(push)")

            // No second push (a debounce that lets the temporary file, the truncation or the rename through
            // would show here), and no error (a read of the half-written file). Whatever the edit stirred up
            // is in the plugin's queue of events before a later edit's, so a marker edit made after a quiet
            // moment (longer than the debounce, so the two are not merged) bounds the wait however slow the
            // machine: anything the first edit caused comes before the marker's push.
            try await Task.sleep(for: .milliseconds(300))
            try TestFiles.writeInPlace(#"{"v": 3, "edit": "marker"}"# + "\n", to: path)
            let marker = try await hammock.waitFor(type: "source", id: "watched") { $0.content == ["v": 3, "edit": "marker"] }
            let between = hammock.lines(since: mark).filter { $0.type == "source" && $0.id == "watched" && ($0.seq ?? 0) < (marker.seq ?? 0) }
            let newData = between.filter { $0.event == "newData" }
            #expect(newData.count == 1, "exactly one newData after the edit: \(between.map(\.text))")
            #expect(!between.contains { $0.event == "error" }, "no error after the edit: \(between.map(\.text))")
        }
    }

    // MARK: shell, poll mode

    @Test("a failing command gives an error with its exit status and the tail of its stderr")
    func failingCommand() async throws {
        let config = """
            version: 1
            sources:
              broken:
                kind: shell
                script: "echo starting; echo oops >&2; exit 3"
                retry: off
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            let error = try await hammock.waitFor(type: "source", id: "broken") { $0.event == "error" }
            #expect(error[pointer: "/state/latestError/exitStatus"] == 3, "\(error)")
            #expect(error.errorMessage.contains("oops"), "the stderr tail is in the message: \(error)")
            #expect(!error.errorMessage.contains("starting"), "stdout is not: \(error)")
            #expect(error.content?.isNull == true, "\(error)")
            #expect(error[pointer: "/state/isLoading"] == false, "\(error)")
            #expect(error[pointer: "/state/failures"] == 1, "\(error)")
        }
    }

    /// Through the real plugin, which ignores SIGPIPE and SIGINT itself: its commands must not inherit that
    /// (in-process, the test runner ignores neither, so only this shows it). glibc's `posix_spawn` leaves its
    /// two internal signals, 32 and 33, ignored in every child.
    @Test("a command starts with every signal at its default action and none blocked, though the plugin ignores SIGPIPE and SIGINT")
    func commandSignals() async throws {
        let config = """
            version: 1
            sources:
              masks:
                kind: shell
                script: "grep -E '^Sig(Ign|Blk)' /proc/self/status"
                parse: lines
                retry: off
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            let answer = try await hammock.waitFor(type: "source", id: "masks") { $0.event == "newData" }
            let masks = (answer.content?.arrayValue ?? []).compactMap { line in
                line.stringValue?.split(separator: "\t").last.flatMap { UInt64($0, radix: 16) }
            }
            #expect(masks.count == 2 && masks.allSatisfy { $0 & ~0x1_8000_0000 == 0 }, "\(answer)")
        }
    }

    /// Checked inside a command the real plugin runs (the plugin's own descriptors are what could leak: its
    /// pipes to hammock, its epoll and event descriptors, other commands' pipes), not in the test runner. The
    /// command is `ls` itself, so its descriptors are the command's, plus the one `ls` opens on the folder.
    @Test("a command starts with only fds 0, 1 and 2 open (stdin /dev/null), whatever the plugin has open")
    func commandDescriptors() async throws {
        let config = """
            version: 1
            sources:
              fds:
                kind: shell
                command: [ls, -l, /proc/self/fd]
                parse: lines
                retry: off
              busy:
                kind: shell
                command: [sleep, "0.3"]
                refresh: 100ms
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            let answer = try await hammock.waitFor(type: "source", id: "fds") { $0.event == "newData" }
            // `lr-x------ 1 user group 64 Nov 27 20:19 0 -> /dev/null`: the descriptor and where it leads.
            let open = (answer.content?.arrayValue ?? []).compactMap(\.stringValue).compactMap { line -> (String, String)? in
                guard let arrow = line.range(of: " -> ") else { return nil }
                let descriptor = line[..<arrow.lowerBound].split(separator: " ").last.map(String.init) ?? ""
                return (descriptor, String(line[arrow.upperBound...]))
            }
            let leaked = open.filter { descriptor, target in
                !["0", "1", "2"].contains(descriptor) && !(target.hasPrefix("/proc/") && target.hasSuffix("/fd"))
            }
            #expect(open.count >= 3 && leaked.isEmpty, "the command's open descriptors: \(open)")
            #expect(open.first.map { $0.0 == "0" && $0.1 == "/dev/null" } == true, "\(open)")
        }
    }

    @Test("a command that fails after it succeeded keeps the earlier content beside the error")
    func failureKeepsContent() async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let marker = folder + "/ran-once"
        // The first run leaves a marker and succeeds; every later run finds it and fails.
        let script = """
            if [ -e '\(marker)' ]; then echo 'second run broke' >&2; exit 3; fi; \
            touch '\(marker)'; echo '{"ok": true}'
            """
        let config = """
            version: 1
            sources:
              flaky:
                kind: shell
                script: \(TestFiles.yamlQuoted(script))
                parse: json
                refresh: 300ms
                retry: off
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            let data = try await hammock.waitFor(type: "source", id: "flaky") { $0.event == "newData" }
            #expect(data.content == ["ok": true], "\(data)")
            let error = try await hammock.waitFor(type: "source", id: "flaky") { $0.event == "error" }
            #expect(error.content == ["ok": true], "the error state keeps the earlier content: \(error)")
            #expect(error[pointer: "/state/latestError/exitStatus"] == 3, "\(error)")
            #expect(error.errorMessage.contains("second run broke"), "\(error)")
        }
    }

    @Test("a watched file that is deleted fails with code fileMissing and keeps the earlier content beside the error")
    func fileMissingKeepsContent() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { HammockProcess.removeTemporaryDirectory(folder) }
        let path = folder + "/status.json"
        try TestFiles.writeInPlace(#"{"ok": true}"#, to: path)
        let config = """
            version: 1
            sources:
              status: { kind: file, path: \(TestFiles.yamlQuoted(path)), parse: json, refresh: 300ms, retry: off }
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            let data = try await hammock.waitFor(type: "source", id: "status") { $0.event == "newData" }
            #expect(data.content == ["ok": true], "\(data)")
            try FileManager.default.removeItem(atPath: path)
            let error = try await hammock.waitFor(type: "source", id: "status") { $0.event == "error" }
            #expect(error[pointer: "/state/latestError/code"] == "fileMissing", "\(error)")
            #expect(error.content == ["ok": true], "the error state keeps the earlier content: \(error)")
        }
    }

    @Test("a command that is gone fails with code commandNotFound and keeps the earlier content beside the error")
    func commandNotFoundKeepsContent() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { HammockProcess.removeTemporaryDirectory(folder) }
        let tool = folder + "/status-tool"
        try Data("#!/bin/sh\necho '{\"ok\": true}'\n".utf8).write(to: URL(fileURLWithPath: tool))
        #expect(chmod(tool, 0o755) == 0)
        let config = """
            version: 1
            sources:
              status: { kind: shell, command: [\(TestFiles.yamlQuoted(tool))], parse: json, refresh: 300ms, retry: off }
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            let data = try await hammock.waitFor(type: "source", id: "status") { $0.event == "newData" }
            #expect(data.content == ["ok": true], "\(data)")
            // The command is uninstalled while hammock runs.
            try FileManager.default.removeItem(atPath: tool)
            let error = try await hammock.waitFor(type: "source", id: "status") { $0.event == "error" }
            #expect(error[pointer: "/state/latestError/code"] == "commandNotFound", "\(error)")
            #expect(error.content == ["ok": true], "the error state keeps the earlier content: \(error)")
        }
    }

    @Test("a command past its timeout fails with code timeout, and what it started in the background is ended")
    func timeoutEndsTheGroup() async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pidFile = folder + "/background.pid"
        let config = """
            version: 1
            sources:
              slow:
                kind: shell
                script: "sleep 30 & echo $! > '\(pidFile)'; sleep 30"
                timeout: 3s
                retry: off
            """
        var backgroundPID: Int32?
        defer {
            // Whatever the outcome, leave nothing behind.
            if let backgroundPID, ProcessTable.isAlive(pid: backgroundPID) { kill(backgroundPID, SIGKILL) }
        }
        try await HammockProcess.withRunning(config: config) { hammock in
            // The background sleep runs before the timeout: the test would prove nothing otherwise.
            let started = try await ProcessTable.eventually(within: .seconds(5)) {
                guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
                    let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
                else { return false }
                backgroundPID = pid
                return true
            }
            try #require(started, "the script wrote the background pid to \(pidFile)")
            let pid = try #require(backgroundPID)
            // Known by its start time too when it is still there, so a reused pid is not taken for it. On a
            // loaded machine the timeout may have ended it before this line: then the pid alone tells (a
            // `sleep 30` gone within seconds was ended, and a pid is not reused that soon).
            let background = ProcessTable.entry(pid)
            let isAlive = { background.map(ProcessTable.isAlive) ?? ProcessTable.isAlive(pid: pid) }

            let error = try await hammock.waitFor(type: "source", id: "slow") { $0.event == "error" }
            #expect(error[pointer: "/state/latestError/code"] == "timeout", "\(error)")
            // The plugin answers once the group is gone; allow a moment for a slow machine all the same.
            let gone = try await ProcessTable.eventually(within: .seconds(3)) { !isAlive() }
            #expect(gone, "the background child \(pid) of the timed-out command still runs")
        }
    }

    // MARK: shell, stream mode

    @Test("a stream command's lines arrive in order: the first as a load, the rest as pushes")
    func streamInOrder() async throws {
        // A pause after the first line keeps it apart from the second: hammock's output queue may replace a
        // state still waiting to be written by a newer one of the same source (a slow consumer, or a busy
        // machine), which is allowed; a pause makes that unlikely for the load line, whose origin is checked.
        let config = """
            version: 1
            sources:
              counter:
                kind: shell
                mode: stream
                parse: json
                script: "echo 1; sleep 0.3; i=2; while [ $i -le 20 ]; do echo $i; i=$((i+1)); sleep 0.05; done; sleep 30"
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitFor(type: "source", id: "counter") { $0.event == "newData" && $0.content == 20 }
            // Give a stray line after the last one (a restart, a duplicate) the time to show.
            try await Task.sleep(for: .milliseconds(200))
            let newData = hammock.lines.filter { $0.type == "source" && $0.id == "counter" && $0.event == "newData" }
            let contents = newData.map { $0.content?.numberValue?.intValue ?? -1 }
            let shown = newData.map(\.text)
            #expect(contents.first == 1 && newData.first?.origin == "load", "the first line answers the load: \(shown)")
            #expect(contents.last == 20, "\(shown)")
            // In order, none twice; lines may only be missing where a newer state replaced a waiting one.
            #expect(zip(contents, contents.dropFirst()).allSatisfy { $0 < $1 }, "in order: \(contents)")
            #expect(newData.dropFirst().allSatisfy { $0.origin == "push" }, "the rest are pushes: \(shown)")
            let errors = hammock.lines.filter { $0.id == "counter" && $0.event == "error" }
            #expect(errors.isEmpty, "\(errors.map(\.text))")
            if contents.count < 20 {
                // Not a failure (see above), but worth seeing when it happens.
                print("streamInOrder: \(20 - contents.count) states replaced in hammock's output queue: \(contents)")
            }
        }
    }

    // MARK: options checked by the plugin

    @Test("check and run report a shell source's bad options at their YAML line and column, exit 2")
    func pluginValidation() async throws {
        let directory = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            version: 1
            sources:
              fine: { kind: fake, content: 1 }
              typo:
                kind: shell
                comand: [echo, hi]
                script: "echo hi"
                mode: streem
            """, in: directory)
        //  6     comand: [echo, hi]      the key starts at line 6, column 5
        //  8     mode: streem            the key starts at line 8, column 5
        let check = try await HammockProcess.execute(["check", path])
        #expect(check.termination == .exited(2), "stdout: \(check.stdout) stderr: \(check.stderr)")
        let output = check.stdout + check.stderr
        // Diagnostics only, not the summary line (`PATH: 2 errors`).
        let problems = output.split(separator: "\n").map(String.init).filter {
            $0.hasPrefix(path + ":") && $0.dropFirst(path.count + 1).first?.isNumber == true
        }
        #expect(problems.count == 2, "exactly the two problems: \(output)")
        let unknownKey = problems.first { $0.contains("comand") }
        #expect(unknownKey?.hasPrefix(path + ":6:5: ") == true, "the unknown key, at 6:5: \(output)")
        #expect(unknownKey?.contains("command") == true, "a did-you-mean: \(unknownKey ?? output)")
        let badMode = problems.first { $0.contains("streem") || $0.contains("mode") && $0 != unknownKey }
        #expect(badMode?.hasPrefix(path + ":8:5: ") == true, "the bad mode, at 8:5: \(output)")

        let run = try await HammockProcess.execute(["run", path])
        #expect(run.termination == .exited(2), "stdout: \(run.stdout) stderr: \(run.stderr)")
        #expect(run.stdout.isEmpty, "nothing on stdout, not even hello: \(run.stdout)")
        #expect(run.stderr.contains(path + ":6:5: "), "\(run.stderr)")
        #expect(run.stderr.contains(path + ":8:5: "), "\(run.stderr)")
    }
}
