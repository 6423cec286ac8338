import Foundation
import Glibc
import HammockCore
import HammockJSON
import HammockProtocol
import HammockTestSupport
import Testing

/// hammock-plugin-file, driven over its protocol. Serialized because the watch tests measure quiet periods,
/// which a machine busy with the other tests would stretch.
@Suite(.serialized) struct FilePluginTests {
    // MARK: - Handshake and options

    @Test func hello() async throws {
        let plugin = try PluginProcess(executable: "hammock-plugin-file")
        guard case .hello(let version, let kinds, let pluginVersion, let templates, _, _)? = await plugin.hello() else {
            Issue.record("no hello")
            return
        }
        #expect(templates.isEmpty, "the file kind has no template rules")
        #expect(version == 1)
        #expect(kinds == ["file"])
        #expect(pluginVersion == "0.1.0")
    }

    @Test func invalidOptionsAreAllReportedWithTheirPointers() async throws {
        let plugin = try PluginProcess(executable: "hammock-plugin-file")
        _ = await plugin.hello()
        let answer = await plugin.configure("f", ["wach": true, "parse": "xml", "maxBytes": "lots", "debounce": 5])
        guard case .invalid(let source, let errors)? = answer else {
            Issue.record("expected invalid, got \(String(describing: answer))")
            return
        }
        #expect(source == "f")
        let byPath = Dictionary(errors.map { ($0.pointer.description, $0.message) }, uniquingKeysWith: { $1 })
        #expect(Set(byPath.keys) == ["/wach", "/path", "/parse", "/maxBytes", "/debounce"])
        #expect(byPath["/wach"]?.contains("did you mean \"watch\"") == true)
        #expect(byPath["/path"]?.contains("missing") == true)
        #expect(byPath["/parse"]?.contains("json, jsonl, yaml, text, lines") == true)

        // Once fixed, the same source is accepted.
        #expect(await plugin.configure("f", ["path": "/tmp/x.json", "maxBytes": "64KiB", "debounce": "20ms"]) == .configured(source: "f"))
    }

    // MARK: - Loads

