import Foundation
import HammockClient
import HammockTestSupport
import Testing

/// `Hammock.attach`: the client over `hammock attach`, so over the configuration's shared engine (issue 27).
@Suite("The client attaches to a shared engine")
struct ClientSharedEngineTests {
    @Test("Hammock.attach starts the shared engine, reads its states, and a second attach shares it")
    func attachReadsStates() async throws {
        try await RunSlots.withSlot {
            let directory = try HammockProcess.makeTemporaryDirectory()
            let runtime = directory + "/run"
            try FileManager.default.createDirectory(
                atPath: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            let socket = runtime + "/engine.sock"
            // Every engine of this test: its `--socket` is under `runtime`.
            let serves = {
                ProcessTable.all().filter { entry in
                    entry.state != "Z" && entry.arguments.dropFirst().first == "serve" && entry.arguments.contains(socket)
                }
            }
            defer {
                for serve in serves() { kill(serve.pid, SIGKILL) }
                HammockProcess.removeTemporaryDirectory(directory)
            }
            let path = try HammockProcess.writeConfig(fakeConfig, in: directory)
            let attach = {
                try await Hammock.attach(
                    configuration: path, socket: socket, binary: try HammockProcess.executablePath(),
                    arguments: ["--idle-exit", "1s"],
                    environment: HammockProcess.environment(["XDG_RUNTIME_DIR": runtime], home: directory),
                    workingDirectory: directory)
            }
            let first = try await attach()
            #expect(first.ids == EngineIDs(sources: ["greeting", "numbers"], views: ["both"]))
            let greeting = await first.source("greeting", as: Greeting.self)
            #expect(try await HammockClientTests.first("greeting's content", in: greeting.contents) == Greeting(text: "hello", count: 3))

            let second = try await attach()
            let both = await second.view("both", as: Both.self)
            let view = try await HammockClientTests.first("the view's data", in: both.viewStates) { $0.status == .data }
            #expect(view.content?.greeting == Greeting(text: "hello", count: 3))
            #expect(serves().count == 1, "one engine for both: \(serves())")

            await first.stop()
            await second.stop()
            // The clients are gone; the engine they shared goes after its idle second.
            #expect(try await ProcessTable.eventually(within: .seconds(10)) { serves().isEmpty })
        }
    }
}
