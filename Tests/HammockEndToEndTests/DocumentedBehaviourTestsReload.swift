import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// docs/protocol.md, `reloaded` and `{"op":"reload"}`: "read the configuration file again, as SIGHUP does:
/// unchanged sources keep their state, changed ones load again, removed ones get a `removed` line, then
/// `reloaded`; an invalid file gets an `error` line and the running configuration goes on."
@Suite("Documented behaviour: reload")
struct DocumentedBehaviourReloadTests {
    enum Trigger: String, CaseIterable, CustomStringConvertible {
        case control, sighup
        var description: String { rawValue }

        func fire(_ hammock: HammockProcess) throws {
            switch self {
            case .control: try hammock.send(controlLine: #"{"op":"reload"}"#)
            case .sighup: hammock.signal(SIGHUP)
            }
        }
    }

    enum Problem: String, CaseIterable, CustomStringConvertible {
        /// The file reads, but the plugin refuses one of its source's own keys.
        case pluginOption
        /// The file is not YAML.
        case yamlSyntax
        var description: String { rawValue }
    }

    static func config(plugin: String, log: String, t: String) -> String {
        """
        version: 1
        sources:
          t:
            kind: test
        \(t)
          tick: { kind: fake, content: 1, refresh: 200ms }
        \(Documented.Plugin.pluginsSection(path: plugin, arguments: ["--log", log]))
        """
    }

