import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// `cache: true` keeps a source's last content on disk; the next start shows it at once (origin `cache`),
/// then loads as usual. The store is written by atomic rename, so killing the engine at any moment leaves
/// either the old content or the new one, never a torn file.
@Suite("Offline cache")
struct CacheTests {
    /// A streaming counter with a large padding, so each write takes a while and kills land mid-write. Each
    /// line names the round (`$HAMMOCK_TEST_ROUND`, from hammock's environment), so a restored value says which
    /// run wrote it.
    static let config = """
        version: 1
        sources:
          counter:
            kind: shell
            mode: stream
            parse: json
            cache: true
            script: "pad=$(head -c 60000 /dev/zero | tr '\\\\0' x); i=0; while true; do i=$((i+1)); echo \\"{\\\\\\"round\\\\\\": $HAMMOCK_TEST_ROUND, \\\\\\"n\\\\\\": $i, \\\\\\"pad\\\\\\": \\\\\\"$pad\\\\\\"}\\"; sleep 0.01; done"
        """

    /// The content of the cache file of `counter` under `cache`, or nil while there is none; throws when the
    /// file is not a whole document (a torn write).
    static func cachedContent(in cache: String) throws -> JSONValue? {
        guard let store = (try? FileManager.default.subpathsOfDirectory(atPath: cache))?.first(where: { $0.hasSuffix("counter.json") }),
            let bytes = FileManager.default.contents(atPath: cache + "/" + store)
        else { return nil }
        // Written by atomic rename: whatever moment it is read at, it is a whole document.
        do {
            return try JSONValue(parsing: [UInt8](bytes))["content"]
        } catch {
            throw TornRead(bytes: bytes.count, reason: "\(error)")
        }
    }

    struct TornRead: Error, CustomStringConvertible {
        var bytes: Int
        var reason: String
        var description: String { "a torn cache file: \(bytes) bytes, \(reason)" }
    }

    /// Reads the cache file over and over until cancelled, as a restart would at any moment; returns the
    /// torn reads it saw (a truncate-and-write shows an empty or partial file for a while at each write).
    static func watchForTornReads(in cache: String) async -> [TornRead] {
        var torn: [TornRead] = []
        var folder: String?
        while !Task.isCancelled {
            if folder == nil {
                folder = (try? FileManager.default.contentsOfDirectory(atPath: cache))?.first.map { cache + "/" + $0 }
            }
            if let folder, let bytes = FileManager.default.contents(atPath: folder + "/counter.json") {
                do { _ = try JSONValue(parsing: [UInt8](bytes)) } catch { torn.append(TornRead(bytes: bytes.count, reason: "\(error)")) }
            }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return torn
    }

    /// Runs `rounds` rounds of hammock on `configPath` with the cache at `cache`, each killed with SIGKILL.
    /// Even rounds run until this round's content is in the cache file, then are killed within 250 ms; odd
    /// rounds are killed at a random moment of their first 1.5 s, start-up and the restore included. Every
    /// steady round after the first checks that its start showed the newest content a former round is known
    /// to have stored (or a later one), whole. Returns how many rounds checked a restore.
    static func killRounds(_ rounds: Int, chain: Int, configPath: String, cache: String) async throws -> Int {
        // The newest content known to be stored: by which round, and its counter then.
        var stored: (round: Int, n: Int)?
        var restoredRounds = 0
        for round in 0..<rounds {
            let environment = ["HAMMOCK_CACHE_DIR": cache, "HAMMOCK_TEST_ROUND": "\(round)"]
            let name = "chain \(chain), round \(round)"
            try await HammockProcess.withRunning(configPath: configPath, environment: environment) { hammock in
                if round.isMultiple(of: 2) {
                    let first = try await hammock.waitFor(type: "source", id: "counter")
                    if let stored {
                        #expect(first.event == "newData" && first.origin == "cache", "\(name): \(first.text.prefix(200))")
                        let content = first[pointer: "/state/content"]
                        #expect(content?["pad"]?.stringValue?.count == 60000, "\(name): the cached content is whole")
                        let restoredRound = content?["round"]?.numberValue?.intValue ?? -1
                        let restoredN = content?["n"]?.numberValue?.intValue ?? -1
                        // A later round (killed at random) may have stored newer content; never an older one.
                        #expect(
                            (stored.round..<round).contains(restoredRound) && (restoredRound > stored.round || restoredN >= stored.n),
                            "\(name) restored round \(restoredRound)'s n = \(restoredN); round \(stored.round) had stored n = \(stored.n)")
                        restoredRounds += 1
                    }
                    // Wait until this run has stored content of its own, then kill it at a moment the test does
                    // not choose, most likely in the middle of a later write.
                    var seen: JSONValue?
                    var torn: TornRead?
                    let written = try await ProcessTable.eventually(within: .seconds(10)) {
                        do { seen = try Self.cachedContent(in: cache) } catch let error as TornRead { torn = error } catch {}
                        return torn != nil || seen?["round"]?.numberValue?.intValue == round
                    }
                    if let torn { Issue.record("\(name): \(torn)") }
                    try #require(written, "\(name): the cache file never held this round's content: \(String(describing: seen))")
                    stored = (round, seen?["n"]?.numberValue?.intValue ?? 0)
                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...250)))
                } else {
                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...1500)))
                }
                hammock.signal(SIGKILL)
                #expect(try await hammock.waitForExit(timeout: .seconds(5)) == .signaled(SIGKILL), "\(name)")
            }
        }
        // Whatever the last kill interrupted, the stored file is a whole JSON document.
        let content = try #require(try Self.cachedContent(in: cache), "chain \(chain)")
        #expect(content["pad"]?.stringValue?.count == 60000, "chain \(chain)")
        return restoredRounds
    }

    /// Three chains of six rounds, each with a cache of its own, run at once: 18 kills and 6 checked restores
    /// in the time of six rounds (one chain of 12 rounds had 12 kills and 5 restores).
    @Test("killed with SIGKILL at random moments from start-up on, every restart first shows whole, valid cached content, and the newest stored")
    func survivesKillsMidWrite() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let configPath = try HammockProcess.writeConfig(Self.config, in: folder)
        // A reader at every moment, as well as the restarts: a torn file is a failure, never skipped.
        let watchers = (1...3).map { chain in Task { await Self.watchForTornReads(in: folder + "/cache-\(chain)") } }
        let restored = try await withThrowingTaskGroup(of: Int.self) { group in
            for chain in 1...3 {
                group.addTask { try await Self.killRounds(6, chain: chain, configPath: configPath, cache: folder + "/cache-\(chain)") }
            }
            return try await group.reduce(0, +)
        }
        var torn: [TornRead] = []
        for watcher in watchers {
            watcher.cancel()
            torn += await watcher.value
        }
        #expect(torn.isEmpty, "\(torn.count) torn reads of the cache file, the first: \(torn.first.map { "\($0)" } ?? "")")
        #expect(restored == 6)
    }
}
