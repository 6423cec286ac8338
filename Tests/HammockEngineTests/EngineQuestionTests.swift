import Glibc
import HammockCore
import HammockJSON
import HammockPluginKit
import Synchronization
import Testing

@testable import HammockEngine

/// `Engine.ask`: what `--http`'s `/healthz` and `/readyz` ask the loop, answered in its turn.
@Suite("Engine questions", .timeLimit(.minutes(1)))
struct EngineQuestionTests {
    @Test("readiness: the sources still waiting for a first answer, of all or of some views; health: the loop answers")
    func readinessAndHealth() async throws {
        let released = Atomic<Bool>(false)
        let plugin = TestPlugin.answering { source, _ in
            while source == "slow" && !released.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(5)) }
            return .newData(.string(source))
        }
        let config = """
            version: 1
            sources:
              fast: { kind: test }
              slow: { kind: test }
            views:
              quick: { sources: [fast] }
            """
        try await EmbeddedEngine.run(config, plugins: [plugin]) { engine in
            try await engine.next("fast") { $0.content == "fast" }
            #expect(await engine.ask(.health) == .alive(sources: 2, watched: 2))
            #expect(await engine.ask(.readiness(views: nil)) == .waiting(["slow"]))
            #expect(await engine.ask(.readiness(views: ["quick"])) == .waiting([]))
            #expect(await engine.ask(.readiness(views: ["quick", "nope"])) == .unknownViews(["nope"]))
            released.store(true, ordering: .relaxed)
            try await engine.next("slow") { $0.content == "slow" }
            #expect(await engine.ask(.readiness(views: nil)) == .waiting([]))
        }
    }

    /// Broken on purpose (the loop not answering `.question`), every ask here timed out.
    @Test("an engine that is not running answers nothing: ask gives nil after its timeout")
    func noLoopNoAnswer() async throws {
        var stopped: EmbeddedEngine?
        _ = try await EmbeddedEngine.run("version: 1\nsources:\n  a: { kind: fake, content: 1 }\n") { engine in
            try await engine.next("a") { $0.event == "newData" }
            #expect(await engine.ask(.health) != nil)
            stopped = engine
            engine.stop(signal: SIGTERM)
        }
        let after = try #require(stopped)
        #expect(await after.ask(.health, timeout: .milliseconds(200)) == nil)
    }
}
