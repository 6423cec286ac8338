import Foundation
import HammockCore
import HammockJSON
import HammockPluginKit
import Synchronization
import Testing

@testable import HammockEngine
@testable import HammockPluginHost

/// The harness itself: its clock moves only when told, its plugins are the test's, its stdout and stop
/// behave as hammock's do.
@Suite("EmbeddedEngine")
struct EmbeddedEngineTests {
    @Test("time moves only when the test says: a refresh of 1 s is due at 1 s, not before")
    func manualClock() async throws {
        let loads = Tally()
        let plugin = TestPlugin.answering { _, _ in .newData(.number(JSONNumber(loads.next()))) }
        let config = "version: 1\nsources:\n  tick: { kind: test, refresh: 1s }\n"
        try await EmbeddedEngine.run(config, plugins: [plugin]) { engine in
            try await engine.next("tick") { $0.content == 1 }
            let started = engine.clock.now
            #expect(engine.clock.deadline == started.instant + .seconds(1), "the core asked for its refresh")
            engine.advance(by: .milliseconds(999))
            // A round trip through the loop: had the refresh been due, its lines would come before the ack.
            engine.send(controlLine: #"{"op":"snapshot","id":"mark"}"#)
            try await engine.waitFor(type: "ack") { $0["id"] == "mark" }
            #expect(loads.count == 1)
            engine.advance(by: .milliseconds(1))
            try await engine.next("tick") { $0.content == 2 }
            let loaded = try #require(engine.lines.last { $0.id == "tick" && $0.content == 2 })
            #expect(loaded[pointer: "/state/timestamp"] == .string((started.wall + .seconds(1)).rfc3339))
        }
    }

    @Test("a stop writes bye last and exits 0; a consumer that closes stdout ends the run")
    func stopAndClosedStdout() async throws {
        let status = try await EmbeddedEngine.run("version: 1\nsources:\n  a: { kind: fake, content: 1 }\n") { engine in
            try await engine.next("a") { $0.event == "newData" }
            engine.stop(signal: SIGTERM)
            #expect(try await engine.waitForExit() == 0)
            let bye = try #require(engine.lines.last)
            #expect(bye.type == "bye")
            #expect(bye["reason"] == "signal")
        }
        #expect(status == 0)
        let once = try await EmbeddedEngine.run(
            "version: 1\nsources:\n  a: { kind: fake, state: loading }\n", options: RunOptions(once: true)
        ) { engine in
            try await engine.next("a") { $0.event == "requested" }
            engine.closeStdout()
            _ = try await engine.waitForExit()
        }
        #expect(once == 1, "--once cut short by a closed stdout does not say it is done")
    }

    @Test("a played plugin sees the host's lines and answers them; the engine shows its answer")
    func playedPlugin() async throws {
        let started = Mailbox<EmbeddedPlugin>()
        let played = TestPlugin.embedded("test") { plugin, _ in started.put(plugin) }
        let config = "version: 1\nsources:\n  s: { kind: test }\n"
        try await EmbeddedEngine.run(config, plugins: [played], validatingPlugins: false) { engine in
            let plugin = try #require(await started.take())
            await plugin.shakeHands(kind: "test")
            let configure = try #require(await plugin.expect("configure"))
            #expect(configure["source"] == "s")
            plugin.say(#"{"type":"configured","source":"s"}"#)
            let load = try #require(await plugin.expect("load"))
            #expect(load["source"] == "s")
            let id = try #require(load["id"])
            plugin.say(#"{"type":"newData","source":"s","id":\#(id),"content":{"answered":true}}"#)
            let line = try await engine.next("s") { $0.event == "newData" }
            #expect(line.content == ["answered": true])
        }
    }
}
