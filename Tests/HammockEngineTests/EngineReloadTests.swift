import Foundation
import HammockCore
import HammockJSON
import HammockPluginKit
import Synchronization
import Testing

@testable import HammockEngine
@testable import HammockPluginHost

/// A plugin of kind `test` made with HammockPluginKit, standing in for the `good` mode of
/// `Tests/Fixtures/misbehaving-plugin.py`: every load is answered with `{"n": <its plugin's load count>,
/// "pid": <its plugin's number>}`, where each start of the plugin (a process, in hammock) gets the next
/// number, so a test sees whether a load was served by the same plugin.
final class CountingPlugin: Sendable {
    private let starts = Mutex(0)
    /// The commands each start was made from (what `plugins:` said), in order.
    private let commands = Mutex<[[String]]>([])

    var startCount: Int { starts.withLock { $0 } }
    var startedCommands: [[String]] { commands.withLock { $0 } }

    func plugin(kinds: [String] = ["test"]) -> TestPlugin {
        TestPlugin.kit(kinds) { [self] command in
            let pid = starts.withLock { count in
                count += 1
                return count
            }
            commands.withLock { $0.append(command) }
            let loads = Tally()
            return PluginDescription(kinds: kinds, version: "0.1") { _ in
                ClosureSource { _ in .newData(["n": .number(JSONNumber(loads.next())), "pid": .number(JSONNumber(pid))]) }
            }
        }
    }
}

/// Hot reload, in memory: moved from `HammockEndToEndTests/ReloadTests.swift` and `AcknowledgedControlTests`,
/// every assertion kept. SIGHUP is the `.reload` input `SignalRouter` would send; the `test` kind is a
/// `CountingPlugin` (its "pid" the number of its start) or a plugin the test plays line by line.
@Suite("Hot reload, in memory")
struct EngineReloadTests {
    static func config(_ sources: String, views: String = "") -> String {
        "version: 1\nsources:\n" + sources + (views.isEmpty ? "" : "\nviews:\n" + views)
    }

