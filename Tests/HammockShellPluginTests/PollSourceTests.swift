import Foundation
import HammockCore
import HammockJSON
import Synchronization
import Testing

@testable import HammockPluginKit
@testable import HammockShellPlugin

/// A poll source in-process: real commands, no plugin process and no protocol in between.
@Suite struct PollSourceTests {
    /// What `ShellPlugin.plugin` gives its sources, made for this suite: one watcher for every command, and
    /// the slots `HAMMOCK_SHELL_CONCURRENCY` (else the default) allows.
    private static let watcher = CommandWatcher()
    private static let slots = ShellPlugin.configuredSlots()

    private func pollSource(_ options: ShellOptions) -> PollSource {
        PollSource(options: options, slots: Self.slots, watcher: Self.watcher)
    }

    private func load(_ options: JSONValue, timeout: Duration? = nil) async throws -> PluginLoadResult {
        let source = pollSource(try ShellOptions(options))
        let result = await source.load(PluginLoadRequest(id: 1, timeout: timeout))
        await source.stop()
        return result
    }

    private func content(_ options: JSONValue, timeout: Duration? = nil) async throws -> JSONValue? {
        guard case .newData(let content, _, _) = try await load(options, timeout: timeout).answer else { return nil }
        return content
    }

    private func failure(_ options: JSONValue, timeout: Duration? = nil) async throws -> SourceError? {
        guard case .error(let error) = try await load(options, timeout: timeout) else { return nil }
        return error
    }

    @Test func eachFormatTurnsTheOutputIntoContent() async throws {
        #expect(try await content(["command": ["echo", "hi"]]) == "hi")
        #expect(try await content(["command": ["printf", "one\\ntwo\\n"], "parse": "lines"]) == ["one", "two"])
        #expect(try await content(["script": #"echo '{"a": [1, true]}'"#, "parse": "json"]) == ["a": [1, true]])
        #expect(try await content(["script": "printf 'name: x\\ncount: 3\\n'", "parse": "yaml"]) == ["name": "x", "count": 3])
    }

    @Test func outputThatDoesNotParseIsAParseFailure() async throws {
        let error = try #require(try await failure(["script": "echo 'not json'", "parse": "json"]))
        #expect(error.code == .parseFailed)
        #expect(error.message.hasPrefix("stdout is not JSON"), "\(error.message)")
    }

    @Test func theEnvironmentIsThePluginsWithTheSourcesOnTop() async throws {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        #expect(try await content(["script": "echo \"$GREETING:$PATH\"", "env": ["GREETING": "hello"]]) == .string("hello:\(path)"))
        #expect(try await content(["script": "echo \"$PATH\"", "env": ["PATH": "/nowhere"]]) == "/nowhere")
    }

    @Test func launchFailuresSayWhatWasMissing() async throws {
        let command = try #require(try await failure(["command": ["hammock-no-such-command-xyz"]]))
        #expect(command == SourceError(message: "command not found: hammock-no-such-command-xyz", code: .commandNotFound))
        let directory = try #require(try await failure(["command": ["true"], "cwd": "/hammock/no/such/directory"]))
        #expect(directory.code == .badWorkingDirectory, "\(directory)")
        #expect(directory.message == #"cannot change to the working directory "/hammock/no/such/directory""#)
    }

    @Test func aTimeoutEndsTheCommand() async throws {
        let started = ContinuousClock.now
        let error = try #require(try await failure(["command": ["sleep", "60"]], timeout: .milliseconds(200)))
        #expect(error == SourceError(message: "timed out after 200ms", code: .timeout))
        // Generous: beside the whole suite, on two cores, this has taken 10 s; a command not ended takes 60.
        #expect(ContinuousClock.now - started < .seconds(45), "the command was not ended")
    }

    /// The command itself is gone at once, but a job it left in the background holds stdout: the timeout
    /// still ends the group, job included.
    @Test func aTimeoutEndsABackgroundJobThatHoldsTheOutput() async throws {
        let started = ContinuousClock.now
        let error = try #require(try await failure(["script": "sleep 60 & echo started"], timeout: .milliseconds(300)))
        #expect(error == SourceError(message: "timed out after 300ms", code: .timeout))
        #expect(ContinuousClock.now - started < .seconds(30), "the background job was not ended")
    }

    /// The watcher's thread sleeps until the nearest deadline; one that comes later but falls sooner must wake it.
    @Test func aShorterTimeoutThatComesLaterIsKept() async throws {
        let long = pollSource(try ShellOptions(["command": ["sleep", "60"]]))
        let waiting = Task { await long.load(PluginLoadRequest(id: 1, timeout: .seconds(30))) }
        try await Task.sleep(for: .milliseconds(300))  // the thread now sleeps until the 30 s deadline
        let started = ContinuousClock.now
        let error = try #require(try await failure(["command": ["sleep", "60"]], timeout: .milliseconds(200)))
        #expect(error == SourceError(message: "timed out after 200ms", code: .timeout))
        // Generous for a loaded machine; waiting out the first command's deadline would take 30 s.
        #expect(ContinuousClock.now - started < .seconds(10), "the sooner deadline waited for the later one")
        await long.stop()
        _ = await waiting.value
    }

    @Test func outputPastMaxBytesEndsTheCommand() async throws {
        let error = try #require(try await failure(["script": "head -c 5000 /dev/zero; sleep 30", "maxBytes": 1000]))
        #expect(error == SourceError(message: "output exceeded maxBytes (1000 bytes); the command was ended", code: .outputTooLarge))
        #expect(try await content(["script": "printf 12345", "maxBytes": 5]) == "12345")
    }