    @Test("a reload is refused with every problem at its line and column, and the running configuration goes on",
          arguments: Problem.allCases, Trigger.allCases)
    func refusedReload(_ problem: Problem, _ trigger: Trigger) async throws {
        try await Documented.Folder.with { folder in
            let plugin = try folder.fixturePlugin()
            let log = folder.path + "/ops.log"
            let configPath = try folder.write(Self.config(plugin: plugin, log: log, t: ""), to: "config.yaml")
            try await Documented.run(configPath: configPath) { hammock in
                let first = try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" }
                try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }
                let mark = hammock.lineCount

                let broken: String
                let expectedAt: String
                switch problem {
                case .pluginOption:
                    broken = Self.config(plugin: plugin, log: log, t: "    bad: true")
                    expectedAt = configPath + ":5:5: "  // the `bad` key
                case .yamlSyntax:
                    broken = Self.config(plugin: plugin, log: log, t: "    parse: [unclosed")
                    expectedAt = configPath + ":"
                }
                try folder.write(broken, to: "config.yaml")
                try trigger.fire(hammock)

                let error = try await hammock.waitFor(type: "error", timeout: .seconds(15))
                let message = error["message"]?.stringValue ?? ""
                #expect(message.contains("reload failed"), "\(message)")
                let diagnostics = message.split(separator: "\n").filter { $0.hasPrefix(expectedAt) }
                #expect(!diagnostics.isEmpty, "a problem at \(expectedAt)…: \(message)")
                if problem == .pluginOption {
                    #expect(diagnostics.contains { $0.contains("bad must not be true") }, "the plugin's words: \(message)")
                } else {
                    #expect(
                        diagnostics.contains { $0.range(of: #"^.*:[0-9]+:[0-9]+: "#, options: .regularExpression) != nil },
                        "\(message)")
                }

                // The running configuration goes on: tick refreshes, nothing was reloaded or removed, and t
                // keeps its state and its plugin process.
                try await hammock.waitUntil("tick refreshes twice after the refused reload", timeout: .seconds(8)) { lines in
                    lines.dropFirst(mark).filter { $0.id == "tick" && $0.event == "newData" }.count >= 2
                }
                let since = hammock.lines(since: mark)
                #expect(!since.contains { $0.type == "reloaded" || $0.type == "removed" }, "\(since.map(\.text))")
                #expect(!since.contains { $0.id == "t" }, "t is untouched: \(since.filter { $0.id == "t" }.map(\.text))")
                try hammock.send(controlLine: #"{"op":"load","source":"t"}"#)
                let again = try await hammock.waitFor(type: "source", id: "t") { $0.event != "requested" }
                #expect(again.event == "newData", "\(again)")
                #expect(again[pointer: "/state/content/pid"] == first[pointer: "/state/content/pid"], "\(again)")

                // A file that is fixed again reloads.
                try folder.write(Self.config(plugin: plugin, log: log, t: "    fixed: true"), to: "config.yaml")
                try trigger.fire(hammock)
                try await hammock.waitFor(type: "reloaded", timeout: .seconds(15))
            }
        }
    }

    /// A refused reload must not reach the running sources either: a plugin that checks the new options
    /// is not left serving them. (It was: the running file plugin checked f's new options with `configure`
    /// and watched new.txt from then on, though the reload was refused for another source. Now a plugin
    /// started for the check alone sees them.)
    @Test("a refused reload leaves a watched file source watching its old file")
    func refusedReloadKeepsTheRunningWatch() async throws {
        try await Documented.Folder.with { folder in
            let plugin = try folder.fixturePlugin()
            let old = try folder.write("old-1", to: "old.txt")
            let new = try folder.write("new-1", to: "new.txt")
            func config(path: String, extra: String) -> String {
                """
                version: 1
                sources:
                  f: { kind: file, path: \(Documented.yamlQuoted(path)), parse: text }
                \(extra)
                \(Documented.Plugin.pluginsSection(path: plugin))
                """
            }
            let configPath = try folder.write(config(path: old, extra: ""), to: "config.yaml")
            try await Documented.run(configPath: configPath) { hammock in
                try await hammock.waitFor(type: "source", id: "f") { $0.documentedContent == "old-1" }
                // f's change is fine; a new source's option is refused by its plugin, so the whole file is.
                try folder.write(config(path: new, extra: "  refused: { kind: test, bad: true }"), to: "config.yaml")
                try hammock.send(controlLine: #"{"op":"reload"}"#)
                let error = try await hammock.waitFor(type: "error", timeout: .seconds(15))
                #expect(error["message"]?.stringValue?.contains("bad must not be true") == true, "\(error)")

                let mark = hammock.lineCount
                try folder.write("new-2", to: "new.txt")
                try folder.write("old-2", to: "old.txt")
                try await hammock.waitFor(type: "source", id: "f", timeout: .seconds(8)) { $0.documentedContent == "old-2" }
                let shown = hammock.lines(since: mark).filter { $0.id == "f" }.compactMap { $0.documentedContent?.stringValue }
                #expect(!shown.contains { $0.hasPrefix("new") }, "f shows only its running file: \(shown)")
            }
        }
    }

    @Test("a changed plugin command on reload: the source's next load is served by the new command, the old plugin ends")
    func changedPluginCommand() async throws {
        try await Documented.Folder.with { folder in
            let plugin = try folder.fixturePlugin()
            func config(tag: String) -> String {
                """
                version: 1
                sources:
                  t: { kind: test, retry: off }
                \(Documented.Plugin.pluginsSection(path: plugin, arguments: ["--tag", tag]))
                """
            }
            let configPath = try folder.write(config(tag: "one"), to: "config.yaml")
            try await Documented.run(configPath: configPath) { hammock in
                let first = try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" }
                #expect(first[pointer: "/state/content/tag"] == "one")
                let oldPID = try #require(first[pointer: "/state/content/pid"]?.numberValue?.intValue)

                try folder.write(config(tag: "two"), to: "config.yaml")
                try hammock.send(controlLine: #"{"op":"reload"}"#)
                try await hammock.waitFor(type: "reloaded", timeout: .seconds(15))
                try hammock.send(controlLine: #"{"op":"load","source":"t"}"#)
                let next = try await hammock.waitFor(type: "source", id: "t") { $0.event != "requested" }
                #expect(next.event == "newData", "\(next)")
                #expect(next[pointer: "/state/content/tag"] == "two", "the new command serves: \(next)")
                #expect(next[pointer: "/state/content/pid"]?.numberValue?.intValue != oldPID, "\(next)")
                let ended = try await Documented.eventually(within: .seconds(8)) { !Documented.processIsAlive(Int32(oldPID)) }
                #expect(ended, "the plugin of the old command (pid \(oldPID)) ends")
            }
        }
    }

    /// A source that the plugin keeps fresh by pushing (a watched file, a stream) must not fall silent when
    /// its plugin's command changes: the old process that pushed ends with the reload. (It did: unchanged,
    /// the source was neither configured nor loaded on the new plugin. Now a replaced kind's sources load
    /// again on the new one.)
    @Test("a changed plugin command on reload: a source kept fresh by pushes goes on being pushed, by the new command")
    func changedPluginCommandKeepsPushing() async throws {
        try await Documented.Folder.with { folder in
            let plugin = try folder.fixturePlugin()
            func config(tag: String) -> String {
                """
                version: 1
                sources:
                  t: { kind: test, retry: off }
                \(Documented.Plugin.pluginsSection(path: plugin, arguments: ["--mode", "ticker", "--tag", tag]))
                """
            }
            let configPath = try folder.write(config(tag: "one"), to: "config.yaml")
            try await Documented.run(configPath: configPath) { hammock in
                try await hammock.waitFor(type: "source", id: "t") { $0.origin == "push" }
                try folder.write(config(tag: "two"), to: "config.yaml")
                try hammock.send(controlLine: #"{"op":"reload"}"#)
                try await hammock.waitFor(type: "reloaded", timeout: .seconds(15))
                // No control line: the source is pushed again, now by the new command.
                try await hammock.waitFor(type: "source", id: "t", timeout: .seconds(10)) {
                    $0[pointer: "/state/content/tag"] == "two"
                }
            }
        }
    }

    /// The lines the fixture plugin logged, parsed.
    static func operations(in log: String) -> [JSONValue] {
        Documented.fileText(log).split(separator: "\n").compactMap { try? JSONValue(parsing: Array($0.utf8)) }
    }
}
