import Foundation
import HammockJSON
import Testing

/// `cache: true` keeps a source's last content on disk; the next start shows it at once (origin `cache`),
/// then loads as usual. The store is written by atomic rename, so killing the engine at any moment leaves
/// either the old content or the new one, never a torn file.
@Suite("Offline cache")
struct CacheTests {
    /// A streaming counter with a large padding, so each write takes a while and kills land mid-write.
    static let config = """
        version: 1
        sources:
          counter:
            kind: shell
            mode: stream
            parse: json
            cache: true
            script: "pad=$(head -c 60000 /dev/zero | tr '\\\\0' x); i=0; while true; do i=$((i+1)); echo \\"{\\\\\\"n\\\\\\": $i, \\\\\\"pad\\\\\\": \\\\\\"$pad\\\\\\"}\\"; sleep 0.01; done"
        """

    @Test("killed with SIGKILL at random moments, every restart first shows whole, valid cached content")
    func survivesKillsMidWrite() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let configPath = try HammockProcess.writeConfig(Self.config, in: folder)
        let environment = ["HAMMOCK_CACHE_DIR": folder + "/cache"]
        var restoredRounds = 0
        for round in 0..<12 {
            let hammock = try HammockProcess.launch(configPath: configPath, environment: environment)
            do {
                let first = try await hammock.waitFor(type: "source", id: "counter")
                if round > 0 {
                    #expect(first.event == "newData" && first.origin == "cache", "round \(round): \(first.text.prefix(200))")
                    let content = first[pointer: "/state/content"]
                    #expect(content?["n"]?.numberValue?.intValue.map { $0 >= 1 } == true, "round \(round)")
                    #expect(content?["pad"]?.stringValue?.count == 60000, "round \(round): the cached content is whole")
                    restoredRounds += 1
                }
                // Let it write a few times, then kill it at a moment the test does not choose.
                try await hammock.waitFor(type: "source", id: "counter") { $0.event == "newData" && $0.origin != "cache" }
                try await Task.sleep(for: .milliseconds(Int.random(in: 20...250)))
                hammock.signal(SIGKILL)
                _ = try await hammock.waitForExit(timeout: .seconds(5))
            } catch {
                await hammock.stop()
                throw error
            }
            await hammock.stop()
        }
        #expect(restoredRounds == 11)
        // Whatever the last kill interrupted, the stored file is a whole JSON document.
        let store = try #require(try FileManager.default.subpathsOfDirectory(atPath: folder + "/cache").first { $0.hasSuffix("counter.json") })
        let bytes = try #require(FileManager.default.contents(atPath: folder + "/cache/" + store))
        #expect((try? JSONValue(parsing: [UInt8](bytes)))?["content"]?["pad"]?.stringValue?.count == 60000)
    }

    @Test("wipe forgets the cached content too")
    func wipeForgets() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let configPath = try HammockProcess.writeConfig(
            """
            version: 1
            sources:
              note: { kind: fake, content: "remember me", cache: true }
            """, in: folder)
        let environment = ["HAMMOCK_CACHE_DIR": folder + "/cache"]

        let first = try HammockProcess.launch(configPath: configPath, environment: environment)
        try await first.waitFor(type: "source", id: "note") { $0.event == "newData" }
        first.signal(SIGTERM)
        _ = try await first.waitForExit(timeout: .seconds(5))
        await first.stop()

        let second = try HammockProcess.launch(configPath: configPath, environment: environment)
        let restored = try await second.waitFor(type: "source", id: "note")
        #expect(restored.origin == "cache" && restored[pointer: "/state/content"] == "remember me")
        try await second.waitFor(type: "source", id: "note") { $0.origin == "load" }
        try second.send(controlLine: #"{"op":"wipe","source":"note"}"#)
        try await second.waitFor(type: "source", id: "note") { $0.origin == "wipe" }
        second.signal(SIGTERM)
        _ = try await second.waitForExit(timeout: .seconds(5))
        await second.stop()

        let third = try HammockProcess.launch(configPath: configPath, environment: environment)
        let firstLine = try await third.waitFor(type: "source", id: "note")
        #expect(firstLine.origin != "cache", "a wiped source is not restored: \(firstLine.text)")
        await third.stop()
    }
}
