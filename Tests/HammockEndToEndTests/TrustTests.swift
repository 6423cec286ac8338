import Foundation
import HammockJSON
import Testing

/// Issue 10, end to end: deadlines that survive a wall-clock step, `check` that reports everything at once
/// without quoting a secret, cache files only their owner can read.
@Suite("Trust")
struct TrustTests {
    static let libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

    @Test("Stepping the wall clock back an hour does not stop polling, and the jump refreshes at once")
    func wallClockStepBack() async throws {
        try #require(
            FileManager.default.fileExists(atPath: Self.libfaketime),
            "libfaketime is missing: apt-get install faketime (.ci/run installs it)")
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let offset = directory + "/faketime"
        try Data("+0\n".utf8).write(to: URL(fileURLWithPath: offset))
        let config = """
            sources:
              tick: { kind: shell, command: [date, "+%s"], refresh: 1s }
              hourly: { kind: shell, command: [date, "+%s"], refresh: 1h }
            """
        let environment = [
            "LD_PRELOAD": Self.libfaketime, "FAKETIME_TIMESTAMP_FILE": offset, "FAKETIME_NO_CACHE": "1",
            "DONT_FAKE_MONOTONIC": "1",
        ]
        // libfaketime's first preloaded process sets FAKETIME_SHARED with setenv, which moves `environ`, and
        // Swift's runtime, which finds argv next to it, then sees no arguments: start hammock from a preloaded
        // shell, so that it inherits the variable instead of setting it.
        let launcher = ["/bin/sh", "-c", #"exec "$@""#, "sh"]
        try await HammockProcess.withRunning(config: config, environment: environment, launcher: launcher) { hammock in
            try await hammock.waitUntil("both sources loaded") { lines in
                ["tick", "hourly"].allSatisfy { id in lines.contains { $0.id == id && $0.event == "newData" } }
            }
            let before = hammock.lineCount
            let last = try #require(hammock.lines.last { $0.id == "tick" && $0.event == "newData" })
            let stampBefore = try #require(last[pointer: "/state/timestamp"]?.stringValue)
            try Data("-1h\n".utf8).write(to: URL(fileURLWithPath: offset))
            func ticks(_ lines: [HammockLine]) -> [HammockLine] {
                lines[before...].filter { $0.id == "tick" && $0.event == "newData" }
            }
            // Polls go on (with the old scheduling they stopped for the hour): three more loads of the 1 s
            // source, stamped by the wall clock, an hour earlier than before.
            try await hammock.waitUntil("three polls after the step", timeout: .seconds(10)) { ticks($0).count >= 3 }
            let stamps = ticks(hammock.lines).compactMap { $0[pointer: "/state/timestamp"]?.stringValue }
            #expect(stamps.count >= 3 && stamps.allSatisfy { $0 < stampBefore }, "\(stamps) after \(stampBefore)")
            // The jump is noticed within a few seconds, and the hourly source loads again at once.
            try await hammock.waitUntil("the hourly source reloaded", timeout: .seconds(10)) { lines in
                lines[before...].contains { $0.id == "hourly" && $0.event == "requested" }
            }
            #expect(hammock.stderrText.contains("the clock jumped"), "\(hammock.stderrText)")
        }
    }

    @Test("check and run report the engine's problems and the plugins' together, sorted by line, quoting no secret")
    func everyProblemAtOnce() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            sources:
              a: { kind: shell, command: [echo, hi], refresh: 5 }
              b:
                kind: rest
                url: http://127.0.0.1:9/x
                refersh: 5s
                paginate: { style: cursor }
              c: { kind: rest, url: "http://127.0.0.1:9/y", method: "${secret:METHOD}" }
            """, in: directory)
        let expected = [
            #"\#(path):2:51: refresh: "5" has no unit; write 5s, 5ms, 5m or 5h"#,
            #"\#(path):6:5: source "b": unknown key "refersh" in a rest source (did you mean "refresh"?)"#,
            #"\#(path):7:17: source "b": paginate.style must be link or page, found "cursor""#,
            #"\#(path):8:49: source "c": method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, found "[redacted]""#,
            "\(path): 4 errors",
        ]
        for command in [["check", path], ["run", "--once", path]] {
            let run = try await HammockProcess.execute(command, environment: ["METHOD": "hunter2-method"])
            #expect(run.termination == .exited(2), "\(command[0]): \(run.stderr)")
            #expect(run.stderr.split(separator: "\n").map(String.init) == expected, "\(command[0])")
            #expect(!run.stderr.contains("hunter2") && !run.stdout.contains("hunter2"))
        }
    }

    @Test("Offline cache files are readable by their owner alone")
    func cacheFilesArePrivate() async throws {
        let cache = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let config = "sources:\n  a: { kind: fake, content: {token: private}, cache: true }\n"
        try await HammockProcess.withRunning(config: config, environment: ["HAMMOCK_CACHE_DIR": cache]) { hammock in
            try await hammock.waitFor(type: "source", id: "a") { $0.event == "newData" }
            let deadline = ContinuousClock.now + .seconds(8)
            var file: String?
            while file == nil && ContinuousClock.now < deadline {
                let folders = (try? FileManager.default.contentsOfDirectory(atPath: cache)) ?? []
                file = folders.lazy.map { cache + "/" + $0 + "/a.json" }.first { FileManager.default.fileExists(atPath: $0) }
                if file == nil { try await Task.sleep(for: .milliseconds(20)) }
            }
            let written = try #require(file, "no cache file appeared under \(cache)")
            let folder = (written as NSString).deletingLastPathComponent
            #expect(try permissions(written) == 0o600)
            #expect(try permissions(folder) == 0o700)
        }
    }

    private func permissions(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }
}
