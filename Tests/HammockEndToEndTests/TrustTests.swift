import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// Issue 10, end to end: deadlines that survive a wall-clock step, `check` that reports everything at once
/// without quoting a secret, cache files only their owner can read.
@Suite("Trust")
struct TrustTests {
    @Test("Stepping the wall clock back an hour does not stop polling, and the jump refreshes at once")
    func wallClockStepBack() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = try SteppedWallClock(in: directory)
        let config = """
            sources:
              tick: { kind: shell, command: [date, "+%s"], refresh: 1s }
              hourly: { kind: shell, command: [date, "+%s"], refresh: 1h }
            """
        try await HammockProcess.withRunning(config: config, environment: clock.environment, launcher: clock.launcher) { hammock in
            try await hammock.waitUntil("both sources loaded") { lines in
                ["tick", "hourly"].allSatisfy { id in lines.contains { $0.id == id && $0.event == "newData" } }
            }
            let before = hammock.lineCount
            let last = try #require(hammock.lines.last { $0.id == "tick" && $0.event == "newData" })
            let stampBefore = try #require(last[pointer: "/state/timestamp"]?.stringValue)
            try clock.set("-1h")
            func ticks(_ lines: [HammockLine]) -> [HammockLine] {
                lines[before...].filter { $0.id == "tick" && $0.event == "newData" }
            }
            // Polls go on (with the old scheduling they stopped for the hour): three more loads of the 1 s
            // source, stamped by the wall clock, an hour earlier than before. (A tick already in the pipe when
            // the clock was stepped may still carry the old time: only the stepped ones are counted.)
            func steppedStamps(_ lines: [HammockLine]) -> [String] {
                ticks(lines).compactMap { $0[pointer: "/state/timestamp"]?.stringValue }.filter { $0 < stampBefore }
            }
            try await hammock.waitUntil("three polls stamped after the step", timeout: .seconds(10)) {
                steppedStamps($0).count >= 3
            }
            let stamps = ticks(hammock.lines).compactMap { $0[pointer: "/state/timestamp"]?.stringValue }
            #expect(stamps.last.map { $0 < stampBefore } == true, "the newest tick is stepped: \(stamps) after \(stampBefore)")
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

/// Issue 11, the configuration's and the cache's part: diagnostics that quote no secret and no control
/// character, numbers with ranges, files with size limits, a cache that stores no secret and follows no link.
@Suite("Containment: configuration and cache")
struct ConfigurationContainmentTests {
    static func check(_ yaml: String, environment: [String: String] = [:]) async throws -> CompletedRun {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(yaml, in: directory)
        return try await HammockProcess.execute(["check", path], environment: environment)
    }

    @Test("check quotes no secret in any diagnostic, whichever key it stands in")
    func noSecretInDiagnostics() async throws {
        let secrets = [
            "R": "r3fresh-secret", "S": "s3lect-secret", "K": "k1nd-secret", "U": "ur1-secret", "M": "m3thod-secret",
            "P": "p4rse-secret", "C": "c0mmand-secret", "Y": "r3ady-secret",
        ]
        let yaml = """
            sources:
              a: { kind: fake, refresh: "${secret:R}", select: "${secret:S}" }
              b: { kind: "${secret:K}" }
              c: { kind: rest, url: "${secret:U}", method: "${secret:M}", parse: "${secret:P}" }
              d: { kind: nocommand }
            views:
              v: { sources: [a], ready: "${secret:Y}" }
            plugins:
              nocommand: { command: ["/nonexistent/${secret:C}"] }
            """
        let run = try await Self.check(yaml, environment: secrets)
        #expect(run.termination == .exited(2))
        let output = run.stdout + run.stderr
        for value in secrets.values { #expect(!output.contains(value), "\(value) in: \(output)") }
        #expect(output.split(separator: "\n").filter { $0.contains("[redacted]") }.count >= 7, "\(output)")
    }

    @Test("Diagnostics show control characters escaped, and a duration of nan is not a number without a unit")
    func controlCharactersAndNaN() async throws {
        let run = try await Self.check("sources:\n  \"a\\e[2Jb\\r\": { kind: fake }\n  b: { kind: fake, expiration: nan }\n")
        #expect(run.termination == .exited(2))
        #expect(!run.stderr.contains("\u{1B}") && !run.stderr.contains("\r"), "\(run.stderr.debugDescription)")
        #expect(run.stderr.contains(#"a\u{1B}[2Jb\r"#), "\(run.stderr)")
        #expect(!run.stderr.contains("nans"), "\(run.stderr)")
        #expect(run.stderr.contains(#"expiration: "nan" is not a duration"#), "\(run.stderr)")
    }

    @Test("A number at the edge of Int is refused by check with its range, not a crash at the first load")
    func numbersHaveRanges() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data("x\n".utf8).write(to: URL(fileURLWithPath: directory + "/f.txt"))
        let run = try await Self.check("sources:\n  f: { kind: file, path: \(directory)/f.txt, maxBytes: 9223372036854775807 }\n")
        #expect(run.termination == .exited(2))
        #expect(run.stderr.contains("maxBytes must be a whole number from 1 to 1073741824"), "\(run.stderr)")
    }

    /// "At once" is shown by the file's size, not by a stopwatch (a wall-clock bound failed on a loaded CI
    /// machine): a 64 GiB file (sparse, so it costs no disk) is refused before a byte of it is read. A hammock
    /// that read or parsed it first could not finish, on a machine with 24 GiB of memory.
    @Test("A configuration over 4 MiB is refused at once with a clear error")
    func configurationSizeLimit() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig("sources:\n  a: { kind: fake }\n", in: directory)
        #expect(truncate(path, 64 << 30) == 0, "a sparse 64 GiB file: errno \(errno)")
        let run = try await HammockProcess.execute(["check", path], timeout: .seconds(60))
        #expect(run.termination == .exited(2))
        #expect(run.stderr.contains("the file is \(64 << 30) bytes; a configuration may be at most 4 MiB"), "\(run.stderr.prefix(500))")
    }

    @Test("A five-digit secret is redacted too")
    func shortSecrets() async throws {
        let config = """
            sources:
              pin: { kind: shell, command: [echo, "your pin is 24680"], env: { PIN: "${PIN}" } }
            """
        try await HammockProcess.withRunning(config: config, environment: ["PIN": "24680"]) { hammock in
            let line = try await hammock.waitFor(type: "source", id: "pin") { $0.event == "newData" }
            #expect(line[pointer: "/state/content"] == "your pin is [redacted]")
        }
    }

    @Test("The cache stores no secret, follows no planted link, and ignores a file too large to be its own")
    func cacheContainment() async throws {
        let cache = try HammockProcess.makeTemporaryDirectory()
        let elsewhere = try HammockProcess.makeTemporaryDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: cache)
            try? FileManager.default.removeItem(atPath: elsewhere)
        }
        // Both runs read the same file: the cache folder is named after the configuration's path.
        let configPath = try HammockProcess.writeConfig(
            "sources:\n  a: { kind: fake, content: \"token=${secret:TOKEN}\", cache: true }\n", in: elsewhere)
        let environment = ["HAMMOCK_CACHE_DIR": cache, "TOKEN": "c4che-secret"]
        let first = try HammockProcess.launch(configPath: configPath, environment: environment)
        let file: String
        do {
            try await first.waitFor(type: "source", id: "a") { $0.event == "newData" }
            file = try await Self.cacheFile(in: cache)
            await first.stop()
        } catch {
            await first.stop()
            throw error
        }
        let stored = try String(contentsOfFile: file, encoding: .utf8)
        #expect(!stored.contains("c4che-secret") && stored.contains("[redacted]"), "\(stored)")

