import Foundation
import HammockCore
import HammockJSON
import Testing

@testable import HammockPluginKit
@testable import HammockShellPlugin

/// A poll source in-process: real commands, no plugin process and no protocol in between.
@Suite struct PollSourceTests {
    private func load(_ options: JSONValue, timeout: Duration? = nil) async throws -> PluginLoadResult {
        let source = PollSource(options: try ShellOptions(options))
        let result = await source.load(PluginLoadRequest(id: 1, timeout: timeout))
        await source.stop()
        return result
    }

    private func content(_ options: JSONValue) async throws -> JSONValue? {
        guard case .newData(let content, _, _) = try await load(options) else { return nil }
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

    @Test func outputPastMaxBytesEndsTheCommand() async throws {
        let error = try #require(try await failure(["script": "head -c 5000 /dev/zero; sleep 30", "maxBytes": 1000]))
        #expect(error == SourceError(message: "output exceeded maxBytes (1000 bytes); the command was ended", code: .outputTooLarge))
        #expect(try await content(["script": "printf 12345", "maxBytes": 5]) == "12345")
    }

    @Test func aStoppedSourceRunsNothing() async throws {
        let source = PollSource(options: try ShellOptions(["command": ["echo", "hi"]]))
        await source.stop()
        guard case .error(let error) = await source.load(PluginLoadRequest(id: 1)) else {
            Issue.record("a stopped source ran its command")
            return
        }
        #expect(error == SourceError(message: "the source was stopped", code: .stopped))
    }
}