    @Test("SIGHUP: the unchanged source keeps its plugin and state, the changed one reloads, removed and added ones follow")
    func reloadBySignal() async throws {
        let counting = CountingPlugin()
        let first = Self.config(
            """
              kept: { kind: test }
              changed: { kind: fake, content: "old" }
              dropped: { kind: fake, content: 1 }
            """, views: "  v: { sources: [kept, changed] }")
        try await EmbeddedEngine.run(first, plugins: [counting.plugin()]) { hammock in
            let kept = try await hammock.waitFor(type: "source", id: "kept") { $0.event == "newData" }
            let pluginPID = kept[pointer: "/state/content/pid"]
            try await hammock.waitUntil("changed and dropped loaded") { lines in
                lines.contains { $0.id == "changed" && $0.event == "newData" } && lines.contains { $0.id == "dropped" && $0.event == "newData" }
            }

            let second = Self.config(
                """
                  kept: { kind: test }
                  changed: { kind: fake, content: "new" }
                  added: { kind: fake, content: 2 }
                """, views: "  v: { sources: [kept, changed, added] }")
            try hammock.rewriteConfiguration(second)
            hammock.reload()

            try await hammock.waitFor(type: "removed", id: "dropped")
            let reloaded = try await hammock.waitFor(type: "reloaded")
            #expect(reloaded["sources"] == ["kept", "changed", "added"])
            try await hammock.waitUntil("changed reloaded with its new options, added loaded") { lines in
                lines.contains { $0.id == "changed" && $0[pointer: "/state/content"] == "new" }
                    && lines.contains { $0.id == "added" && $0.event == "newData" }
            }
            try await hammock.waitFor(type: "view", id: "v") { $0.status == "data" && $0[pointer: "/content/added"] == 2 }

            // The unchanged source was not reloaded, and its next load is served by the same plugin.
            hammock.send(controlLine: #"{"op":"load","source":"kept"}"#)
            let again = try await hammock.waitFor(type: "source", id: "kept") { $0.event == "newData" }
            #expect(again[pointer: "/state/content/pid"] == pluginPID, "the plugin of an unchanged kind is kept")
            #expect(again[pointer: "/state/content/n"] == 2, "the kept source loaded once before, once now: \(again.text)")
            #expect(counting.startCount == 1)
        }
    }

    @Test("an invalid new configuration is reported with line and column, and the running one goes on")
    func invalidReloadIsRejected() async throws {
        let config = """
            version: 1
            sources:
              tick: { kind: fake, content: 1, refresh: 200ms }
            """
        try await EmbeddedEngine.run(config) { hammock in
            try await hammock.next("tick") { $0.event == "newData" }

            try hammock.rewriteConfiguration(
                """
                version: 1
                sources:
                  tick: { kind: fake, content: 1, refresh: soon }
                """)
            hammock.send(controlLine: #"{"op":"reload"}"#)
            let error = try await hammock.waitFor(type: "error")
            let message = error["message"]?.stringValue ?? ""
            #expect(message.contains("reload failed"), "\(message)")
            #expect(message.contains("config.yaml:3:44:"), "the problem's line and column: \(message)")
            try await hammock.waitForLog(containing: "config.yaml:3:44:")
            // Still running the old configuration: tick keeps refreshing.
            hammock.advance(by: .milliseconds(200))
            try await hammock.next("tick") { $0.event == "newData" }
        }
    }

    static let ackConfig = """
        version: 1
        sources:
          a: { kind: fake, content: { v: 1 }, delay: 200ms, retry: off }
          b: { kind: fake, content: 2 }
        views:
          both: { sources: [a, b] }
        """

    /// The index of the first line after `mark` that satisfies `predicate`.
    func index(in hammock: EmbeddedEngine, after mark: Int, _ predicate: (WrittenLine) -> Bool) -> Int? {
        hammock.lines(since: mark).firstIndex(where: predicate).map { $0 + mark }
    }

    func isAck(_ id: JSONValue) -> @Sendable (WrittenLine) -> Bool { { $0.type == "ack" && $0["id"] == id } }

    @Test("each op's ack follows the lines it caused; refused lines get an error with their id; no id, no ack")
    func everyOpIsAnswered() async throws {
        try await EmbeddedEngine.run(Self.ackConfig) { hammock in
            try await hammock.waitUntil("both sources have data") { lines in
                lines.contains { $0.id == "a" && $0.event == "newData" } && lines.contains { $0.id == "b" && $0.event == "newData" }
            }

            var mark = hammock.lineCount
            hammock.send(controlLine: #"{"op":"load","source":"a","id":1}"#)
            let loadAck = try await hammock.waitFor(type: "ack")
            #expect(loadAck["id"] == 1)
            let requested = try #require(index(in: hammock, after: mark) { $0.id == "a" && $0.event == "requested" })
            #expect(requested < index(in: hammock, after: mark, isAck(1))!, "the ack comes after the requested line")

            mark = hammock.lineCount
            hammock.send(controlLine: #"{"op":"override","source":"b","content":[3],"id":"o-1"}"#)
            try await hammock.waitFor(type: "ack") { $0["id"] == "o-1" }
            let overridden = try #require(index(in: hammock, after: mark) { $0.id == "b" && $0.origin == "override" })
            #expect(overridden < index(in: hammock, after: mark, isAck("o-1"))!)

            mark = hammock.lineCount
            hammock.send(controlLine: #"{"op":"snapshot","id":12345678901234567890.50}"#)
            let snapshotAck = try await hammock.waitFor(type: "ack")
            #expect(snapshotAck.text.contains(#""id":12345678901234567890.50}"#), "the number is echoed as written: \(snapshotAck.text)")
            let ackIndex = try #require(index(in: hammock, after: mark) { $0.type == "ack" })
            for id in ["a", "b", "both"] {
                #expect(index(in: hammock, after: mark) { $0.id == id }.map { $0 < ackIndex } == true, "\(id)'s snapshot line precedes the ack")
            }

            // Refused: the error carries the id, whatever made the line wrong.
            hammock.send(controlLine: #"{"op":"load","source":"nope","id":"x"}"#)
            let unknown = try await hammock.waitFor(type: "error")
            #expect(unknown["id"] == "x")
            #expect(unknown["message"]?.stringValue?.hasPrefix(#"unknown source "nope""#) == true)
            hammock.send(controlLine: #"{"op":"lod","source":"a","id":9}"#)
            let badOp = try await hammock.waitFor(type: "error")
            #expect(badOp["id"] == 9)
            hammock.send(controlLine: #"{"op":"snapshot","id":true}"#)
            let badID = try await hammock.waitFor(type: "error")
            #expect(badID["id"] == nil)
            #expect(badID["message"]?.stringValue?.hasPrefix(#""id" must be a string or a number"#) == true)

            // Without an id: the same effect, and no ack.
            mark = hammock.lineCount
            hammock.send(controlLine: #"{"op":"wipe","source":"b"}"#)
            hammock.send(controlLine: #"{"op":"cancel","source":"b","id":"after"}"#)
            try await hammock.waitFor(type: "ack") { $0["id"] == "after" }
            #expect(hammock.lines(since: mark).filter { $0.type == "ack" }.count == 1)
            #expect(hammock.lines(since: mark).contains { $0.id == "b" && $0.origin == "wipe" })

            // A reload is answered once the new configuration is in force: after `removed` and `reloaded`.
            try hammock.rewriteConfiguration(
                """
                version: 1
                sources:
                  a: { kind: fake, content: { v: 1 }, delay: 200ms, retry: off }
                """)
            mark = hammock.lineCount
            hammock.send(controlLine: #"{"op":"reload","id":"r"}"#)
            try await hammock.waitFor(type: "ack", where: isAck("r"))
            let reloaded = try #require(index(in: hammock, after: mark) { $0.type == "reloaded" })
            let removed = try #require(index(in: hammock, after: mark) { $0.type == "removed" && $0.id == "b" })
            let reloadAck = try #require(index(in: hammock, after: mark, isAck("r")))
            #expect(removed < reloadAck && reloaded < reloadAck)

            // A refused reload answers its id with the reason, and the running configuration goes on.
            try hammock.rewriteConfiguration("version: 1\nsources:\n  a: { kind: fake, refresh: soon }\n")
            hammock.send(controlLine: #"{"op":"reload","id":"r2"}"#)
            let refused = try await hammock.waitFor(type: "error") { $0["id"] == "r2" }
            #expect(refused["message"]?.stringValue?.contains("reload failed") == true)
            hammock.send(controlLine: #"{"op":"load","source":"a","id":"still"}"#)
            try await hammock.waitFor(type: "ack") { $0["id"] == "still" }
            #expect(hammock.malformedLines.isEmpty)
        }
    }

    /// While a reload waits on a plugin (a `configure` it never answers), reload lines with an id each pile
    /// up for the reload after it: at most 1,000 wait; the rest are refused at once, and every id is
    /// answered exactly once.
    @Test("reloads with an id waiting behind a running reload are bounded: 1,000 are acknowledged after it, the rest refused")
    func reloadAnswersWaitingAreBounded() async throws {
        let before = Self.config("  tick: { kind: fake, content: 1 }")
        let after = Self.config("  tick: { kind: fake, content: 1 }\n  stuck: { kind: test }")
        let started = Mailbox<EmbeddedPlugin>()
        let skipsConfigure = TestPlugin.embedded("test") { plugin, _ in started.put(plugin) }
        try await EmbeddedEngine.run(before, plugins: [skipsConfigure]) { hammock in
            try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }
            try hammock.rewriteConfiguration(after)
            hammock.send(controlLine: #"{"op":"reload"}"#)
            // Once the reload has started the test plugin, it waits for its answer to `configure`, which never
            // comes. Sent before, the flood would coalesce with this reload line and wait for nothing.
            let plugin = try #require(await started.take(), "the reload started the test plugin")
            await plugin.shakeHands(kind: "test")
            _ = await plugin.expect("configure")
            let sent = 1_100
            for index in 0..<sent { hammock.send(controlLine: #"{"op":"reload","id":"r\#(index)"}"#) }
            // Every line taken (the last 100 refused at once, the queue being full), the `configure` is let
            // run out of time: the reload then ends, and the waiting ones are answered.
            try await hammock.waitUntil("the reloads beyond the queue are refused", timeout: .seconds(30)) { lines in
                lines.filter { $0.type == "error" && $0["id"] != nil }.count >= sent - 1_000
            }
            hammock.advance(by: PluginSupervisor.configureTimeout)
            try await hammock.waitUntil("every reload line is answered", timeout: .seconds(30)) { lines in
                lines.filter { ["ack", "error"].contains($0.type ?? "") && $0["id"] != nil }.count >= sent
            }
            let answers = hammock.lines.filter { ["ack", "error"].contains($0.type ?? "") && $0["id"] != nil }
            #expect(answers.count == sent, "each id answered once")
            #expect(Set(answers.compactMap { $0["id"]?.stringValue }).count == sent)
            let refused = answers.filter { $0.type == "error" }
            #expect(refused.count == sent - 1_000, "\(refused.first?.text ?? "")")
            #expect(refused.allSatisfy { $0["message"]?.stringValue?.hasPrefix("reload refused: 1000 reload requests already wait") == true })
            let reloaded = try #require(hammock.lines.lastIndex { $0.type == "reloaded" })
            #expect(
                hammock.lines.indices.filter { hammock.lines[$0].type == "ack" }.allSatisfy { $0 > reloaded },
                "the waiting reloads are acknowledged after a reload that began after them")
        }
    }

    /// A plugin started to check a reload configures the changed sources with their new options, and may push
    /// at once what it then sees (a file plugin watching the new path). While the reload is checked, and after
    /// it is refused until the plugin is shut down, none of that may reach the running source. (It did, now
    /// and then: "a refused reload leaves a watched file source watching its old file" failed in CI with the
    /// new file's content on the running source.) Broken on purpose (the engine heeding every host's events),
    /// this test fails: the running source shows "new".
    @Test("a push from a plugin started to check a reload that is then refused never reaches the running source")
    func checkerPushIsIgnored() async throws {
        let plugin = TestPlugin.kit(["test"]) { _ in
            PluginDescription(kinds: ["test"], version: "0.1") { setup throws(OptionProblems) in
                if setup.options["bad"] == true {
                    throw OptionProblems(problems: [OptionProblem(pointer: JSONPointer(tokens: ["bad"]), message: "must not be true")])
                }
                let path = setup.options["path"] ?? "none"
                // What a watching plugin does: pushes what it sees as soon as it is configured.
                await setup.push.newData(["pushed": path])
                return ClosureSource { _ in .newData(["loaded": path]) }
            }
        }
        let first = Self.config("  f: { kind: test, path: old }\n")
        try await EmbeddedEngine.run(first, plugins: [plugin]) { hammock in
            try await hammock.waitFor(type: "source", id: "f") { $0[pointer: "/state/content/loaded"] == "old" }
            let mark = hammock.lines.count
            try hammock.rewriteConfiguration(Self.config("  f: { kind: test, path: new }\n  refused: { kind: test, bad: true }\n"))
            hammock.send(controlLine: #"{"op":"reload","id":"r"}"#)
            let refusal = try await hammock.waitFor(type: "error") { $0["id"] == "r" }
            #expect(refusal["message"]?.stringValue?.contains("must not be true") == true, "\(refusal.text)")
            // The running plugin still serves f's old options.
            hammock.send(controlLine: #"{"op":"load","source":"f","id":"l"}"#)
            try await hammock.waitFor(type: "ack") { $0["id"] == "l" }
            let shown = hammock.lines(since: mark).filter { $0.id == "f" }.compactMap { $0[pointer: "/state/content"] }
            #expect(shown.last?["loaded"] == "old", "the load (acknowledged after its answer) is served with the old options: \(shown)")
            #expect(!shown.contains { $0["pushed"] == "new" || $0["loaded"] == "new" }, "f shows only its running options: \(shown)")
        }
    }
}
