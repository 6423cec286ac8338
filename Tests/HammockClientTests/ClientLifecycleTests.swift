import Foundation
import HammockClient
import HammockCore
import HammockJSON
import HammockSystem
import HammockTestSupport
import Testing

@Suite("The engine's end reaches every stream and call")
struct ClientLifecycleTests {
    /// A shell plugin that writes a known line on stderr as it starts (the engine passes plugins' stderr on
    /// to its own, before its `hello`), and a view.
    static func config() throws -> String {
        let plugin = try HammockProcess.productPath("hammock-plugin-shell")
        return """
            version: 1
            plugins:
              shell:
                command: [sh, -c, "echo client-test-marker >&2; exec \(plugin)"]
            sources:
              greeting:
                kind: fake
                content: { text: "hello", count: 3 }
              talker:
                kind: shell
                command: [echo, ok]
            views:
              one:
                sources: [greeting]
            """
    }

    @Test("SIGKILL: every stream and a pending call end with engineExited and the stderr tail")
    func killed() async throws {
        try await RunSlots.withSlot {
            let directory = try HammockProcess.makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = try HammockProcess.writeConfig(try Self.config(), in: directory)
            let hammock = try await Hammock.launch(
                configuration: path, binary: try HammockProcess.executablePath(),
                environment: HammockProcess.environment([:], home: directory), workingDirectory: directory)
            let greeting = await hammock.source("greeting", as: Greeting.self)
            let one = await hammock.view("one")
            let talker = await hammock.source("talker", as: String.self)
            _ = try await first("greeting's content", in: greeting.contents)
            _ = try await first("talker's content", in: talker.contents)
            let pid = try #require(hammock.processIdentifier)

            // Stopped, the engine cannot acknowledge: the call is pending when it is killed.
            try await stopProcess(pid)
            let pending = Task { try await greeting.load() }
            try await Task.sleep(for: .milliseconds(200))
            kill(pid, SIGKILL)

            func expectEngineKilled(_ error: (any Error)?, _ what: String) {
                guard case .engineExited(let status, let tail)? = error as? HammockError else {
                    Issue.record("\(what) ended with \(String(describing: error)), not engineExited")
                    return
                }
                #expect(status == .signaled(SIGKILL), "\(what)")
                #expect(tail.contains("client-test-marker"), "\(what): \(tail)")
            }
            do {
                try await pending.value
                Issue.record("the pending load returned")
            } catch {
                expectEngineKilled(error, "the pending load")
            }
            expectEngineKilled(await drain(greeting.states), "greeting's states")
            expectEngineKilled(await drain(talker.states), "talker's states")
            expectEngineKilled(await drain(one.viewStates), "the view's states")
            expectEngineKilled(await drain(one.states), "the view's loadable states")
            // A call after the end fails at once, the same way.
            do {
                try await hammock.snapshot()
                Issue.record("snapshot after the end returned")
            } catch {
                expectEngineKilled(error, "a later snapshot")
            }
            expectEngineKilled(try await hammock.waitUntilEnded(timeout: .seconds(30)), "waitUntilEnded")
        }
    }

    @Test("a cancelled control call stops waiting for its ack")
    func cancelledCall() async throws {
        try await withClientEngine(config: fakeConfig) { hammock, _ in
            let greeting = await hammock.source("greeting", as: Greeting.self)
            _ = try await first("greeting's content", in: greeting.contents)
            let pid = try #require(hammock.processIdentifier)
            // Stopped, the engine cannot acknowledge.
            try await stopProcess(pid)
            defer { kill(pid, SIGCONT) }
            let call = Task { try await greeting.load() }
            try await Task.sleep(for: .milliseconds(100))
            call.cancel()
            await #expect(throws: CancellationError.self) { try await call.value }
            kill(pid, SIGCONT)
            // The engine carried the line out later; calls go on.
            try await hammock.snapshot()
        }
    }