    @Test func tildeIsTheHomeDirectory() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try write("[1]", to: directory.appendingPathComponent("home.json"))
        let plugin = try PluginProcess(executable: "hammock-plugin-file", environment: ["HOME": directory.path])
        _ = await plugin.hello()
        #expect(await plugin.configure("f", ["path": "~/home.json"]) == .configured(source: "f"))
        #expect(await plugin.load("f", id: 1) == .newData(id: 1, source: "f", content: [1], etag: nil, lastModified: nil))
    }

    // MARK: - Watching

    @Test func inPlaceEditIsExactlyOnePush() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("live.json")
        try write("{\"v\": 1}", to: file)
        let plugin = try await watching(file)
        #expect(await plugin.load("f", id: 1) == .newData(id: 1, source: "f", content: ["v": 1], etag: nil, lastModified: nil))

        try write("{\"v\": 2}", to: file)
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["v": 2]))
        await expectNoPush(plugin, thenLoad: 2)
    }

    @Test func atomicReplaceIsExactlyOnePushWithTheNewContent() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("live.yaml")
        try write("v: 1\n", to: file)
        let plugin = try await watching(file)
        #expect(await plugin.load("f", id: 1)?.isNewData == true)

        for version in 2...3 {
            let temporary = directory.appendingPathComponent(".live.yaml.swp\(version)")
            try write("v: \(version)\n", to: temporary)
            #expect(rename(temporary.path, file.path) == 0)
            #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["v": .number(JSONNumber(version))]))
        }
        await expectNoPush(plugin, thenLoad: 2)
    }

    @Test func deleteIsAPushedErrorAndRecreateAPush() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("live.txt")
        try write("first\n", to: file)
        let plugin = try await watching(file)
        #expect(await plugin.load("f", id: 1) == .newData(id: 1, source: "f", content: "first", etag: nil, lastModified: nil))

        try FileManager.default.removeItem(at: file)
        guard case .pushedError("f", let error)? = await nextPush(plugin) else {
            Issue.record("expected a pushed error")
            return
        }
        #expect(error.code == .fileMissing)
        await expectNoPush(plugin, thenLoad: 2)

        try write("second\n", to: file)
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: "second"))
    }

    @Test func rewritingTheSameBytesIsNoPush() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("same.txt")
        try write("same\n", to: file)
        let plugin = try await watching(file)
        #expect(await plugin.load("f", id: 1)?.isNewData == true)

        try write("same\n", to: file)
        let temporary = directory.appendingPathComponent("same.tmp")
        try write("same\n", to: temporary)
        #expect(rename(temporary.path, file.path) == 0)
        await expectNoPush(plugin, thenLoad: 2)

        // A change after the non-changes still gets through.
        try write("different\n", to: file)
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: "different"))
    }

    @Test func fileInDirectoriesCreatedLaterIsPushed() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let nested = directory.appendingPathComponent("a/b")
        let file = nested.appendingPathComponent("late.json")
        let plugin = try await watching(file)
        let error = try #require(await loadError(plugin, "f", id: 1))
        #expect(error.code == .fileMissing)

        // One level at a time, then the file: the watch has to move down twice.
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("a"), withIntermediateDirectories: false)
        try await Task.sleep(for: .milliseconds(100))
        try FileManager.default.createDirectory(at: nested, withIntermediateDirectories: false)
        try await Task.sleep(for: .milliseconds(100))
        try write("[\"late\"]", to: file)
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["late"]))

        // The whole directory goes and comes back in one go.
        try FileManager.default.removeItem(at: directory.appendingPathComponent("a"))
        guard case .pushedError("f", let gone)? = await nextPush(plugin) else {
            Issue.record("expected a pushed error")
            return
        }
        #expect(gone.code == .fileMissing)
        try FileManager.default.createDirectory(at: nested, withIntermediateDirectories: true)
        try write("[\"back\"]", to: file)
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["back"]))
    }

    @Test func removedSourceStopsPushingAndReconfiguringLeaksNothing() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("cycle.txt")
        try write("0", to: file)
        let plugin = try await watching(file)
        let pid = plugin.pid
        func cycle(_ rounds: ClosedRange<Int>) async {
            for round in rounds {
                #expect(await plugin.configure("f", ["path": .string(file.path), "watch": true]) == .configured(source: "f"))
                #expect(await plugin.configure("g\(round)", ["path": .string(file.path), "watch": true]) == .configured(source: "g\(round)"))
                plugin.send(.remove(source: "g\(round)"))
            }
            #expect(await plugin.load("f", id: rounds.upperBound)?.isNewData == true)  // every remove before it is handled
        }
        // The Swift runtime opens a few descriptors of its own lazily (timers, signals); let it settle.
        await cycle(1...3)
        let before = openDescriptors(pid)
        #expect(inotifyWatches(pid) == 1)
        await cycle(4...33)
        #expect(openDescriptors(pid) <= before + 2, "a leak would be one descriptor per round")
        #expect(inotifyWatches(pid) == 1)

        plugin.send(.remove(source: "f"))
        #expect(await plugin.load("f", id: 100)?.loadID == 100)
        #expect(inotifyWatches(pid) == 0)
        try write("1", to: file)
        try await Task.sleep(for: .milliseconds(300))
        // Nothing pushed: the next message is the answer to this load (an error, the source is gone).
        plugin.send(.load(source: "f", id: 101, etag: nil, lastModified: nil, timeout: nil))
        #expect(await plugin.next()?.loadID == 101)
    }

    @Test func sourceWithoutWatchKeyIsWatchedAndWatchFalseIsNot() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let byDefault = directory.appendingPathComponent("default.json")
        let off = directory.appendingPathComponent("off.json")
        try write("1", to: byDefault)
        try write("1", to: off)
        let plugin = try PluginProcess(executable: "hammock-plugin-file")
        _ = await plugin.hello()
        #expect(await plugin.configure("default", ["path": .string(byDefault.path)]) == .configured(source: "default"))
        #expect(await plugin.configure("off", ["path": .string(off.path), "watch": false]) == .configured(source: "off"))
        #expect(await plugin.load("default", id: 1)?.isNewData == true)
        #expect(await plugin.load("off", id: 2)?.isNewData == true)

        try replace("2", at: off)
        try replace("2", at: byDefault)
        #expect(await nextPush(plugin) == .pushedData(source: "default", content: 2))
        await expectNoPush(plugin, source: "off", thenLoad: 3)
    }

    /// A mounted ConfigMap: `config.yaml -> ..data/config.yaml` and `..data -> ..<timestamp>`. The kubelet
    /// updates it by writing a new timestamped folder, pointing a new `..data_tmp` at it, renaming that over
    /// `..data` and removing the old folder; the name the source watches never changes.
    @Test func configMapDataSwapIsPushed() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        func folder(_ version: Int) -> URL { directory.appendingPathComponent("..2026_11_22_10_00_0\(version).000000001") }
        func publish(_ version: Int) throws {
            try FileManager.default.createDirectory(at: folder(version), withIntermediateDirectories: false)
            try write("v: \(version)\n", to: folder(version).appendingPathComponent("config.yaml"))
            let temporary = directory.appendingPathComponent("..data_tmp")
            #expect(symlink(folder(version).lastPathComponent, temporary.path) == 0)
            #expect(rename(temporary.path, directory.appendingPathComponent("..data").path) == 0)
        }
        try publish(1)
        let file = directory.appendingPathComponent("config.yaml")
        #expect(symlink("..data/config.yaml", file.path) == 0)
        let plugin = try await watching(file)
        #expect(await plugin.load("f", id: 1) == .newData(id: 1, source: "f", content: ["v": 1], etag: nil, lastModified: nil))

        // Twice: the second swap is only seen if the watches moved to where the first one led.
        for version in 2...3 {
            try publish(version)
            try FileManager.default.removeItem(at: folder(version - 1))
            #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["v": .number(JSONNumber(version))]))
        }
        await expectNoPush(plugin, thenLoad: 2)
        // The directory and the current folder; nothing is left on the folders that went.
        #expect(inotifyWatches(plugin.pid) == 2)
    }

    @Test func repointedSymlinkIsFollowedToItsNewTarget() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for name in ["a", "b", "c"] { try write("{\"v\": \"\(name)\"}", to: directory.appendingPathComponent("\(name).json")) }
        let link = directory.appendingPathComponent("current.json")
        #expect(symlink("a.json", link.path) == 0)
        let plugin = try await watching(link, debounce: Self.patientDebounce)
        #expect(await plugin.load("f", id: 1) == .newData(id: 1, source: "f", content: ["v": "a"], etag: nil, lastModified: nil))

        // A new link renamed over the old one, as `ln -sfn` (coreutils 9) does it.
        let temporary = directory.appendingPathComponent("current.json.tmp")
        #expect(symlink("b.json", temporary.path) == 0)
        #expect(rename(temporary.path, link.path) == 0)
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["v": "b"]))
        // Its new target is watched now.
        try write("{\"v\": \"b2\"}", to: directory.appendingPathComponent("b.json"))
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["v": "b2"]))

        // Removed and made again, as older tools do it.
        #expect(unlink(link.path) == 0)
        #expect(symlink("c.json", link.path) == 0)
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["v": "c"]))
        try write("{\"v\": \"c2\"}", to: directory.appendingPathComponent("c.json"))
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["v": "c2"]))
        await expectNoPush(plugin, thenLoad: 2)
    }

    @Test func editOfASymlinksTargetInAnotherDirectoryIsPushed() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let links = directory.appendingPathComponent("links")
        let data = directory.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: links, withIntermediateDirectories: false)
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: false)
        let target = data.appendingPathComponent("settings.json")
        try write("{\"v\": 1}", to: target)
        let link = links.appendingPathComponent("settings.json")
        #expect(symlink("../data/settings.json", link.path) == 0)
        let plugin = try await watching(link, debounce: Self.patientDebounce)
        #expect(await plugin.load("f", id: 1) == .newData(id: 1, source: "f", content: ["v": 1], etag: nil, lastModified: nil))

        try write("{\"v\": 2}", to: target)
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["v": 2]))
        // An editor's atomic save of the target, too.
        try replace("{\"v\": 3}", at: target)
        #expect(await nextPush(plugin) == .pushedData(source: "f", content: ["v": 3]))
        await expectNoPush(plugin, thenLoad: 2)
    }

    // MARK: - Helpers

    /// For tests whose writers take two steps (truncate then write, unlink then link): a reader that came
    /// in between, because a loaded machine stalled the test, would see a half-done change.
    private static let patientDebounce: JSONValue = "1s"

    private func watching(_ file: URL, debounce: JSONValue? = nil) async throws -> PluginProcess {
        let plugin = try PluginProcess(executable: "hammock-plugin-file")
        _ = await plugin.hello()
        let options: JSONValue =
            if let debounce { ["path": .string(file.path), "watch": true, "debounce": debounce] }
            else { ["path": .string(file.path), "watch": true] }
        #expect(await plugin.configure("f", options) == .configured(source: "f"))
        return plugin
    }

    private func nextPush(_ plugin: PluginProcess, sourceLocation: SourceLocation = #_sourceLocation) async -> PluginMessage? {
        await plugin.next(timeout: .seconds(10), sourceLocation: sourceLocation) {
            switch $0 {
            case .pushedData, .pushedError: true
            default: false
            }
        }
    }

    /// Waits out a quiet period, then loads: if anything was pushed meanwhile, it comes before the answer.
    private func expectNoPush(
        _ plugin: PluginProcess, source: String = "f", thenLoad id: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        try? await Task.sleep(for: .milliseconds(300))
        plugin.send(.load(source: source, id: id, etag: nil, lastModified: nil, timeout: nil))
        let message = await plugin.next(sourceLocation: sourceLocation)
        #expect(message?.loadID == id, "unexpected \(String(describing: message))", sourceLocation: sourceLocation)
    }

    private func loadError(_ plugin: PluginProcess, _ source: String, id: Int) async -> SourceError? {
        if case .error(_, _, let error)? = await plugin.load(source, id: id) { return error }
        return nil
    }

    /// Truncate and write in place, as `echo … > file` does (no temporary file, no rename).
    private func write(_ text: String, to url: URL) throws {
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard descriptor >= 0 else { throw HarnessError("cannot open \(url.path)") }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ Glibc.write(descriptor, $0.baseAddress, $0.count) }) == bytes.count else {
            throw HarnessError("short write to \(url.path)")
        }
    }

    /// Write a temporary file and rename it into place, as an editor's atomic save does.
    private func replace(_ text: String, at url: URL) throws {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).tmp")
        try write(text, to: temporary)
        guard rename(temporary.path, url.path) == 0 else { throw HarnessError("cannot rename over \(url.path)") }
    }

    private func openDescriptors(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    private func inotifyWatches(_ pid: Int32) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fdinfo")) ?? []
        return entries.reduce(0) { total, entry in
            let info = (try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(entry)", encoding: .utf8)) ?? ""
            return total + info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
        }
    }
}

extension PluginMessage {
    fileprivate var isNewData: Bool {
        if case .newData = self { true } else { false }
    }
}
