import Foundation
import Glibc
import HammockTestSupport
import Testing

/// `--http`'s routes, asked by `curl` of a real `hammock run` and `hammock serve` (docs/http.md); Python's
/// urllib and raw sockets read and attack the same door in clients/python/tests/test_http.py.
@Suite("--http: states, events, control, health, and who may ask", .timeLimit(.minutes(2)))
struct HTTPTests {
    /// `curl -s URL`: the status and the body; `options` go before the URL (`-H`, `-d`, `-D -`).
    static func curl(
        _ url: String, method: String = "GET", _ options: [String] = [], seconds: Int = 10
    ) async throws -> (status: Int, body: String) {
        let process = try HammockProcess.launch(
            program: "/usr/bin/curl", arguments: ["-s", "-X", method, "-w", "\n%{http_code}", "--max-time", "\(seconds)"] + options + [url])
        defer { Task { await process.stop() } }
        _ = try await process.waitForExit(timeout: .seconds(seconds + 10))
        try await process.waitUntilStdoutEnds()
        let lines = process.stdoutText.split(separator: "\n", omittingEmptySubsequences: false)
        let status = try #require(Int(lines.last ?? ""), "curl printed \(process.stdoutText)")
        // Each answer ends with a newline, for a person at a terminal.
        return (status, lines.dropLast().joined(separator: "\n").trimmingCharacters(in: .newlines))
    }