    /// As Foundation's `Process` started it: a Ctrl-C in the app's terminal (SIGINT to the terminal's
    /// foreground group, the app's) goes to the app alone, which decides when the engine stops.
    @Test("the launched engine runs in a process group of its own, not the app's")
    func engineHasAGroupOfItsOwn() async throws {
        try await RunSlots.withSlot {
            let directory = try HammockProcess.makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = try HammockProcess.writeConfig(fakeConfig, in: directory)
            let hammock = try await Hammock.launch(
                configuration: path, binary: try HammockProcess.executablePath(), workingDirectory: directory)
            let pid = try #require(hammock.processIdentifier)
            let stat = try #require(ProcessStat(pid: pid))
            await hammock.stop()
            #expect(stat.group == pid)
            #expect(stat.group != getpgrp())
            #expect(stat.parent == getpid())
        }
    }

    @Test("stop() is graceful: bye, exit 0, streams end normally, no process left")
    func gracefulStop() async throws {
        try await RunSlots.withSlot {
            let directory = try HammockProcess.makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = try HammockProcess.writeConfig(try Self.config(), in: directory)
            let hammock = try await Hammock.launch(
                configuration: path, binary: try HammockProcess.executablePath(),
                environment: HammockProcess.environment([:], home: directory), workingDirectory: directory)
            let greeting = await hammock.source("greeting", as: Greeting.self)
            let talker = await hammock.source("talker", as: String.self)
            _ = try await first("greeting's content", in: greeting.contents)
            _ = try await first("talker's content", in: talker.contents)
            let pid = try #require(hammock.processIdentifier)
            let descendants = ProcessTable.descendants(of: pid)

            await hammock.stop()

            #expect(await hammock.byeReason == "signal")
            #expect(try await hammock.waitUntilEnded(timeout: .seconds(30)) == nil)
            #expect(await drain(greeting.states) == nil)
            #expect(!ProcessTable.isAlive(pid: pid))
            for process in descendants { #expect(!ProcessTable.isAlive(process), "\(process) outlived hammock") }
            await #expect(throws: HammockError.stopped) { try await greeting.load() }
        }
    }

    @Test("an invalid configuration: launch throws engineExited with the engine's diagnostic")
    func invalidConfiguration() async throws {
        try await RunSlots.withSlot {
            let directory = try HammockProcess.makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = try HammockProcess.writeConfig("version: 1\nsources:\n  x: { kind: nosuchkind }\n", in: directory)
            do {
                _ = try await Hammock.launch(
                    configuration: path, binary: try HammockProcess.executablePath(), workingDirectory: directory)
                Issue.record("launch returned")
            } catch HammockError.engineExited(let status, let tail) {
                #expect(status != .exited(0))
                #expect(tail.contains("config.yaml:"), "\(tail)")
            }
        }
    }

    @Test("the binary is looked up explicitly, then beside the executable; a wrong path says so")
    func binaryLookup() async throws {
        await #expect(throws: HammockError.binaryNotFound(searched: ["/nonexistent/hammock"])) {
            _ = try await Hammock.launch(configuration: "x.yaml", binary: "/nonexistent/hammock")
        }
        // The test executable sits beside the built hammock, as an app bundled with it would.
        try await RunSlots.withSlot {
            let directory = try HammockProcess.makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = try HammockProcess.writeConfig(fakeConfig, in: directory)
            let hammock = try await Hammock.launch(configuration: path, workingDirectory: directory)
            #expect(hammock.ids?.sources == ["greeting", "numbers"])
            await hammock.stop()
        }
    }
}

/// Reads `stream` to its end; returns the error it ended with, `nil` for a normal end (or after 10 s, with a
/// recorded issue).
func drain<Element: Sendable>(_ stream: AsyncThrowingStream<Element, any Error>) async -> (any Error)? {
    let outcome = await withTaskGroup(of: Result<Bool, any Error>?.self) { group in
        group.addTask {
            do {
                for try await _ in stream {}
                return .success(true)
            } catch {
                return .failure(error)
            }
        }
        group.addTask {
            try? await Task.sleep(for: .seconds(10))
            return nil
        }
        defer { group.cancelAll() }
        return await group.next() ?? nil
    }
    switch outcome {
    case .success?: return nil
    case .failure(let error)?: return error
    case nil:
        Issue.record("the stream did not end within 10 s")
        return nil
    }
}
