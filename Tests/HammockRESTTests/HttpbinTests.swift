import Foundation
import HammockCore
import HammockJSON
import HammockTestSupport
import Testing

/// Issue 16: what users of other HTTP collectors expect, tried against httpbin (Debian's python3-httpbin), the
/// service those collectors are tried against, run on loopback by Tests/Fixtures/httpbin-server.py.
@Suite("rest: auth and JSON Lines against httpbin")
struct HttpbinTests {
    static let password = "pw-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    static let token = "tok-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    static let environment = ["H_PASSWORD": password, "H_TOKEN": token]

    /// Runs `body` with httpbin's base URL; the server ends with the test.
    static func withHttpbin<R: Sendable>(_ body: (String) async throws -> R) async throws -> R {
        let server = try HammockProcess.launch(program: "/usr/bin/python3", arguments: [TestFiles.fixture("httpbin-server.py")])
        do {
            let lines = try await server.waitForStdoutLines("httpbin prints its port (needs Debian's python3-httpbin)", timeout: .seconds(30)) {
                !$0.isEmpty
            }
            let port = try #require(Int(lines[0]), "httpbin-server.py printed \(lines[0]) instead of a port; stderr: \(server.stderrText)")
            let result = try await body("http://127.0.0.1:\(port)")
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    @Test("auth: basic logs in; a wrong password is httpbin's 401; neither the password nor its base64 form is ever shown")
    func basicAuth() async throws {
        try await Self.withHttpbin { base in
            let config = """
                sources:
                  right:
                    kind: rest
                    url: "\(base)/basic-auth/alice/\(Self.password)"
                    auth: { basic: { username: alice, password: "${H_PASSWORD}" } }
                    retry: off
                  wrong:
                    kind: rest
                    url: "\(base)/basic-auth/alice/other"
                    auth: { basic: { username: alice, password: "${H_PASSWORD}" } }
                    retry: off
                  echoed:
                    kind: rest
                    url: "\(base)/headers"
                    auth: { basic: { username: alice, password: "${H_PASSWORD}" } }
                    retry: off
                """
            try await HammockProcess.withRunning(config: config, environment: Self.environment) { hammock in
                let right = try await hammock.nextAnswer("right")
                #expect(right.content?["authenticated"] == true, "\(right)")
                #expect(right.content?["user"] == "alice", "\(right)")
                let wrong = try await hammock.nextAnswer("wrong")
                #expect(wrong.event == "error", "\(wrong)")
                #expect(wrong[pointer: "/state/latestError/httpStatus"]?.numberValue?.intValue == 401, "\(wrong)")
                let echoed = try await hammock.nextAnswer("echoed")
                // httpbin sends the request's headers back: the credential in it is redacted like the password.
                #expect(echoed.content?["headers"]?["Authorization"] == "Basic [redacted]", "\(echoed)")
                let encoded = Data("alice:\(Self.password)".utf8).base64EncodedString()
                for secret in [Self.password, encoded] {
                    #expect(!hammock.stdoutText.contains(secret), "stdout shows a secret")
                    #expect(!hammock.stderrText.contains(secret), "stderr shows a secret")
                }
            }
        }
    }

    @Test("auth: bearer sends the token, which the answer echoes redacted; an empty token sends none")
    func bearerAuth() async throws {
        try await Self.withHttpbin { base in
            let config = """
                sources:
                  bearer:
                    kind: rest
                    url: "\(base)/bearer"
                    auth: { bearer: "${H_TOKEN}" }
                    retry: off
                  unset:
                    kind: rest
                    url: "\(base)/bearer"
                    auth: { bearer: "${H_UNSET:-}" }
                    retry: off
                """
            try await HammockProcess.withRunning(config: config, environment: Self.environment) { hammock in
                let bearer = try await hammock.nextAnswer("bearer")
                #expect(bearer.content?["authenticated"] == true, "\(bearer)")
                #expect(bearer.content?["token"] == "[redacted]", "\(bearer)")
                let unset = try await hammock.nextAnswer("unset")
                #expect(unset[pointer: "/state/latestError/httpStatus"]?.numberValue?.intValue == 401, "\(unset)")
                #expect(!hammock.stdoutText.contains(Self.token))
            }
        }
    }

    @Test("parse: jsonl turns httpbin's /stream/N (one JSON object per line) into an array of N")
    func jsonLines() async throws {
        try await Self.withHttpbin { base in
            let config = """
                sources:
                  stream:
                    kind: rest
                    url: "\(base)/stream/4"
                    parse: jsonl
                    retry: off
                  asJSON:
                    kind: rest
                    url: "\(base)/stream/2"
                    retry: off
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let stream = try await hammock.nextAnswer("stream")
                let items = try #require(stream.content?.arrayValue, "\(stream)")
                #expect(items.map { $0["id"]?.numberValue?.intValue } == [0, 1, 2, 3], "\(stream)")
                // Without parse: jsonl, the Content-Type (application/json) says JSON, which the body is not.
                let asJSON = try await hammock.nextAnswer("asJSON")
                #expect(asJSON.errorCode == "parseFailed", "\(asJSON)")
                #expect(asJSON.errorMessage.hasSuffix("is not one JSON value but 2 lines of JSON; set parse: jsonl"), "\(asJSON)")
            }
        }
    }

    /// Issue 29 against a server nobody here wrote: httpbin's /cache/N (max-age), /response-headers (any
    /// header, exposed in meta), /etag/E (If-None-Match answered 304) and /status/429.
    @Test("httpbin: max-age holds polls back, meta carries the status, ETag and exposed headers, a 304 updates it, a 429 is the source's error")
    func goodCitizen() async throws {
        try await Self.withHttpbin { base in
            let config = """
                sources:
                  cached: { kind: rest, url: "\(base)/cache/2", refresh: 300ms }
                  headers:
                    kind: rest
                    url: "\(base)/response-headers?X-Quota=41&X-Other=no"
                    expose-headers: [X-Quota]
                    retry: off
                  tagged: { kind: rest, url: "\(base)/etag/v7", retry: off }
                  limited: { kind: rest, url: "\(base)/status/429", retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let headers = try await hammock.nextAnswer("headers")
                #expect(headers[pointer: "/state/meta/headers"] == ["x-quota": "41"], "\(headers)")
                #expect(headers[pointer: "/state/meta/httpStatus"] == 200)
                #expect(headers[pointer: "/state/meta/contentType"] == "application/json", "\(headers)")

                let tagged = try await hammock.nextAnswer("tagged")
                let etag = try #require(tagged[pointer: "/state/meta/etag"]?.stringValue, "\(tagged)")
                #expect(etag.contains("v7"))
                try hammock.send(controlLine: #"{"op":"load","source":"tagged"}"#)
                let again = try await hammock.nextAnswer("tagged")
                #expect(again.event == "notModified", "httpbin's /etag answers 304 to its own ETag: \(again)")
                #expect(again[pointer: "/state/meta/httpStatus"] == 304)
                #expect(again[pointer: "/state/meta/contentType"] == tagged[pointer: "/state/meta/contentType"], "a 304 keeps what it does not say")

                let limited = try await hammock.nextAnswer("limited")
                #expect(limited.event == "error")
                #expect(limited[pointer: "/state/latestError/httpStatus"] == 429)

                // max-age=2 under refresh: 300ms: the engine's own timestamps of the loads are 2 s apart at
                // least (the time the lines were read would not do: a loaded machine reads late).
                let first = try await hammock.waitFor(type: "source", id: "cached") { $0.event == "newData" }
                let second = try await hammock.waitFor(type: "source", id: "cached", timeout: .seconds(20)) { $0.event == "newData" }
                let stamps = try [first, second].map { try #require($0.state?["timestamp"]?.stringValue.flatMap(Timestamp.init(rfc3339:))) }
                #expect(stamps[1].millisecondsSince1970 - stamps[0].millisecondsSince1970 >= 1900, "\(stamps)")
            }
        }
    }
}
