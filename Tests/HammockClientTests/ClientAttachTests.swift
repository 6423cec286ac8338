import Foundation
import HammockClient
import HammockCore
import HammockJSON
import HammockTestSupport
import Testing

@Suite("The client attaches to an engine the app started")
struct ClientAttachTests {
    /// The app's own start of `hammock run`: its stdin, stdout and stderr are pipes whose other ends it
    /// hands to the client.
    struct Started {
        let process: Process
        let input: Int32
        let output: Int32
        let errors: Int32
    }

    static func startEngine(config: String, in directory: String) throws -> Started {
        let path = try HammockProcess.writeConfig(config, in: directory)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try HammockProcess.executablePath())
        process.arguments = ["run", path]
        process.environment = HammockProcess.environment([:], home: directory)
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // The child has its own copies; the client owns ours from here.
        try input.fileHandleForReading.close()
        try output.fileHandleForWriting.close()
        try errors.fileHandleForWriting.close()
        return Started(
            process: process, input: dup(input.fileHandleForWriting.fileDescriptor),
            output: dup(output.fileHandleForReading.fileDescriptor),
            errors: dup(errors.fileHandleForReading.fileDescriptor))
    }

    /// Waits up to 10 s for `process` to end; kills it and fails if it does not.
    static func waitForExit(_ process: Process) async throws -> Int32 {
        let deadline = ContinuousClock.now + .seconds(10)
        while process.isRunning {
            if ContinuousClock.now > deadline {
                process.interrupt()
                kill(process.processIdentifier, SIGKILL)
                throw ClientTestFailure("hammock did not exit within 10 s", #_sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }

    @Test("attached: typed states, acknowledged control; stop() closes the pipes and the engine exits 0")
    func attachAndStop() async throws {
        try await RunSlots.withSlot {
            let directory = try HammockProcess.makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let engine = try Self.startEngine(config: fakeConfig, in: directory)
            defer { if engine.process.isRunning { kill(engine.process.processIdentifier, SIGKILL) } }
            let hammock = try Hammock(attachingTo: engine.input, output: engine.output, errors: engine.errors)
            let greeting = await hammock.source("greeting", as: Greeting.self)
            // Whatever was written before the client read, a snapshot writes every state again.
            try await hammock.snapshot()
            #expect(try await first("greeting's content", in: greeting.contents) == Greeting(text: "hello", count: 3))
            try await greeting.override(Greeting(text: "attached", count: 1))
            #expect(greeting.state.content?.text == "attached")

            await hammock.stop()
            #expect(await drain(greeting.states) == nil)
            #expect(try await Self.waitForExit(engine.process) == 0)
        }
    }

    @Test("attached: the engine's end is engineExited with an unknown status and its stderr's tail")
    func attachedEngineEnds() async throws {
        try await RunSlots.withSlot {
            let directory = try HammockProcess.makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let engine = try Self.startEngine(config: ClientLifecycleTests.config, in: directory)
            defer { if engine.process.isRunning { kill(engine.process.processIdentifier, SIGKILL) } }
            let hammock = try Hammock(attachingTo: engine.input, output: engine.output, errors: engine.errors)
            let talker = await hammock.source("talker", as: String.self)
            try await hammock.snapshot()
            _ = try await first("talker's content", in: talker.contents)

            kill(engine.process.processIdentifier, SIGTERM)
            let error = await drain(talker.states)
            guard case .engineExited(let status, let tail)? = error as? HammockError else {
                Issue.record("the stream ended with \(String(describing: error)), not engineExited")
                return
            }
            #expect(status == .unknown)
            #expect(tail.contains("client-test-marker"), "\(tail)")
            #expect(await hammock.byeReason == "signal")
            #expect(try await Self.waitForExit(engine.process) == 0)
        }
    }
}
