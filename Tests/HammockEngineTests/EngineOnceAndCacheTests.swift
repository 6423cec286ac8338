import Foundation
import HammockJSON
import Testing

@testable import HammockEngine

/// `--once`, in memory: moved from `HammockEndToEndTests/LifecycleTests.swift`, every assertion kept; the
/// exit status is the one `Engine.run` returns (the command throws it as its `ExitCode`, which the end-to-end
/// `CommandLineTests` still check for a real process). The deadline is the manual clock's: the test moves
/// time past it instead of waiting a second.
@Suite("--once, in memory")
struct EngineOnceTests {
    @Test("--once exits 0 when every source loads, after writing their states and bye")
    func onceSuccess() async throws {
        let config = """
            version: 1
            sources:
              a: { kind: fake, content: 1, delay: 50ms }
              b: { kind: fake, content: [x], delay: 150ms }
              c: { kind: fake, content: { k: v } }
            views:
              abc: { sources: [a, b, c] }
            """
        try await EmbeddedEngine.run(config, options: RunOptions(once: true)) { hammock in
            #expect(try await hammock.waitForExit() == 0)
            let bye = try await hammock.waitFor(type: "bye")
            #expect(bye["reason"] == "once")
            #expect(bye["failed"] == [], "\(bye)")
            let lines = hammock.lines
            #expect(lines.last?.type == "bye")
            for id in ["a", "b", "c"] {
                #expect(lines.contains { $0.id == id && $0.event == "newData" }, "\(id) was loaded")
            }
            let view = try #require(lines.last { $0.id == "abc" })
            #expect(view.status == "data")
            #expect(view["content"] == ["a": 1, "b": ["x"], "c": ["k": "v"]])
            #expect(lines.map(\.seq) == lines.indices.map { $0 + 1 })
        }
    }

    @Test("--once exits 1 when a source fails, and bye lists it in failed")
    func onceFailure() async throws {
        let config = """
            version: 1
            sources:
              fine: { kind: fake, content: 1, delay: 20ms }
              broken: { kind: fake, state: error, error: { message: gone, httpStatus: 410 }, delay: 50ms }
            """
        try await EmbeddedEngine.run(config, options: RunOptions(once: true)) { hammock in
            #expect(try await hammock.waitForExit() == 1)
            let bye = try await hammock.waitFor(type: "bye")
            #expect(bye["reason"] == "once", "every source answered before the deadline: \(bye)")
            #expect(bye["failed"] == ["broken"])
            #expect(hammock.lines.last?.type == "bye", "nothing is written after bye")
            let error = try #require(hammock.lines.last { $0.id == "broken" })
            #expect(error.state?["latestError"]?["httpStatus"] == 410)
            #expect(error.state?["failures"] == 1, "no retry with --once")
            #expect(hammock.lines.filter { $0.id == "broken" && $0.event == "requested" }.count <= 1)
        }
    }