        // A link planted at the temporary name must not make the next write land elsewhere; a huge file at the
        // cache's name is not read whole but ignored with a warning.
        let victim = elsewhere + "/victim"
        try Data("untouched".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createSymbolicLink(atPath: file + ".tmp", withDestinationPath: victim)
        try Data(count: 18 << 20).write(to: URL(fileURLWithPath: file))
        let second = try HammockProcess.launch(configPath: configPath, environment: environment)
        do {
            let answer = try await second.waitFor(type: "source", id: "a") { $0.event == "newData" }
            #expect(answer.origin == "load", "nothing restored from the oversized file: \(answer)")
            try await second.waitUntil("the cache was written again") { _ in
                var info = stat()
                return stat(file, &info) == 0 && info.st_size < 1000
            }
            #expect(second.stderrText.contains("ignoring the cache file"), "\(second.stderrText)")
            await second.stop()
        } catch {
            await second.stop()
            throw error
        }
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "untouched")
    }

    static func cacheFile(in cache: String) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(8)
        while ContinuousClock.now < deadline {
            let folders = (try? FileManager.default.contentsOfDirectory(atPath: cache)) ?? []
            if let file = folders.lazy.map({ cache + "/" + $0 + "/a.json" }).first(where: { FileManager.default.fileExists(atPath: $0) }) {
                return file
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw CancellationError()
    }
}
