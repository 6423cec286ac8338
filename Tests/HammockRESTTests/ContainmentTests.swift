import Foundation
import HammockJSON
import HammockTestSupport
import Testing

// Issue 11, the `rest` kind's part: each test replays an attack against the real `hammock` and
// `hammock-plugin-rest`, with real servers on loopback. 127.0.0.2 (or another port) is "another host": what
// the configuration sends to the source's own origin must not reach it.

@Suite("rest: containment")
struct RESTContainmentTests {
    static let token = "tok-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    static let apiKey = "key-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    static let privateToken = "pt-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    static let environment = ["C_TOKEN": token, "C_KEY": apiKey, "C_PRIVATE": privateToken]
    static let secrets = [token, apiKey, privateToken]

    /// The headers every source here is configured with: two custom secret headers, the standard one, and
    /// one that holds nothing secret (the plugin cannot tell them apart, so it holds back all of them).
    static let headers =
        #"{ Authorization: "Bearer ${C_TOKEN}", X-Api-Key: "${C_KEY}", Private-Token: "${C_PRIVATE}", X-Plain: plain }"#
    static let configuredHeaderNames = ["Authorization", "X-Api-Key", "Private-Token", "X-Plain"]

    /// What another origin received that it should not have: any configured header, or any secret in any
    /// header at all.
    static func leaks(in requests: [RecordedRequest]) -> [String] {
        requests.flatMap { request in
            let named = configuredHeaderNames.compactMap { name in request.header(name).map { "\(request.uri): \(name): \($0)" } }
            let anywhere = request.headers.filter { header in secrets.contains { header.1.contains($0) } }
                .map { "\(request.uri): \($0.0): \($0.1)" }
            return named + anywhere
        }
    }

    /// Every run of `length` characters of `secret`: none may show, or its first characters leaked.
    static func fragments(of secret: String, length: Int = 8) -> [String] {
        let characters = Array(secret)
        return (0...(characters.count - length)).map { String(characters[$0..<($0 + length)]) }
    }

