import Foundation
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
}