    @Test func aStoppedSourceRunsNothing() async throws {
        let source = pollSource(try ShellOptions(["command": ["echo", "hi"]]))
        await source.stop()
        guard case .error(let error) = await source.load(PluginLoadRequest(id: 1)) else {
            Issue.record("a stopped source ran its command")
            return
        }
        #expect(error == SourceError(message: "the source was stopped", code: .stopped))
    }

    @Test func aCommandStartsCleanInAGroupOfItsOwn() async throws {
        // Only 0, 1 and 2 (and ls's own descriptor for the directory): nothing of the plugin's leaks in.
        #expect(try await content(["command": ["ls", "/proc/self/fd"], "parse": "lines"]) == ["0", "1", "2", "3"])
        #expect(try await content(["command": ["readlink", "/proc/self/fd/0"]]) == "/dev/null")
        // No signal ignored or blocked. glibc's posix_spawn leaves its two internal signals (32 and 33, which glibc
        // programs cannot use) ignored in every child. The test runner ignores no signal, so that the plugin's
        // ignored SIGPIPE and SIGINT are not passed on is shown through the real plugin (`PluginTests`).
        let masks = try #require(try await content(["script": "grep -E '^Sig(Ign|Blk)' /proc/self/status", "parse": "lines"]))
        let values = (masks.arrayValue ?? []).compactMap { $0.stringValue?.split(separator: "\t").last.flatMap { UInt64($0, radix: 16) } }
        #expect(values.count == 2 && values.allSatisfy { $0 & ~0x1_8000_0000 == 0 }, "\(masks)")
        #expect(try await content(["script": "yes | head -n 2", "parse": "lines"]) == ["y", "y"])
        // Its process group is its own: the group's id is its pid (field 5 of /proc/PID/stat).
        let ids = try #require(try await content(["script": "echo $$; cut -d' ' -f5 /proc/$$/stat", "parse": "lines"]))
        #expect(ids.arrayValue?.count == 2 && ids.arrayValue?.first == ids.arrayValue?.last, "\(ids)")
    }

    @Test func bothPipesAreReadAtOnceSoAFullOneStallsNothing() async throws {
        // 300 KB to stderr before a word to stdout: a reader that took stdout to its end first would wait for ever.
        // The timeout bounds the test: a reader that stalled would see it fire instead of "ok". 20 s failed once
        // in a clean-clone CI run on a machine that was building beside it, without saying what came back: a
        // minute now, and a failure quotes the answer (a timeout, or a stall's other end).
        let answer = try await load(["script": "head -c 300000 /dev/zero | tr '\\0' e >&2; echo ok"], timeout: .seconds(60))
        guard case .newData("ok", _, _) = answer.answer else {
            Issue.record("\(answer)")
            return
        }
        let error = try #require(try await failure(["script": "yes eeeeeeeee | head -c 300000 >&2; echo last >&2; exit 3"], timeout: .seconds(60)))
        // Only the end of stderr (2 KiB), from the start of a line.
        #expect(error.message.hasPrefix("exited with status 3: eeeeeeeee\neeeeeeeee\n"), "\(error.message.prefix(80))")
        #expect(error.message.hasSuffix("eeeeeeeee\nlast") && error.message.utf8.count < 2100, "\(error.message.suffix(80))")
    }

    /// Hundreds of commands at once, some with more output than a pipe holds, some that end before they are
    /// read, some that close their stdout long before they end: each is answered with its own output.
    /// Descriptors are reused the moment one is closed, so this is where a run that stopped watching a
    /// descriptor by number after closing it took another command's wake-ups, which then never ended. So the
    /// loads run apart from the test, which waits a minute at most for them.
    @Test func manyCommandsAtOnceEachGetTheirOwnAnswer() async throws {
        let slots = CommandSlots(limit: 64)
        let results = Answers()
        for n in 0..<600 {
            Task {
                let options: JSONValue =
                    switch n % 4 {
                    case 0: ["command": .array(["printf", .string("\(n)")])]
                    case 1: ["script": .string("head -c 100000 /dev/zero | tr '\\0' x | head -c \(n); printf ' \(n)'")]
                    case 2: ["script": .string("echo \(n) >&2; printf \(n)")]
                    // Its stdout ends well before it does: its descriptor's number is free for another command
                    // while this run goes on.
                    default: ["script": .string("printf \(n); exec >&-; sleep 0.05")]
                    }
                let source = PollSource(options: try! ShellOptions(options), slots: slots, watcher: Self.watcher)
                let result = await source.load(PluginLoadRequest(id: n, timeout: .seconds(30)))
                await source.stop()
                results.map.withLock { $0[n] = result }
            }
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while results.map.withLock({ $0.count }) < 600 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let answered = results.map.withLock { $0 }
        let missing = (0..<600).filter { answered[$0] == nil }
        #expect(missing.isEmpty, "\(missing.count) commands never answered, \(missing.prefix(10)) among them")
        for (n, result) in answered {
            let expected = n % 4 == 1 ? String(repeating: "x", count: n) + " \(n)" : "\(n)"
            guard case .newData(let content, _, _) = result.answer else {
                Issue.record("command \(n): \(result)")
                continue
            }
            #expect(content == .string(expected), "command \(n)")
        }
    }
}

private final class Answers: Sendable {
    let map = Mutex<[Int: PluginLoadResult]>([:])
}