    @Test("A Link rel=next to another host or port gets none of the configured headers; the own origin gets them again")
    func paginationKeepsHeadersOnTheOwnOrigin() async throws {
        try await TestHTTPServer.with { own in
            try await TestHTTPServer.with(host: "127.0.0.2") { otherHost in
                try await TestHTTPServer.with { otherPort in
                    own.route("/list", .json("[1]", headers: [("Link", #"<\#(otherHost.base)/list2>; rel="next""#)]))
                    otherHost.route("/list2", .json("[2]", headers: [("Link", #"<\#(otherPort.base)/list3>; rel="next""#)]))
                    otherPort.route("/list3", .json("[3]", headers: [("Link", #"<\#(own.base)/list4>; rel="next""#)]))
                    own.route("/list4", .json("[4]"))
                    let config = """
                        sources:
                          list:
                            kind: rest
                            url: "\(own.base)/list"
                            headers: \(Self.headers)
                            paginate: { style: link }
                            retry: off
                        """
                    try await HammockProcess.withRunning(config: config, environment: Self.environment) { hammock in
                        let list = try await hammock.nextAnswer("list")
                        #expect(list.content == [1, 2, 3, 4], "\(list)")
                        #expect(otherHost.requests(to: "/list2").count == 1)
                        #expect(otherPort.requests(to: "/list3").count == 1)
                        let leaked = Self.leaks(in: otherHost.requests() + otherPort.requests())
                        #expect(leaked.isEmpty, "another origin received: \(leaked)")
                        for path in ["/list", "/list4"] {
                            let request = own.requests(to: path).first
                            #expect(request?.header("Authorization") == "Bearer \(Self.token)", "\(path)")
                            #expect(request?.header("X-Api-Key") == Self.apiKey, "\(path)")
                        }
                    }
                }
            }
        }
    }

    @Test("A next page that is not http(s) is an error, not a request (http+unix:// would reach a local socket)")
    func paginationRefusesOtherSchemes() async throws {
        try await TestHTTPServer.with { own in
            own.route("/list", .json("[1]", headers: [("Link", #"<http+unix://%2Frun%2Fdocker.sock/containers/json>; rel="next""#)]))
            let config = """
                sources:
                  list: { kind: rest, url: "\(own.base)/list", paginate: { style: link }, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let list = try await hammock.nextAnswer("list")
                #expect(list.errorCode == "badLink", "\(list)")
            }
        }
    }

    @Test("A redirect to another host (301, 302, 303, 307, 308) carries none of the configured headers; one that stays keeps them")
    func redirectsKeepHeadersOnTheOwnOrigin() async throws {
        let codes = [301, 302, 303, 307, 308]
        try await TestHTTPServer.with { own in
            try await TestHTTPServer.with(host: "127.0.0.2") { other in
                for code in codes {
                    own.route("/r\(code)", TestResponse(status: code, headers: [("Location", "\(other.base)/landed\(code)")]))
                    other.route("/landed\(code)", .json(#"{"landed": \#(code)}"#))
                }
                own.route("/same", TestResponse(status: 307, headers: [("Location", "/here")]))
                own.route("/here", .json(#"{"here": true}"#))
                let sources = (codes.map { ("r\($0)", "/r\($0)") } + [("same", "/same")]).map { id, path in
                    """
                      \(id):
                        kind: rest
                        url: "\(own.base)\(path)"
                        headers: \(Self.headers)
                        retry: off
                    """
                }
                let config = "sources:\n" + sources.joined(separator: "\n")
                try await HammockProcess.withRunning(config: config, environment: Self.environment) { hammock in
                    for code in codes {
                        let answer = try await hammock.nextAnswer("r\(code)")
                        #expect(answer.content == ["landed": .number(JSONNumber(code))], "\(answer)")
                    }
                    let same = try await hammock.nextAnswer("same")
                    #expect(same.content == ["here": true])

                    #expect(other.requests().count == codes.count)
                    let leaked = Self.leaks(in: other.requests())
                    #expect(leaked.isEmpty, "another origin received: \(leaked)")
                    let here = own.requests(to: "/here").first
                    #expect(here?.header("X-Api-Key") == Self.apiKey, "a redirect within the origin keeps the headers")
                    #expect(here?.header("Private-Token") == Self.privateToken)
                    #expect(here?.header("X-Plain") == "plain")
                }
            }
        }
    }

    @Test("A Retry-After too large for any clock leaves the plugin and the engine running, and the source shows the 503 or 429")
    func hugeRetryAfter() async throws {
        // 9223372036854775 s overflowed the engine's deadline; 9223372036854775807 overflowed the plugin's
        // milliseconds; a number past Int64 was read as no advice at all.
        let cases = [
            ("near", 503, "9223372036854775"), ("max", 429, "9223372036854775807"), ("past", 503, "99999999999999999999"),
        ]
        try await TestHTTPServer.with { server in
            for (id, status, value) in cases {
                server.route("/\(id)", .json(#"{"message": "busy"}"#, status: status, headers: [("Retry-After", value)]))
            }
            server.route("/ok", .json(#"{"ok": true}"#))
            let config =
                "sources:\n"
                + (cases.map { id, _, _ in "  \(id): { kind: rest, url: \"\(server.base)/\(id)\", retry: 100ms }" }
                    + ["  ok: { kind: rest, url: \"\(server.base)/ok\", retry: off }"]).joined(separator: "\n")
            try await HammockProcess.withRunning(config: config) { hammock in
                for (id, status, _) in cases {
                    let answer = try await hammock.nextAnswer(id)
                    #expect(answer.latestError?["httpStatus"] == .number(JSONNumber(status)), "\(id): \(answer)")
                }
                #expect(try await hammock.nextAnswer("ok").content == ["ok": true])

                // Retry-After is a floor under the backoff (at most a day): with retry: 100ms a source whose
                // advice were dropped would be asked again several times within this second.
                try await Task.sleep(for: .seconds(1))
                for (id, _, _) in cases {
                    #expect(server.requests(to: "/\(id)").count == 1, "\(id) was retried before its Retry-After")
                }
                // The same plugin and engine still answer.
                try hammock.send(controlLine: #"{"op":"load","source":"ok"}"#)
                #expect(try await hammock.nextAnswer("ok").content == ["ok": true])
                let failures = hammock.lines.filter { ["pluginFailed", "pluginGaveUp"].contains($0.errorCode ?? "") }
                #expect(failures.isEmpty, "\(failures)")
            }
        }
    }

    @Test("A long error message never leaves the beginning of a secret behind, where redaction cannot find it")
    func longMessagesAreNotCutInsideASecret() async throws {
        try await TestHTTPServer.with { server in
            // The server quotes the token it was sent (as some do in "invalid token …" messages) where a
            // cut for length would split it: at 300 characters (the plugin's old cut) and at 4 KiB, after
            // words (the plugin's bound now). 266 characters before the token: it straddles the old cut,
            // and "[redacted]" still ends within the first 300 characters of the whole message
            // ("HTTP 401 Unauthorized: " is 23), where the engine may shorten it for display.
            server.route("/short") { request in
                let sent = request.header("Authorization") ?? ""
                let message = String(repeating: "x", count: 266) + sent + " was refused"
                return .json(JSONValue.object(["message": .string(message)]).jsonString, status: 401)
            }
            server.route("/long") { request in
                let sent = request.header("Authorization") ?? ""
                let words = String(repeating: "word ", count: 4080 / 5)
                return .json(JSONValue.object(["message": .string(words + sent + " was refused")]).jsonString, status: 401)
            }
            let config = """
                sources:
                  short: { kind: rest, url: "\(server.base)/short", headers: { Authorization: "${C_TOKEN}" }, retry: off }
                  long: { kind: rest, url: "\(server.base)/long", headers: { Authorization: "${C_TOKEN}" }, retry: off }
                """
            try await HammockProcess.withRunning(config: config, environment: Self.environment) { hammock in
                let short = try await hammock.nextAnswer("short")
                #expect(short.latestError?["httpStatus"] == 401)
                #expect(short.errorMessage.contains("[redacted]") == true, "\(short)")
                let long = try await hammock.nextAnswer("long")
                #expect(long.latestError?["httpStatus"] == 401)
                #expect(long.errorMessage.hasPrefix("HTTP 401 Unauthorized: word word") == true, "\(long)")

                let output = hammock.stdoutText + "\n" + hammock.stderrText
                let shown = Self.fragments(of: Self.token).filter { output.contains($0) }
                #expect(shown.isEmpty, "parts of the token on stdout or stderr: \(shown)")
            }
        }
    }

    @Test("A key passed through query: is redacted percent-encoded in the \"more than 10 redirects\" error")
    func tooManyRedirectsQuotesNoKey() async throws {
        // Characters that percent-encoding changes, so only the encoded form is in the URL.
        let key = "k/y+z é&=\(UUID().uuidString.prefix(8))"
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        let encoded = key.addingPercentEncoding(withAllowedCharacters: unreserved)!
        try await TestHTTPServer.with { server in
            server.route("/loop") { request in TestResponse(status: 302, headers: [("Location", request.uri)]) }
            let config = """
                sources:
                  loop: { kind: rest, url: "\(server.base)/loop", query: { key: "${C_QUERY_KEY}" }, retry: off }
                """
            try await HammockProcess.withRunning(config: config, environment: ["C_QUERY_KEY": key]) { hammock in
                let loop = try await hammock.nextAnswer("loop")
                #expect(loop.errorCode == "tooManyRedirects", "\(loop)")
                #expect(loop.errorMessage.contains("\(server.base)/loop?key=[redacted]") == true, "\(loop)")
                #expect(server.requests(to: "/loop").first?.queryParameter("key") == encoded)
                let output = hammock.stdoutText + "\n" + hammock.stderrText
                #expect(!output.contains(key))
                #expect(!output.contains(encoded))
            }
        }
    }

    @Test("A template value of .. or . cannot climb the url's path")
    func templateDotSegments() async throws {
        try await TestHTTPServer.with { server in
            server.route("/api/v1/%2E%2E/echo", .json(#"{"stayed": "dotdot"}"#))
            server.route("/api/v1/%2E/echo", .json(#"{"stayed": "dot"}"#))
            server.route("/api/echo", .json(#"{"climbed": true}"#))
            server.route("/api/v1/echo", .json(#"{"climbed": true}"#))
            let config = """
                sources:
                  up: { kind: fake, content: ".." }
                  here: { kind: fake, content: "." }
                  dotdot: { kind: rest, url: "\(server.base)/api/v1/{{ up }}/echo", retry: off }
                  dot: { kind: rest, url: "\(server.base)/api/v1/{{ here }}/echo", retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let dotdot = try await hammock.nextAnswer("dotdot")
                #expect(dotdot.content == ["stayed": "dotdot"], "\(dotdot)")
                let dot = try await hammock.nextAnswer("dot")
                #expect(dot.content == ["stayed": "dot"], "\(dot)")
                #expect(server.requests(to: "/api/echo").isEmpty)
                #expect(server.requests(to: "/api/v1/echo").isEmpty)
                #expect(server.requests().map(\.uri).sorted() == ["/api/v1/%2E%2E/echo", "/api/v1/%2E/echo"])
            }
        }
    }

    @Test("A template that opens the url ({{ x.url }}/extra) passes check and loads from the value's host and path")
    func templateOpensTheURL() async throws {
        try await TestHTTPServer.with { server in
            server.route("/repos/siesta/contributors", .json(#"[{"login": "pcantrell"}]"#))
            let config = """
                sources:
                  repo: { kind: fake, content: { contributors_url: "\(server.base)/repos/siesta" } }
                  contributors: { kind: rest, url: "{{ repo.contributors_url }}/contributors", retry: off }
                  other: { kind: fake, content: { url: "ftp://example.com/files" } }
                  refused: { kind: rest, url: "{{ other.url }}/list", retry: off }
                """
            let check = try await HammockProcess.check(config: config)
            #expect(check.termination == .exited(0), "\(check.stdout)\(check.stderr)")
            try await HammockProcess.withRunning(config: config) { hammock in
                let contributors = try await hammock.nextAnswer("contributors")
                #expect(contributors.content == [["login": "pcantrell"]], "\(contributors)")
                // The value's scheme and host are checked once it is filled in.
                let refused = try await hammock.nextAnswer("refused")
                #expect(refused.errorCode == "invalidOptions", "\(refused)")
                #expect(refused.errorMessage.contains("url must start with http:// or https://") == true, "\(refused)")
            }
        }
    }
}
