import Foundation
import Glibc
import HammockTestSupport
import Testing

/// `--http`'s health routes, asked by `curl` of a real `hammock run` and `hammock serve` (docs/http.md).
@Suite("--http: health checks", .timeLimit(.minutes(2)))
struct HTTPTests {
    /// `curl -s URL`: the status and the body.
    static func curl(_ url: String, method: String = "GET") async throws -> (status: Int, body: String) {
        let process = try HammockProcess.launch(
            program: "/usr/bin/curl", arguments: ["-s", "-X", method, "-w", "\n%{http_code}", "--max-time", "10", url])
        defer { Task { await process.stop() } }
        _ = try await process.waitForExit(timeout: .seconds(20))
        try await process.waitUntilStdoutEnds()
        let lines = process.stdoutText.split(separator: "\n", omittingEmptySubsequences: false)
        let status = try #require(Int(lines.last ?? ""), "curl printed \(process.stdoutText)")
        // Each answer ends with a newline, for a person at a terminal.
        return (status, lines.dropLast().joined(separator: "\n").trimmingCharacters(in: .newlines))
    }

    /// The address hammock says it serves health at.
    static func base(_ hammock: HammockProcess) async throws -> String {
        try await hammock.waitForStderr(containing: "/healthz")
        let match = try #require(hammock.stderrText.firstMatch(of: /http:\/\/127\.0\.0\.1:[0-9]+/))
        return String(match.0)
    }

    /// Broken on purpose (readiness answered from every source, answered or not, as ready), the first
    /// `/readyz` here said 200.
    @Test("run: /healthz is the loop's answer; /readyz is 503 naming what waits, then 200; ?views= asks for those alone")
    func runHealthAndReadiness() async throws {
        let config = """
            sources:
              quick: { kind: fake, content: 1 }
              slow: { kind: shell, command: [sh, -c, "sleep 2; echo late"] }
            views:
              now: { sources: [quick] }
            """
        try await HammockProcess.withRunning(config: config, arguments: ["--http", "127.0.0.1:0"]) { hammock in
            let base = try await Self.base(hammock)
            try await hammock.waitUntil("quick answered") { $0.contains { $0.id == "quick" && $0.event == "newData" } }
            let health = try await Self.curl(base + "/healthz")
            #expect(health.status == 200 && health.body == #"{"status":"ok","sources":2,"watched":2}"#, "\(health)")
            let waiting = try await Self.curl(base + "/readyz")
            #expect(waiting.status == 503 && waiting.body == #"{"ready":false,"waiting":["slow"]}"#, "\(waiting)")
            let view = try await Self.curl(base + "/readyz?views=now")
            #expect(view.status == 200 && view.body == #"{"ready":true}"#, "\(view)")
            // The query is percent-decoded: n%6Fw is now.
            #expect(try await Self.curl(base + "/readyz?views=n%6Fw").status == 200)
            let unknown = try await Self.curl(base + "/readyz?views=now,nope")
            #expect(unknown.status == 404 && unknown.body.contains("nope"), "\(unknown)")
            try await hammock.waitUntil("slow answered") { $0.contains { $0.id == "slow" && $0.event == "newData" } }
            let ready = try await Self.curl(base + "/readyz")
            #expect(ready.status == 200 && ready.body == #"{"ready":true}"#, "\(ready)")
            let post = try await Self.curl(base + "/healthz", method: "POST")
            #expect(post.status == 405, "\(post)")
            let nowhere = try await Self.curl(base + "/nowhere")
            #expect(nowhere.status == 404 && nowhere.body.contains("/healthz"), "\(nowhere)")
            // The engine goes on: a control line still gets its answer.
            try hammock.send(controlLine: #"{"op":"load","source":"quick","id":1}"#)
            try await hammock.waitFor(type: "ack")
        }
    }

    @Test("serve: /healthz counts what clients watch; /readyz waits for what a client's subscription loads")
    func serveHealthFollowsDemand() async throws {
        let config = """
            sources:
              a: { kind: fake, content: 1 }
              slow: { kind: fake, content: 2, delay: 1500ms }
            """
        try await ServeEngine.with(config, arguments: ["--http", "127.0.0.1:0"]) { engine in
            let base = try await Self.base(engine.process)
            // Nobody watches: nothing loads, nothing is waited for.
            let idle = try await Self.curl(base + "/healthz")
            #expect(idle.status == 200 && idle.body == #"{"status":"ok","sources":2,"watched":0}"#, "\(idle)")
            #expect(try await Self.curl(base + "/readyz").status == 200)
            let client = try engine.client(#"{"op":"subscribe","sources":["a","slow"]}"#)
            try await client.next(type: "source", id: "a") { $0[pointer: "/state/content"] == 1 }
            let waiting = try await Self.curl(base + "/readyz")
            #expect(waiting.status == 503 && waiting.body == #"{"ready":false,"waiting":["slow"]}"#, "\(waiting)")
            #expect(try await Self.curl(base + "/healthz").body == #"{"status":"ok","sources":2,"watched":2}"#)
            try await client.next(type: "source", id: "slow") { $0[pointer: "/state/content"] == 2 }
            #expect(try await Self.curl(base + "/readyz").status == 200)
        }
    }

    @Test("--http on an address other machines reach, or not HOST:PORT: a clear error, exit 2, nothing started")
    func badAddress() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig("sources:\n  n: { kind: fake, content: 1 }\n", in: directory)
        let cases: [([String], String)] = [
            (["run", path, "--http", "0.0.0.0:8080"], "--http 0.0.0.0:8080: only this machine's loopback is served"),
            (["serve", path, "--http", "8080"], #"--http "8080" is not HOST:PORT"#),
        ]
        for (arguments, message) in cases {
            let run = try await HammockProcess.execute(arguments)
            #expect(run.termination == .exited(2), "\(arguments): \(run.stderr)")
            #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
            #expect(run.stdout.isEmpty, "\(arguments): \(run.stdout)")
        }
    }
}
