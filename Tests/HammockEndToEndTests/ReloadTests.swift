import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// SIGHUP or `{"op":"reload"}` reads the configuration again: unchanged sources keep their state and their
/// plugin, changed ones are configured again, removed ones are dropped with a line that says so, and an
/// invalid new file is reported with its line and column while the running configuration goes on.
@Suite("Hot reload")
struct ReloadTests {
    static func config(_ sources: String, views: String = "") -> String {
        SupervisionTests.misbehavingConfig(mode: "good", sources: sources) + (views.isEmpty ? "" : "\nviews:\n" + views)
    }

    @Test("SIGHUP: the unchanged source keeps its plugin and state, the changed one reloads, removed and added ones follow")
    func reloadBySignal() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let first = Self.config(
            """
              kept: { kind: test }
              changed: { kind: fake, content: "old" }
              dropped: { kind: fake, content: 1 }
            """, views: "  v: { sources: [kept, changed] }")
        let configPath = try HammockProcess.writeConfig(first, in: folder)
        try await HammockProcess.withRunning(configPath: configPath) { hammock in
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
            _ = try HammockProcess.writeConfig(second, in: folder)
            hammock.signal(SIGHUP)

            try await hammock.waitFor(type: "removed", id: "dropped")
            let reloaded = try await hammock.waitFor(type: "reloaded")
            #expect(reloaded["sources"] == ["kept", "changed", "added"])
            try await hammock.waitUntil("changed reloaded with its new options, added loaded") { lines in
                lines.contains { $0.id == "changed" && $0[pointer: "/state/content"] == "new" }
                    && lines.contains { $0.id == "added" && $0.event == "newData" }
            }
            try await hammock.waitFor(type: "view", id: "v") { $0.status == "data" && $0[pointer: "/content/added"] == 2 }

            // The unchanged source was not reloaded, and its next load is served by the same plugin process.
            try hammock.send(controlLine: #"{"op":"load","source":"kept"}"#)
            let again = try await hammock.waitFor(type: "source", id: "kept") { $0.event == "newData" }
            #expect(again[pointer: "/state/content/pid"] == pluginPID, "the plugin of an unchanged kind is kept")
            #expect(again[pointer: "/state/content/n"] == 2, "the kept source loaded once before, once now: \(again.text)")
        }
    }

    @Test("an invalid new configuration is reported with line and column, and the running one goes on")
    func invalidReloadIsRejected() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let configPath = try HammockProcess.writeConfig(
            """
            version: 1
            sources:
              tick: { kind: fake, content: 1, refresh: 200ms }
            """, in: folder)
        try await HammockProcess.withRunning(configPath: configPath) { hammock in
            try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }

            _ = try HammockProcess.writeConfig(
                """
                version: 1
                sources:
                  tick: { kind: fake, content: 1, refresh: soon }
                """, in: folder)
            try hammock.send(controlLine: #"{"op":"reload"}"#)
            let error = try await hammock.waitFor(type: "error")
            let message = error["message"]?.stringValue ?? ""
            #expect(message.contains("reload failed"), "\(message)")
            #expect(message.contains("config.yaml:3:44:"), "the problem's line and column: \(message)")
            // stderr is read apart from stdout: wait for it to catch up.
            try await hammock.waitForStderr(containing: "config.yaml:3:44:")
            // Still running the old configuration: tick keeps refreshing.
            let mark = hammock.lineCount
            try await hammock.waitUntil("tick refreshes after the rejected reload") { lines in
                lines.dropFirst(mark).contains { $0.id == "tick" && $0.event == "newData" }
            }
        }
    }
}
