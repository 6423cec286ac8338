import Foundation
import HammockCore
import HammockJSON
import HammockPluginKit
import Synchronization
import Testing

@testable import HammockEngine

/// Clicks, `retry` of a source, and what a reload tells a plugin, in memory: moved from
/// `HammockEndToEndTests` (`I3barFormatTests.clicks`, `DocumentedBehaviourOutputTests.retryOfASource`,
/// `DocumentedBehaviourReloadTests.changedPluginCommand` and `.removeIsSentToThePlugin`), every assertion
/// kept. The shell commands and the fixture plugin they ran are plugins the test plays: "fails until a file
/// appears" is "fails until the test says", a counter is a counter.
@Suite("Clicks and plugins, in memory")
struct EngineClickAndPluginTests {
    /// A block line: an array of blocks followed by the comma of the endless array.
    private func blocks(_ line: String) throws -> [JSONValue] {
        #expect(line.hasSuffix(","), "\(line)")
        guard case .array(let blocks) = try JSONValue(parsing: String(line.dropLast())) else {
            Issue.record("not an array: \(line)")
            return []
        }
        return blocks
    }

    private func fullTexts(_ line: String) -> [String] {
        guard line.hasPrefix("[{"), let blocks = try? blocks(line) else { return [] }
        return blocks.compactMap { $0["full_text"]?.stringValue }
    }

    /// `flaky` fails until `isFine` is set; `count` answers c1, c2, ...
    final class FlakyAndCount: Sendable {
        let isFine = Flag()
        let count = Tally()

        var plugin: TestPlugin {
            TestPlugin.answering { [self] source, _ in
                switch source {
                case "flaky":
                    isFine.isSet
                        ? .newData("fine") : .error(SourceError(message: "broken", exitStatus: 3))
                default:
                    .newData(.string("c\(count.next())"))
                }
            }
        }
    }

    private let clickConfig = """
        sources:
          flaky: { kind: test, retry: off }
          count: { kind: test }
        views:
          flaky: { sources: [flaky] }
          count: { sources: [count] }
        """