    /// The address hammock says it serves health at.
    static func base(_ hammock: HammockProcess) async throws -> String {
        try await hammock.waitForStderr(containing: "/healthz")
        let match = try #require(hammock.stderrText.firstMatch(of: /http:\/\/[0-9.]+:[0-9]+/))
        return String(match.0).replacingOccurrences(of: "0.0.0.0", with: "127.0.0.1")
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
            (["run", path, "--http", "0.0.0.0:8080"], "--http 0.0.0.0:8080 is reachable from other machines: add --http-token FILE"),
            (["serve", path, "--http", "8080"], #"--http "8080" is not HOST:PORT"#),
            (["run", path, "--http-token", path], "--http-token guards the HTTP door; add --http HOST:PORT"),
            (["run", path, "--http", "127.0.0.1:0", "--http-cors", "dash.example"], #"--http-cors "dash.example" is not an origin"#),
            (["run", path, "--http", "0.0.0.0:0", "--http-token", path], "--http-token \(path): other users can read it"),
        ]
        for (arguments, message) in cases {
            let run = try await HammockProcess.execute(arguments)
            #expect(run.termination == .exited(2), "\(arguments): \(run.stderr)")
            #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
            #expect(run.stdout.isEmpty, "\(arguments): \(run.stdout)")
        }
    }

    /// Broken on purpose (the door's lines encoded without the redactor), the secret showed in all three.
    @Test("curl reads states, an event stream and control answers: the lines hammock writes, secrets redacted")
    func statesEventsAndControl() async throws {
        let config = """
            sources:
              n: { kind: fake, content: 1 }
              vault: { kind: shell, command: [sh, -c, 'echo "key $TOKEN"'], env: { TOKEN: "${TOKEN}" }, refresh: 1h }
            views:
              v: { sources: [n] }
            """
        let secret = "curl-s3cr3t"
        try await HammockProcess.withRunning(config: config, arguments: ["--http", "127.0.0.1:0"], environment: ["TOKEN": secret]) { hammock in
            let base = try await Self.base(hammock)
            try await hammock.waitUntil("vault answered") { $0.contains { $0.id == "vault" && $0.event == "newData" } }
            let one = try await Self.curl(base + "/v1/sources/vault")
            #expect(one.status == 200 && one.body.contains(#""content":"key [redacted]""#) && !one.body.contains(secret), "\(one)")
            let all = try await Self.curl(base + "/v1/sources")
            #expect(all.status == 200 && all.body.hasPrefix(#"{"n":{"type":"source","seq":"#) && !all.body.contains(secret), "\(all)")
            let view = try await Self.curl(base + "/v1/views/v")
            #expect(view.status == 200 && view.body.contains(#""status":"data""#), "\(view)")
            let unknown = try await Self.curl(base + "/v1/views/nope")
            #expect(unknown.status == 404 && unknown.body.contains(#"no view \"nope\""#), "\(unknown)")
            let ack = try await Self.curl(
                base + "/v1/control", method: "POST",
                ["-H", "Content-Type: application/json", "-d", #"{"op":"override","source":"n","content":2,"id":"c1"}"#])
            #expect(ack.status == 200 && ack.body.hasPrefix(#"{"type":"ack""#) && ack.body.contains(#""id":"c1""#), "\(ack)")
            // The stream: hello, the snapshot (n as overridden), the ack that ends it with an id, then nothing
            // new until curl's time is up; every event's data is one line.
            let events = try await Self.curl(base + "/v1/events?sources=n,vault", ["-N", "--max-time", "2"])
            let text = events.body
            #expect(text.hasPrefix("event: hello\ndata: {"), "\(text)")
            #expect(text.contains("event: source\ndata: {\"type\":\"source\"") && text.contains(#""content":2"#), "\(text)")
            #expect(text.contains("event: ack\ndata: {\"type\":\"ack\""), "\(text)")
            #expect(text.firstMatch(of: /id: [0-9]+\nevent: ack/) != nil, "\(text)")
            #expect(!text.contains(secret), "\(text)")
        }
    }

    /// Broken on purpose (the token compared as a prefix), the wrong token was let in.
    @Test("--http-token: every request carries the token or gets 401; an address other machines reach needs it")
    func bearerToken() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let token = directory + "/token"
        try "t0k3n-for-tests\n".write(toFile: token, atomically: true, encoding: .utf8)
        chmod(token, 0o600)
        try await HammockProcess.withRunning(
            config: "sources:\n  n: { kind: fake, content: 1 }\n", arguments: ["--http", "0.0.0.0:0", "--http-token", token]
        ) { hammock in
            let base = try await Self.base(hammock)
            let none = try await Self.curl(base + "/v1/sources/n", ["-D", "-"])
            #expect(none.status == 401 && none.body.contains("WWW-Authenticate: Bearer"), "\(none)")
            for wrong in ["Bearer t0k3n-for-test", "Bearer t0k3n-for-tests-and-more", "Basic t0k3n-for-tests", "Bearer "] {
                #expect(try await Self.curl(base + "/healthz", ["-H", "Authorization: \(wrong)"]).status == 401, "\(wrong)")
            }
            let right = try await Self.curl(base + "/v1/sources/n", ["-H", "Authorization: Bearer t0k3n-for-tests"])
            #expect(right.status == 200 && right.body.contains(#""id":"n""#), "\(right)")
            // With a token, any Host is answered (the door is meant to be reached by a name).
            let named = try await Self.curl(base + "/healthz", ["-H", "Authorization: Bearer t0k3n-for-tests", "-H", "Host: hammock.lan:80"])
            #expect(named.status == 200, "\(named)")
        }
    }

    /// Broken on purpose (the Origin check removed), the other origin's control line was carried out.
    @Test("browsers: a page of another origin is refused unless --http-cors allows it; a name that is not loopback is refused")
    func originsAndHosts() async throws {
        let config = "sources:\n  n: { kind: fake, content: 1 }\n"
        try await HammockProcess.withRunning(
            config: config, arguments: ["--http", "127.0.0.1:0", "--http-cors", "http://dash.example:3000"]
        ) { hammock in
            let base = try await Self.base(hammock)
            let control = ["-H", "Content-Type: application/json", "-d", #"{"op":"override","source":"n","content":9}"#]
            let evil = try await Self.curl(base + "/v1/control", method: "POST", ["-H", "Origin: http://evil.example"] + control)
            #expect(evil.status == 403 && evil.body.contains("--http-cors"), "\(evil)")
            #expect(try await Self.curl(base + "/v1/sources/n").body.contains(#""content":1"#))
            // A plain form's POST (no preflight in a browser) is refused for its type.
            let form = try await Self.curl(base + "/v1/control", method: "POST", ["-H", "Content-Type: text/plain", "-d", "{}"])
            #expect(form.status == 415, "\(form)")
            let allowed = try await Self.curl(base + "/v1/sources/n", ["-D", "-", "-H", "Origin: http://dash.example:3000"])
            #expect(allowed.status == 200 && allowed.body.contains("Access-Control-Allow-Origin: http://dash.example:3000"), "\(allowed)")
            let preflight = try await Self.curl(
                base + "/v1/control", method: "OPTIONS",
                ["-D", "-", "-H", "Origin: http://dash.example:3000", "-H", "Access-Control-Request-Method: POST"])
            #expect(preflight.status == 204 && preflight.body.contains("Access-Control-Allow-Headers: Authorization, Content-Type"), "\(preflight)")
            // DNS rebinding: a name made to resolve to 127.0.0.1 reaches the port, and is refused by its Host.
            let rebound = try await Self.curl(base + "/v1/sources/n", ["-H", "Host: attacker.example:80"])
            #expect(rebound.status == 403 && rebound.body.contains("not this machine's loopback"), "\(rebound)")
            let spoof = try await Self.curl(base + "/v1/sources/n", ["-H", "Host: 127.0.0.1.attacker.example"])
            #expect(spoof.status == 403, "\(spoof)")
            #expect(try await Self.curl(base + "/v1/sources/n", ["-H", "Host: localhost"]).status == 200)
        }
    }

    /// A `more` is answered once its pages are in, which may take longer than the 10 s any other control line
    /// waits: here its page comes after 11 s, and the POST still gets its ack.
    @Test("POST /v1/control with more: the ack comes once the pages are in, after 10 s if they take that long")
    func moreOverHTTP() async throws {
        let server = try HammockProcess.launch(program: "/usr/bin/python3", arguments: [TestFiles.fixture("pages-server.py"), "3", "11"])
        do {
            let lines = try await server.waitForStdoutLines("the pages server prints its port", timeout: .seconds(30)) { !$0.isEmpty }
            let port = try #require(Int(lines[0]))
            let config = """
                sources:
                  items: { kind: rest, url: "http://127.0.0.1:\(port)/items", paginate: { style: link, lazy: true }, retry: off, timeout: 1m }
                """
            try await HammockProcess.withRunning(config: config, arguments: ["--http", "127.0.0.1:0"]) { hammock in
                let base = try await Self.base(hammock)
                try await hammock.nextAnswer("items")
                let start = ContinuousClock.now
                let answer = try await Self.curl(
                    base + "/v1/control", method: "POST", ["-H", "Content-Type: application/json", "-d", #"{"op":"more","source":"items"}"#],
                    seconds: 60)
                #expect(answer.status == 200, "\(answer)")
                #expect(answer.body.contains(#""type":"ack""#), "\(answer)")
                #expect(ContinuousClock.now - start >= .seconds(10), "the page came after 11 s")
                let state = try await Self.curl(base + "/v1/sources/items")
                #expect(state.body.contains(#""content":[1,2,3,4]"#), "\(state)")
            }
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }
}
