import Foundation
import HammockCore
import HammockJSON
import HammockPluginKit
import HammockProtocol
import HammockSystem
import Synchronization
import Testing

@testable import HammockFilePlugin

/// The `file` kind in-process, through `Plugin.serve` as hammock runs a built-in plugin, with a
/// `FileWatcher` the test makes: configure, a load that reads the file, and the push that an editor's
/// save brings. No plugin process, and no watcher shared with anything else in this process.
@Suite(.timeLimit(.minutes(1))) struct FilePluginServedTests {
    /// One file plugin served in a task, with its two ends.
    private struct Served {
        let input: AsyncStream<[UInt8]>.Continuation
        var output: AsyncStream<[UInt8]>.Iterator
        let serving: Task<Void, Never>

        init(_ plugin: PluginDescription) {
            let (input, inbox) = AsyncStream.makeStream(of: [UInt8].self)
            let (output, outbox) = AsyncStream.makeStream(of: [UInt8].self)
            self.input = inbox
            self.output = output.makeAsyncIterator()
            serving = Task {
                await Plugin.serve(plugin, input: input, writeLine: { outbox.yield($0) })
                outbox.finish()
            }
        }

        func send(_ message: EngineMessage) { input.yield(Array(message.line.dropLast())) }

        /// The next line, or nil once the plugin has ended.
        mutating func next() async throws -> PluginMessage? {
            guard let line = await output.next() else { return nil }
            #expect(line.last == UInt8(ascii: "\n"))
            return try PluginMessage(line: line.dropLast())
        }
    }

    @Test func aLoadReadsTheFileAndASaveIsPushedThroughTheGivenWatcher() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hammock-file-served-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("status.json")
        try Data(#"{"n": 1}"#.utf8).write(to: file)

        let problems = Mutex<[String]>([])
        let watcher = FileWatcher(log: { message in problems.withLock { $0.append(message) } })
        var plugin = Served(FilePlugin.plugin(watcher: watcher))
        plugin.send(.hello(protocol: pluginProtocolVersion))
        #expect(
            try await plugin.next()
                == .hello(
                    protocol: pluginProtocolVersion, kinds: ["file"], version: FilePlugin.version,
                    optionsSchema: FilePlugin.optionsSchema))
        plugin.send(.configure(source: "status", options: ["path": .string(file.path), "debounce": "50ms"]))
        #expect(try await plugin.next() == .configured(source: "status"))

        plugin.send(.load(source: "status", id: 1, etag: nil, lastModified: nil, timeout: nil))
        // What the file kind says of its content (`meta`) comes before it: the size, and the time the file
        // says it was changed.
        guard case .meta(1, let meta)? = try await plugin.next() else {
            Issue.record("the load's answer had no meta before it")
            return
        }
        #expect(meta["size"] == 8)
        let modified = try #require(meta["modified"]?.stringValue.flatMap(Timestamp.init(rfc3339:)))
        let written = try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date)
        #expect(abs(Double(modified.millisecondsSince1970) / 1000 - written.timeIntervalSince1970) < 0.002)
        guard case .newData(1, _, let content, _, _)? = try await plugin.next() else {
            Issue.record("the load was not answered with the file's content")
            return
        }
        #expect(content == ["n": 1])

        // An editor's atomic save: a new file renamed over the old one.
        let temporary = directory.appendingPathComponent(".status.json.tmp")
        try Data(#"{"n": 22}"#.utf8).write(to: temporary)
        #expect(rename(temporary.path, file.path) == 0)
        guard case .pushedMeta("status", let pushedMeta)? = try await plugin.next() else {
            Issue.record("the push had no meta before it")
            return
        }
        #expect(pushedMeta["size"] == 9)
        #expect(try await plugin.next() == .pushedData(source: "status", content: ["n": 22]))
        #expect(problems.withLock { $0 } == [], "the watcher could not watch")

        plugin.send(.shutdown)
        #expect(try await plugin.next() == nil)
        await plugin.serving.value
    }
}