    @Test("a click retries a view that failed and loads one that did not; an unknown name is logged")
    func clicks() async throws {
        let plugin = FlakyAndCount()
        try await EmbeddedEngine.run(
            clickConfig, plugins: [plugin.plugin], options: RunOptions(format: .i3bar, views: ["flaky", "count"])
        ) { hammock in
            try await hammock.waitUntil("flaky failed, count loaded") { lines in
                lines.contains { self.fullTexts($0.text).first?.hasPrefix("error") == true && self.fullTexts($0.text).last == "c1" }
            }
            plugin.isFine.set()
            hammock.send(controlLine: "[")
            hammock.send(controlLine: #"{"name":"flaky","instance":"","button":1,"x":5,"y":5}"#)
            try await hammock.waitUntil("flaky loaded again") { self.fullTexts($0.last?.text ?? "") == ["fine", "c1"] }
            hammock.send(controlLine: #",{"name":"nope","button":1}"#)
            try await hammock.waitForLog(containing: #"a click on "nope", which is not a view"#)
            hammock.send(controlLine: #",{"name":"count","button":1}"#)
            try await hammock.waitUntil("count loaded again") { self.fullTexts($0.last?.text ?? "") == ["fine", "c2"] }
            #expect(hammock.isRunning)
        }
    }

    @Test("an on-click command goes to the click runner with its view and button; a middle click loads")
    func onClickCommand() async throws {
        let plugin = FlakyAndCount()
        let config = """
            sources:
              count: { kind: test }
            views:
              count:
                sources: [count]
                on-click:
                  left: { run: 'echo "$HAMMOCK_VIEW $HAMMOCK_BUTTON"' }
                  middle: load
            """
        try await EmbeddedEngine.run(config, plugins: [plugin.plugin], options: RunOptions(format: .i3bar)) { hammock in
            try await hammock.waitUntil("count loaded") { self.fullTexts($0.last?.text ?? "") == ["c1"] }
            hammock.send(controlLine: "[")
            hammock.send(controlLine: #"{"name":"count","button":1}"#)
            hammock.send(controlLine: #",{"name":"count","button":2}"#)
            try await hammock.waitUntil("middle loads") { self.fullTexts($0.last?.text ?? "") == ["c2"] }
            let commands = await hammock.clicks.commands
            #expect(commands.map(\.view) == ["count"])
            #expect(commands.map(\.button) == [1])
            #expect(commands.map(\.command) == [#"echo "$HAMMOCK_VIEW $HAMMOCK_BUTTON""#])
        }
        #expect(plugin.count.count == 2, "the left click ran a command, not a load")
    }

    @Test("retry with a source loads that source, right after its error and when it is healthy")
    func retryOfASource() async throws {
        let isThere = Flag()
        let healthyLoads = Tally()
        let answer = Gate()
        let plugin = TestPlugin.answering { source, _ in
            switch source {
            case "flaky":
                guard isThere.isSet else { return .error(SourceError(message: "cat: appears-later.txt: No such file", exitStatus: 1)) }
                await answer.wait()
                return .newData("here now")
            default:
                return .newData(.string("uuid-\(healthyLoads.next())"))
            }
        }
        let config = """
            version: 1
            sources:
              flaky: { kind: test, retry: off }
              healthy: { kind: test, retry: off }
            """
        try await EmbeddedEngine.run(config, plugins: [plugin]) { hammock in
            try await hammock.waitUntil("flaky failed and healthy loaded") { lines in
                lines.contains { $0.id == "flaky" && $0.event == "error" }
                    && lines.contains { $0.id == "healthy" && $0.event == "newData" }
            }
            let failed = try #require(hammock.lines.first { $0.id == "flaky" && $0.event == "error" })
            #expect(failed[pointer: "/state/latestError/exitStatus"] == 1, "\(failed)")
            let first = try #require(hammock.lines.first { $0.id == "healthy" && $0.event == "newData" })
            hammock.skipLinesReadSoFar()

            isThere.set()
            hammock.send(controlLine: #"{"op":"retry","source":"flaky"}"#)
            let requested = try await hammock.waitFor(type: "source", id: "flaky")
            #expect(requested.event == "requested", "\(requested)")
            answer.open()
            let loaded = try await hammock.waitFor(type: "source", id: "flaky")
            #expect(loaded.event == "newData" && loaded.content == "here now", "\(loaded)")

            hammock.send(controlLine: #"{"op":"retry","source":"healthy"}"#)
            let again = try await hammock.waitFor(type: "source", id: "healthy") { $0.event == "newData" }
            #expect(again.origin == "load")
            #expect(again.content != first.content, "a new load: \(again) after \(first)")
        }
    }

    /// A plugin that answers `{"tag": <its command's last word>, "pid": <its start's number>}` and tells
    /// when it shuts down.
    final class TaggedPlugin: Sendable {
        let starts = Tally()
        let shutdowns = Mutex<[Int]>([])
        let received = Mutex<[JSONValue]>([])

        var plugin: TestPlugin {
            TestPlugin.kit(["test"], received: { [self] line in received.withLock { $0.append(line) } }) { [self] command in
                let pid = starts.next()
                let tag = command.last ?? ""
                return PluginDescription(
                    kinds: ["test"], version: "0.1", onShutdown: { [self] in shutdowns.withLock { $0.append(pid) } }
                ) { _ in
                    ClosureSource { _ in .newData(["tag": .string(tag), "pid": .number(JSONNumber(pid))]) }
                }
            }
        }
    }

    @Test("a changed plugin command on reload: the source's next load is served by the new command, the old plugin ends")
    func changedPluginCommand() async throws {
        let tagged = TaggedPlugin()
        func config(tag: String) -> String {
            """
            version: 1
            sources:
              t: { kind: test, retry: off }
            plugins:
              test: { command: [test-plugin, --tag, \(tag)] }
            """
        }
        try await EmbeddedEngine.run(config(tag: "one"), plugins: [tagged.plugin]) { hammock in
            let first = try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" }
            #expect(first[pointer: "/state/content/tag"] == "one")
            let oldPID = try #require(first[pointer: "/state/content/pid"]?.numberValue?.intValue)

            try hammock.rewriteConfiguration(config(tag: "two"))
            hammock.send(controlLine: #"{"op":"reload"}"#)
            try await hammock.waitFor(type: "reloaded")
            hammock.send(controlLine: #"{"op":"load","source":"t"}"#)
            let next = try await hammock.waitFor(type: "source", id: "t") { $0.event != "requested" }
            #expect(next.event == "newData", "\(next)")
            #expect(next[pointer: "/state/content/tag"] == "two", "the new command serves: \(next)")
            #expect(next[pointer: "/state/content/pid"]?.numberValue?.intValue != oldPID, "\(next)")
            var ended = false
            for _ in 0..<400 where !ended {
                ended = tagged.shutdowns.withLock { $0.contains(oldPID) }
                if !ended { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(ended, "the plugin of the old command (\(oldPID)) ends")
        }
    }

    @Test("a source dropped by a reload is removed from its plugin with a remove line; the plugin goes on")
    func removeIsSentToThePlugin() async throws {
        let tagged = TaggedPlugin()
        func config(_ sources: String) -> String { "version: 1\nsources:\n" + sources }
        try await EmbeddedEngine.run(
            config("  kept: { kind: test, retry: off }\n  dropped: { kind: test, retry: off }"), plugins: [tagged.plugin]
        ) { hammock in
            try await hammock.waitUntil("both sources have data") { lines in
                ["kept", "dropped"].allSatisfy { id in lines.contains { $0.id == id && $0.event == "newData" } }
            }
            let kept = try #require(hammock.lines.last { $0.id == "kept" && $0.event == "newData" })

            try hammock.rewriteConfiguration(config("  kept: { kind: test, retry: off }"))
            hammock.send(controlLine: #"{"op":"reload"}"#)
            try await hammock.waitFor(type: "removed", id: "dropped")
            var removed = false
            for _ in 0..<400 where !removed {
                removed = tagged.received.withLock { $0.contains { $0["op"] == "remove" && $0["source"] == "dropped" } }
                if !removed { try await Task.sleep(for: .milliseconds(10)) }
            }
            let operations = tagged.received.withLock { $0 }
            #expect(removed, "the plugin was sent remove for dropped: \(operations)")
            #expect(!operations.contains { $0["op"] == "remove" && $0["source"] == "kept" }, "\(operations)")

            hammock.send(controlLine: #"{"op":"load","source":"kept"}"#)
            let again = try await hammock.waitFor(type: "source", id: "kept") { $0.event == "newData" }
            #expect(again[pointer: "/state/content/pid"] == kept[pointer: "/state/content/pid"], "the same plugin: \(again)")
        }
    }
}