    @Test("--once with --deadline 1s exits 1 at the deadline when a source never answers")
    func onceDeadline() async throws {
        let config = """
            version: 1
            sources:
              fine: { kind: fake, content: 1, delay: 20ms }
              stuck: { kind: fake, state: loading }
            """
        try await EmbeddedEngine.run(config, options: RunOptions(once: true, onceDeadline: .seconds(1))) { hammock in
            try await hammock.waitFor(type: "source", id: "fine") { $0.event == "newData" }
            // Not before the deadline: 999 ms in, the run goes on.
            hammock.advance(by: .milliseconds(999))
            hammock.send(controlLine: #"{"op":"snapshot","id":"still"}"#)
            try await hammock.waitFor(type: "ack") { $0["id"] == "still" }
            #expect(!hammock.lines.contains { $0.type == "bye" }, "bye came before the 1 s deadline")
            hammock.advance(by: .milliseconds(1))
            #expect(try await hammock.waitForExit() == 1)
            let bye = try await hammock.waitFor(type: "bye")
            #expect(bye["reason"] == "deadline", "\(bye)")
            #expect(bye["failed"] == ["stuck"])
            #expect(hammock.lines.last?.type == "bye", "nothing is written after bye")
        }
    }
}

/// The offline cache, in memory: moved from `HammockEndToEndTests/CacheTests.swift`, every assertion kept.
/// A "restart" is a second engine over the same folder; the cache is the real `CacheStore`, on disk under
/// it. (The SIGKILL test stays there: it kills a real process mid-write.)
@Suite("Offline cache, in memory")
struct EngineCacheTests {
    @Test("wipe forgets the cached content too")
    func wipeForgets() async throws {
        let folder = try EmbeddedEngine.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let config = """
            version: 1
            sources:
              note: { kind: fake, content: "remember me", cache: true }
            """
        try await EmbeddedEngine.run(config, directory: folder) { first in
            try await first.waitFor(type: "source", id: "note") { $0.event == "newData" }
        }
        try await EmbeddedEngine.run(config, directory: folder) { second in
            let restored = try await second.waitFor(type: "source", id: "note")
            #expect(restored.origin == "cache" && restored[pointer: "/state/content"] == "remember me")
            try await second.waitFor(type: "source", id: "note") { $0.origin == "load" }
            second.send(controlLine: #"{"op":"wipe","source":"note"}"#)
            try await second.waitFor(type: "source", id: "note") { $0.origin == "wipe" }
        }
        try await EmbeddedEngine.run(config, directory: folder) { third in
            let firstLine = try await third.waitFor(type: "source", id: "note")
            #expect(firstLine.origin != "cache", "a wiped source is not restored: \(firstLine.text)")
        }
    }

    @Test("a source with a 300-character id is cached: a restart shows its content, origin cache")
    func aLongIDIsCached() async throws {
        let folder = try EmbeddedEngine.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let id = String(repeating: "long_id-", count: 40).prefix(300)
        let shortID = String(id.prefix(200))
        let config = """
            version: 1
            sources:
              \(id): { kind: fake, content: "kept under a long name", cache: true }
              \(shortID): { kind: fake, content: "kept under its own name", cache: true }
            """
        let status = try await EmbeddedEngine.run(config, directory: folder) { first in
            try await first.waitFor(type: "source", id: String(id)) { $0.event == "newData" }
            try await first.waitFor(type: "source", id: shortID) { $0.event == "newData" }
            first.stop(signal: SIGTERM)
            _ = try await first.waitForExit()
            #expect(!first.logText.contains("cannot store"), "\(first.logText)")
        }
        #expect(status == 0)
        try await EmbeddedEngine.run(config, directory: folder) { second in
            let restored = try await second.waitFor(type: "source", id: String(id))
            #expect(restored.origin == "cache", "\(restored.text)")
            #expect(restored[pointer: "/state/content"] == "kept under a long name")
            let restoredShort = try await second.waitFor(type: "source", id: shortID)
            #expect(restoredShort.origin == "cache" && restoredShort[pointer: "/state/content"] == "kept under its own name")
        }
    }

    @Test("a cache that cannot store says so once in the log, and the source goes on loading")
    func aCacheThatCannotStoreSaysSoOnce() async throws {
        let folder = try EmbeddedEngine.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The cache folder would be inside a regular file: no folder can be made there.
        try Data("a file".utf8).write(to: URL(fileURLWithPath: folder + "/cache"))
        let config = """
            version: 1
            sources:
              note: { kind: fake, content: "not stored", cache: true, refresh: 100ms }
            """
        let status = try await EmbeddedEngine.run(config, directory: folder) { hammock in
            try await hammock.waitForLog(containing: "the offline cache cannot store source \"note\"")
            // Several more loads, each one another store that fails.
            for _ in 0..<5 {
                try await hammock.next("note") { $0.event == "newData" }
                hammock.advance(by: .milliseconds(100))
            }
            hammock.stop(signal: SIGTERM)
            _ = try await hammock.waitForExit()
            let warnings = hammock.logText.components(separatedBy: "cannot store").count - 1
            #expect(warnings == 1, "said \(warnings) times: \(hammock.logText)")
        }
        #expect(status == 0)
    }
}
