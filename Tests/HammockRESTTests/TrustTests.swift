import Foundation
import HammockJSON
import HammockTestSupport
import Testing

// Issue 10 against a real server on 127.0.0.1: stdout lines that stay JSON whatever the secrets, one
// resource's data never shown under another's URL, and retries only where a retry can help.

@Suite("rest: trust")
struct RESTTrustTests {
    /// Every string in every line, so a test can say "no secret anywhere" without trusting one field.
    static func strings(in value: JSONValue) -> [String] {
        switch value {
        case .string(let text): [text]
        case .array(let items): items.flatMap(strings)
        case .object(let object): object.flatMap { [$0.key] + strings(in: $0.value) }
        default: []
        }
    }

    @Test("Secrets are redacted inside string values only: numbers stay, every line stays JSON, a URL's base stays visible, defaults and a reload's secrets are redacted")
    func redactionByValue() async throws {
        try await TestHTTPServer.with { server in
            server.route("/repo/1", .json(#"{"self": "\#(server.base)/repo/1", "echo": "token 123456 here"}"#))
            let config = """
                sources:
                  api:
                    kind: rest
                    url: "${BASE}/repo/1"
                    headers: { Authorization: "Bearer ${T_TOKEN}", X-Default: "${UNSET_VAR:-default-secret-7}" }
                    retry: off
                  f:
                    kind: fake
                    content: { id: 1234567, views: 9123456, self: "${BASE}/repo/1", note: "has default-secret-7 inside" }
                """
            let environment = ["T_TOKEN": "123456", "BASE": server.base, "LATER": "fresh-secret-42"]
            try await HammockProcess.withRunning(config: config, environment: environment) { hammock in
                let fake = try await hammock.nextAnswer("f")
                #expect(fake.content == [
                    "id": 1234567, "views": 9123456, "self": .string(server.base + "/repo/1"), "note": "has [redacted] inside",
                ])
                let api = try await hammock.nextAnswer("api")
                #expect(api.content == ["self": .string(server.base + "/repo/1"), "echo": "token [redacted] here"])
                #expect(server.requests(to: "/repo/1").first?.header("Authorization") == "Bearer 123456")
                #expect(server.requests(to: "/repo/1").first?.header("X-Default") == "default-secret-7")

                // A reload brings a new secret (a command's env): from then on it is redacted too.
                let reloaded = config + """

                      later:
                        kind: shell
                        command: [echo, "fresh-secret-42 printed"]
                        env: { KEY: "${LATER}" }
                    """
                try Data(reloaded.utf8).write(to: URL(fileURLWithPath: hammock.directory + "/config.yaml"))
                try hammock.send(controlLine: #"{"op":"reload"}"#)
                let later = try await hammock.nextAnswer("later")
                #expect(later.content == "[redacted] printed")

                let lines = hammock.lines
                #expect(lines.allSatisfy { $0.json.objectValue != nil }, "every stdout line is a JSON object")
                let everything = lines.flatMap { Self.strings(in: $0.json) }
                for secret in ["123456", "default-secret-7", "fresh-secret-42"] {
                    #expect(!everything.contains { $0.contains(secret) }, "\(secret) on stdout")
                    #expect(!hammock.stderrText.contains(secret), "\(secret) on stderr")
                }
            }
        }
    }

    @Test("A templated URL that changes is another resource: the old content and ETag go before the new load")
    func anotherURLAnotherResource() async throws {
        try await TestHTTPServer.with { server in
            // One ETag for the whole dataset, as some servers do: a stale If-None-Match would get a 304.
            for user in ["alice", "bob"] {
                server.route("/users/\(user)") { request in
                    request.header("If-None-Match") == #""dataset-v1""#
                        ? TestResponse(status: 304, headers: [("ETag", #""dataset-v1""#)])
                        : .json(#"{"name": "\#(user)"}"#, headers: [("ETag", #""dataset-v1""#)])
                }
            }
            let config = """
                sources:
                  who: { kind: fake, content: alice }
                  user: { kind: rest, url: "\(server.base)/users/{{ who }}", retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                #expect(try await hammock.nextAnswer("user").content == ["name": "alice"])

                let switchedAt = hammock.lines.count
                try hammock.send(controlLine: #"{"op":"override","source":"who","content":"bob"}"#)
                // The wipe reaches a reader that keeps up, though the new request follows it in the same turn
                // (a consumer keys on it to drop what it shows): its own line, content gone, before bob's.
                let wipe = try await hammock.next("user") { $0.event == "newData" }
                #expect(wipe.origin == "wipe" && wipe.content == .null, "\(wipe)")
                let bob = try await hammock.next("user") { $0.event == "newData" }
                #expect(bob.origin == "load")
                #expect(bob.content == ["name": "bob"], "bob's own answer, not a 304 that kept alice")
                #expect(server.requests(to: "/users/bob").first?.header("If-None-Match") == nil)

                // A user that 404s: the wipe again, then the error stands alone, no bob beside it.
                try hammock.send(controlLine: #"{"op":"override","source":"who","content":"nobody"}"#)
                let secondWipe = try await hammock.next("user") { $0.event != "requested" }
                #expect(secondWipe.origin == "wipe" && secondWipe.content == .null, "\(secondWipe)")
                let missing = try await hammock.next("user") { $0.event == "error" }
                #expect(missing.latestError?["httpStatus"] == 404)
                #expect(missing.content == .null)
                let afterSwitch = hammock.lines[switchedAt...].filter { $0.id == "user" }
                #expect(!afterSwitch.contains { $0.content == ["name": "alice"] })
            }
        }
    }

    @Test("A 404 is not retried by itself; a 503 is; an explicit load always loads")
    func retryOnlyWhereItHelps() async throws {
        try await TestHTTPServer.with { server in
            server.route("/flaky", .json(#"{"message": "busy"}"#, status: 503))
            let config = """
                sources:
                  missing: { kind: rest, url: "\(server.base)/missing", retry: 100ms }
                  flaky: { kind: rest, url: "\(server.base)/flaky", retry: 100ms }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.nextAnswer("missing")
                #expect(first.latestError?["httpStatus"] == 404)
                // The 503 is retried with backoff (100, 200, 400 ms ...): three attempts arrive quickly.
                for _ in 0..<3 { try await hammock.next("flaky") { $0.event == "error" } }
                #expect(server.requests(to: "/missing").count == 1, "a 404 waits for a control line or a refresh")
                try hammock.send(controlLine: #"{"op":"load","source":"missing"}"#)
                try await hammock.nextAnswer("missing")
                #expect(server.requests(to: "/missing").count == 2)
            }
        }
    }
}
