import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// docs/configuration.md: the `file` kind's `debounce`, the `shell` kind's stream restarts, and where the
/// offline cache lives.
@Suite("Documented behaviour: files, streams and the cache")
struct DocumentedBehaviourFileTests {
    /// A file held open for writing, as a writer that keeps it open (a log) holds it.
    final class OpenWriter {
        let handle: FileHandle

        init(truncating path: String) throws {
            let descriptor = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
            guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        }

        func write(_ text: String) throws { try handle.write(contentsOf: Data(text.utf8)) }
        func close() throws { try handle.close() }
    }

    static func fileConfig(path: String, debounce: String?) -> String {
        """
        version: 1
        sources:
          f: { kind: file, path: \(Documented.yamlQuoted(path)), parse: text\(debounce.map { ", debounce: \($0)" } ?? "") }
        """
    }

    /// "`debounce`: how long a file that is still changing must be quiet before it is read"; "A file is read
    /// at once when its writer closes it".
    @Test("a file written while held open is read once it has been quiet for debounce; a closed one at once")
    func debounce() async throws {
        try await Documented.Folder.with { folder in
            let quiet = try folder.write("zero", to: "quiet.txt")
            let closed = try folder.write("zero", to: "closed.txt")
            let config = """
                version: 1
                sources:
                  f: { kind: file, path: \(Documented.yamlQuoted(quiet)), parse: text, debounce: 3s }
                  g: { kind: file, path: \(Documented.yamlQuoted(closed)), parse: text, debounce: 30s }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                try await hammock.waitUntil("both files were read") { lines in
                    ["f", "g"].allSatisfy { id in lines.contains { $0.id == id && $0.documentedContent == "zero" } }
                }
                let mark = hammock.lineCount

                // f: written in two pieces 700 ms apart, held open. Each state of the file and when it began.
                let writer = try OpenWriter(truncating: quiet)
                var states: [(content: String, since: ContinuousClock.Instant)] = [("", .now)]
                try writer.write("one")
                states.append(("one", .now))
                try await Task.sleep(for: .milliseconds(700))
                try writer.write("-two")
                states.append(("one-two", .now))
                try await hammock.waitFor(type: "source", id: "f", timeout: .seconds(15)) { $0.documentedContent == "one-two" }
                // A read shows one state of the file, and comes only once that state has lasted the debounce
                // (less a little for the clocks): before the next write, or before the push arrived. A loaded
                // machine that stalls the writer for 3 s may make "one" quiet enough; never a shorter gap.
                let debounce = Duration.milliseconds(2800)
                for read in hammock.lines(since: mark) where read.id == "f" {
                    let content = read.documentedContent?.stringValue ?? "?"
                    let index = try #require(states.firstIndex { $0.content == content }, "a read of a state the file had: \(read)")
                    let lasted = index + 1 < states.count ? states[index + 1].since - states[index].since : read.receivedAt - states[index].since
                    #expect(lasted >= debounce, "\"\(content)\" was read after \(lasted) of quiet; the debounce is 3 s")
                }

                // g: held open and written, then closed; read at its close, not after 30 s of quiet.
                let closer = try OpenWriter(truncating: closed)
                try closer.write("x")
                try await Task.sleep(for: .milliseconds(300))
                try closer.write("-y")
                try closer.close()
                let closedAt = ContinuousClock.now
                let read = try await hammock.waitFor(type: "source", id: "g", timeout: .seconds(20)) { $0.origin == "push" }
                #expect(read.documentedContent == "x-y", "\(read)")
                #expect(read.receivedAt - closedAt < .seconds(15), "read at its close, not after 30 s of quiet")
                try writer.close()
            }
        }
    }

    /// "a file written without pause is still read every `max(1s, 10 × debounce)`". Written every 20 ms for
    /// `writing`, a file is read about `writing / period` times; the test asks for `atLeast`, fewer, so that
    /// a loaded machine passes.
    static func readsWhileWrittenWithoutPause(debounce: String?, writing: Duration, atLeast: Int) async throws {
        try await Documented.Folder.with { folder in
            let path = try folder.write("", to: "log.txt")
            try await HammockProcess.withRunning(config: Self.fileConfig(path: path, debounce: debounce)) { hammock in
                try await hammock.waitFor(type: "source", id: "f") { $0.event == "newData" }
                let mark = hammock.lineCount
                let writer = try OpenWriter(truncating: path)
                let start = ContinuousClock.now
                var written = 0
                while ContinuousClock.now - start < writing {
                    written += 1
                    try writer.write("\(written)\n")
                    try await Task.sleep(for: .milliseconds(20))
                }
                let pushes = hammock.lines(since: mark).filter { $0.id == "f" && $0.origin == "push" }
                #expect(
                    pushes.count >= atLeast,
                    "pushes while the file was written for \(writing) without pause: \(pushes.map { ($0.receivedAt - start, $0.documentedContent?.stringValue?.count ?? 0) })")
                try writer.close()
            }
        }
    }

    @Test("a file written without pause is still read at least every second (default debounce)")
    func readAtLeastEverySecond() async throws {
        try await Self.readsWhileWrittenWithoutPause(debounce: nil, writing: .seconds(6), atLeast: 2)
    }

    /// With `debounce: 500ms` the period is 5 s: written for 8 s, the file is read once while it is written.
    @Test("a file written without pause is still read every 10 × debounce when that is over a second")
    func readEveryTenDebouncesWithALongerDebounce() async throws {
        try await Self.readsWhileWrittenWithoutPause(debounce: "500ms", writing: .seconds(8), atLeast: 1)
    }

    /// "A stream command that exits is restarted with backoff." The plugin waits 1 s, then 2 s, then 4 s
    /// (StreamSource: 1 s doubling to 60 s). `retry: off`, so that no load from the engine starts it early.
    @Test("a stream command that exits is restarted after gaps that double")
    func streamRestartBackoff() async throws {
        try await Documented.Folder.with { folder in
            let starts = folder.path + "/starts"
            let config = """
                version: 1
                sources:
                  s:
                    kind: shell
                    mode: stream
                    retry: off
                    script: "cut -d' ' -f1 /proc/uptime >> \(starts); echo run-$(wc -l < \(starts))"
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                try await hammock.waitFor(type: "source", id: "s", timeout: .seconds(25)) { $0.documentedContent == "run-4" }
                let times = Documented.fileText(starts).split(separator: "\n").compactMap { Double($0) }
                try #require(times.count >= 4, "\(times)")
                let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
                // Lower bounds with room for the 10 ms clock of /proc/uptime and a slow start; each gap about
                // twice the one before.
                #expect(gaps[0] >= 0.8, "gaps \(gaps)")
                #expect(gaps[1] >= 1.6, "gaps \(gaps)")
                #expect(gaps[2] >= 3.2, "gaps \(gaps)")
                #expect(gaps[1] > gaps[0] * 1.4 && gaps[2] > gaps[1] * 1.4, "each gap longer than the one before: \(gaps)")
                // Each run's line was shown, each exit in between as an error.
                let lines = hammock.lines.filter { $0.id == "s" && $0.event != "requested" }
                for run in 1...4 {
                    #expect(lines.contains { $0.documentedContent == .string("run-\(run)") }, "run \(run): \(lines.map(\.text))")
                }
                #expect(lines.filter { $0.event == "error" }.count >= 3, "\(lines.map(\.text))")
            }
        }
    }

    enum CacheHome: String, CaseIterable, CustomStringConvertible {
        case xdgCacheHome, homeCache
        var description: String { rawValue }
    }

    /// "Stored under `$HAMMOCK_CACHE_DIR`, else `$XDG_CACHE_HOME/hammock`, else `~/.cache/hammock`".
    @Test("the offline cache lives under XDG_CACHE_HOME/hammock, else ~/.cache/hammock, and is restored from there",
          arguments: CacheHome.allCases)
    func cacheDirectoryFallback(_ home: CacheHome) async throws {
        try await Documented.Folder.with { folder in
            let configPath = try folder.write(
                """
                version: 1
                sources:
                  c: { kind: fake, content: "first", cache: true }
                """, to: "config.yaml")
            var environment = ["HOME": folder.path + "/home"]
            let expected: String
            var elsewhere: String?
            switch home {
            case .xdgCacheHome:
                environment["XDG_CACHE_HOME"] = folder.path + "/xdg"
                expected = folder.path + "/xdg/hammock"
                elsewhere = folder.path + "/home/.cache"
            case .homeCache:
                expected = folder.path + "/home/.cache/hammock"
            }
            try await Documented.run(configPath: configPath, environment: environment) { hammock in
                try await hammock.waitFor(type: "source", id: "c") { $0.event == "newData" }
                let stored = try await Documented.eventually(within: .seconds(8)) {
                    // The file itself, not the temporary one it is written as before its rename.
                    Self.filesBelow(expected).contains { $0.hasSuffix("/c.json") && Documented.fileText($0).contains("first") }
                }
                #expect(stored, "a cache file under \(expected): \(Self.filesBelow(folder.path))")
            }
            if let elsewhere {
                #expect(!FileManager.default.fileExists(atPath: elsewhere), "nothing under \(elsewhere): \(Self.filesBelow(folder.path))")
            }

            // The next start shows the stored content first, then loads as usual.
            try folder.write(
                """
                version: 1
                sources:
                  c: { kind: fake, content: "second", cache: true, delay: 300ms }
                """, to: "config.yaml")
            try await Documented.run(configPath: configPath, environment: environment) { hammock in
                let restored = try await hammock.waitFor(type: "source", id: "c") { $0.event == "newData" }
                #expect(restored.origin == "cache" && restored.documentedContent == "first", "\(restored)")
                let loaded = try await hammock.waitFor(type: "source", id: "c") { $0.event == "newData" }
                #expect(loaded.origin == "load" && loaded.documentedContent == "second", "\(loaded)")
            }
        }
    }

    /// Every regular file below `folder`, recursively.
    static func filesBelow(_ folder: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        var files: [String] = []
        while let relative = walker.nextObject() as? String {
            var isFolder: ObjCBool = false
            let path = folder + "/" + relative
            if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue { files.append(path) }
        }
        return files
    }
}
