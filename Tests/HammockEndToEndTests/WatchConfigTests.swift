import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// `hammock run --watch-config`: a change to any file the configuration was read from reloads it, as SIGHUP
/// does: an included file replaced by an editor's atomic save, a bad edit (refused, the running
/// configuration goes on), a file added to or removed from an included directory.
@Suite("--watch-config")
struct WatchConfigTests {
    /// Runs `hammock run --watch-config` on main.yaml, which includes extra.yaml (holding `extra`) and conf.d/,
    /// in a fresh folder that `body` gets and that is removed afterwards.
    static func withWatchedFolder(extra: String, _ body: (_ folder: String, HammockProcess) async throws -> Void) async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder + "/conf.d", withIntermediateDirectories: true)
        try replace(folder + "/extra.yaml", with: extra)
        let main = try HammockProcess.writeConfig(
            """
            version: 1
            include: [extra.yaml, conf.d]
            sources:
              tick: { kind: fake, content: 1, refresh: 300ms }
            """, in: folder, name: "main.yaml")
        try await HammockProcess.withRunning(configPath: main, arguments: ["--watch-config"]) { hammock in
            try await body(folder, hammock)
        }
    }

    /// As an editor saves: a temporary file beside it, renamed over it.
    static func replace(_ path: String, with text: String) throws {
        let temporary = path + ".tmp-\(UUID().uuidString)"
        try text.write(toFile: temporary, atomically: false, encoding: .utf8)
        guard rename(temporary, path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    @Test("an included file replaced by rename reloads: its new source appears")
    func includedFileReplaced() async throws {
        try await Self.withWatchedFolder(extra: "sources:\n  first: { kind: fake, content: one }\n") { folder, hammock in
            try await hammock.waitFor(type: "source", id: "first") { $0.event == "newData" }
            try Self.replace(
                folder + "/extra.yaml",
                with: "sources:\n  first: { kind: fake, content: one }\n  second: { kind: fake, content: two }\n")
            let reloaded = try await hammock.waitFor(type: "reloaded")
            #expect(reloaded["sources"] == ["tick", "first", "second"])
            try await hammock.waitFor(type: "source", id: "second") { $0[pointer: "/state/content"] == "two" }
        }
    }

    @Test("a bad edit is refused with its file, line and column; the running configuration goes on")
    func badEditIsRefused() async throws {
        try await Self.withWatchedFolder(extra: "sources:\n  first: { kind: fake, content: one }\n") { folder, hammock in
            try await hammock.waitFor(type: "source", id: "first") { $0.event == "newData" }
            try Self.replace(folder + "/extra.yaml", with: "sources:\n  first: { kind: fake, refresh: soon }\n")
            let error = try await hammock.waitFor(type: "error")
            let message = error["message"]?.stringValue ?? ""
            #expect(message.contains("reload failed, the running configuration goes on"), "\(message)")
            #expect(message.contains("extra.yaml:2:33: refresh:"), "the problem's file, line and column: \(message)")
            try await hammock.waitForStderr(containing: "extra.yaml:2:33: refresh:")
            let mark = hammock.lineCount
            try await hammock.waitUntil("tick refreshes after the refused reload") { lines in
                lines.dropFirst(mark).contains { $0.id == "tick" && $0.event == "newData" }
            }
            // The fix is a change too: it reloads.
            try Self.replace(folder + "/extra.yaml", with: "sources:\n  fixed: { kind: fake, content: ok }\n")
            try await hammock.waitFor(type: "source", id: "fixed") { $0[pointer: "/state/content"] == "ok" }
        }
    }

    /// An editor, or a script, that saves a hundred times in a burst: the watcher waits for 150 ms of quiet
    /// (a save's rename included), so the burst is one reload or a few, not one per save, and the last save
    /// is what runs.
    @Test("100 saves in a burst are a few reloads, and the last one is in force")
    func aBurstOfSavesIsAFewReloads() async throws {
        try await Self.withWatchedFolder(extra: "views: {}\n") { folder, hammock in
            try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }
            for save in 1...100 {
                try Self.replace(folder + "/extra.yaml", with: "sources:\n  saved: { kind: fake, content: \(save) }\n")
            }
            try await hammock.waitFor(type: "source", id: "saved") { $0[pointer: "/state/content"] == 100 }
            // Anything still on its way has arrived once a second has passed without a new reload.
            var reloads = hammock.lines.filter { $0.type == "reloaded" }.count
            while true {
                try await Task.sleep(for: .seconds(1))
                let now = hammock.lines.filter { $0.type == "reloaded" }.count
                if now == reloads { break }
                reloads = now
            }
            // Before the watch waited for quiet after a rename too, this was 20 to 41.
            #expect(reloads >= 1 && reloads <= 5, "\(reloads) reloads for 100 saves")
            let saved = hammock.lines.filter { $0.id == "saved" && $0.event == "newData" }
            #expect(saved.last?[pointer: "/state/content"] == 100, "the last save is in force")
            #expect(hammock.isRunning)
        }
    }

    /// The main file as `withWatchedFolder` writes it, with one more source, `edited`, holding `content`.
    static func editedMain(_ content: Int) -> String {
        """
        version: 1
        include: [extra.yaml, conf.d]
        sources:
          tick: { kind: fake, content: 1, refresh: 300ms }
          edited: { kind: fake, content: \(content) }
        """
    }

    /// Saves the main file twice with `save`, checking each save reloads: its new source, then its new content.
    static func mainFileSaves(_ save: (String, String) throws -> Void) async throws {
        try await withWatchedFolder(extra: "views: {}\n") { folder, hammock in
            try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }
            try save(folder + "/main.yaml", editedMain(1))
            let reloaded = try await hammock.waitFor(type: "reloaded")
            #expect(reloaded["sources"] == ["tick", "edited"], "\(reloaded)")
            try await hammock.waitFor(type: "source", id: "edited") { $0.content == 1 }
            // The second save of the same file is seen too (the watch outlives the first).
            try save(folder + "/main.yaml", editedMain(2))
            try await hammock.waitFor(type: "source", id: "edited") { $0.content == 2 }
        }
    }

    @Test("the main file saved in place (truncated and written, the same inode) reloads, every time")
    func mainFileSavedInPlace() async throws {
        try await Self.mainFileSaves { path, text in try TestFiles.writeInPlace(text, to: path) }
    }

    @Test("the main file saved by rename (an editor's atomic save) reloads, every time")
    func mainFileSavedByRename() async throws {
        try await Self.mainFileSaves { path, text in try Self.replace(path, with: text) }
    }

    @Test("a file added to an included directory reloads, and so does its removal")
    func directoryGainsAndLosesAFile() async throws {
        try await Self.withWatchedFolder(extra: "views: {}\n") { folder, hammock in
            try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }
            try Self.replace(folder + "/conf.d/50-more.yaml", with: "sources:\n  more: { kind: fake, content: 5 }\n")
            try await hammock.waitFor(type: "source", id: "more") { $0[pointer: "/state/content"] == 5 }
            try FileManager.default.removeItem(atPath: folder + "/conf.d/50-more.yaml")
            try await hammock.waitFor(type: "removed", id: "more")
        }
    }
}

/// `hammock check` on a configuration over several files: every problem at its own file, line and column, a
/// plugin's complaint about an option that came from a base included.
@Suite("Composed configurations, checked")
struct ComposedCheckTests {
    @Test("check: a rest plugin's complaint about a base's option is reported at the base, in its file")
    func pluginProblemInAnIncludedBase() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try WatchConfigTests.replace(
            folder + "/bases.yaml",
            with: "bases:\n  service:\n    kind: rest\n    url: http://127.0.0.1:9\n    method: FETCH\n")
        let main = try HammockProcess.writeConfig(
            "include: bases.yaml\nsources:\n  a: { base: service, url: /x }\n  a2: { base: servce, url: /y }\n", in: folder,
            name: "main.yaml")
        let run = try await HammockProcess.execute(["check", main])
        #expect(run.termination == .exited(2))
        #expect(run.stderr.contains(folder + "/bases.yaml:5:5: source \"a\": method must be one of"), "\(run.stderr)")
        #expect(
            run.stderr.contains(folder + "/main.yaml:4:15: source \"a2\": unknown base \"servce\" (did you mean \"service\"?)"),
            "\(run.stderr)")
    }
}
