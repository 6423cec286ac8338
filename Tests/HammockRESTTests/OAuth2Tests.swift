import Foundation
import HammockJSON
import HammockTestSupport
import Synchronization
import Testing

// `auth: { oauth2 }` end to end: the real `hammock` and `hammock-plugin-rest` against an OAuth2 token
// endpoint and an API that this test serves on 127.0.0.1.

/// A token endpoint for the client `cid` (its secret checked in HTTP Basic, or in the body), handing out
/// numbered tokens `tok-N-<run>`, and an API (`/api`) that takes the tokens it chooses.
final class TokenEndpoint: Sendable {
    let run = String(UUID().uuidString.prefix(8)).lowercased()
    let secret: String
    /// What `/token` answers besides a fresh token: `expires_in` (nil: none), a refresh token.
    private let state = Mutex<(issued: [String], expiresIn: Int?, rotate: Bool)>(([], 3600, false))

    init(secret: String) { self.secret = secret }

    var issued: [String] { state.withLock { $0.issued } }
    func token(_ number: Int) -> String { "tok-\(number)-\(run)" }
    func refreshToken(_ number: Int) -> String { "rt-\(number)-\(run)" }

    func set(expiresIn: Int?, rotate: Bool = false) {
        state.withLock {
            $0.expiresIn = expiresIn
            $0.rotate = rotate
        }
    }

    /// The answer to a token request: 401 `invalid_client` unless the secret is right.
    func answer(_ request: RecordedRequest) -> TestResponse {
        let basic = "Basic " + Data("cid:\(formEncoded(secret))".utf8).base64EncodedString()
        let form = formFields(request.body)
        let authenticated = request.header("Authorization") == basic || (form["client_id"] == "cid" && form["client_secret"] == secret)
        guard request.method == "POST", authenticated else {
            return .json(#"{"error": "invalid_client", "error_description": "Client authentication failed"}"#, status: 401)
        }
        return state.withLock { state in
            if form["grant_type"] == "refresh_token" {
                // Rotation: only the newest refresh token is good.
                let expected = refreshToken(state.issued.count)
                guard form["refresh_token"] == expected else {
                    return .json(#"{"error": "invalid_grant", "error_description": "refresh token is stale"}"#, status: 400)
                }
            }
            state.issued.append(token(state.issued.count + 1))
            var object: JSONObject = ["access_token": .string(state.issued.last!), "token_type": "bearer"]
            if let expiresIn = state.expiresIn { object["expires_in"] = .number(JSONNumber(expiresIn)) }
            if state.rotate { object["refresh_token"] = .string(refreshToken(state.issued.count)) }
            return .json(JSONValue.object(object).jsonString)
        }
    }
}

func formFields(_ body: [UInt8]) -> [String: String] {
    var fields: [String: String] = [:]
    for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
        let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
        fields[parts[0]] = parts.count > 1 ? parts[1] : ""
    }
    return fields
}

func formEncoded(_ text: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._*")
    return text.addingPercentEncoding(withAllowedCharacters: allowed)?.replacingOccurrences(of: "%20", with: "+") ?? text
}

@Suite("rest kind: OAuth2")
struct OAuth2Tests {
    static let secret = "cl!ent secret/\(UUID().uuidString.prefix(6))"

    static func config(_ server: TestHTTPServer, sources: [String: String], extra: String = "") -> String {
        var yaml = "version: 1\nsources:\n"
        for (id, oauth2) in sources.sorted(by: { $0.key < $1.key }) {
            yaml += """
                  \(id):
                    kind: rest
                    url: "\(server.base)/api"
                    retry: off
                    \(extra)
                    auth:
                      oauth2: { token-url: "\(server.base)/token", client-id: cid, client-secret: "${secret:CLIENT_SECRET}"\(oauth2) }

                """
        }
        return yaml
    }

    /// The API: 200 with a count for a token in `accepted`, else 401.
    static func api(_ server: TestHTTPServer, accepting accepted: @escaping @Sendable (String) -> Bool) {
        let count = Atomic<Int>(0)
        server.route("/api") { request in
            let sent = request.header("Authorization") ?? ""
            guard sent.hasPrefix("Bearer "), accepted(String(sent.dropFirst(7))) else {
                return .json(#"{"error": "invalid_token"}"#, status: 401)
            }
            return .json(#"{"n": \#(count.wrappingAdd(1, ordering: .relaxed).newValue)}"#)
        }
    }

    @Test("client_credentials: one token request (POST, form, HTTP Basic), the API sees Bearer TOKEN; the token is reused")
    func clientCredentials() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        try await TestHTTPServer.with { server in
            server.route("/token", handler: endpoint.answer)
            Self.api(server) { $0 == endpoint.token(1) }
            let config = Self.config(server, sources: ["api": #", scope: "read write", params: { audience: "https://api.example.com" }"#])
            try await HammockProcess.withRunning(config: config, environment: ["CLIENT_SECRET": Self.secret]) { hammock in
                let first = try await hammock.nextAnswer("api")
                #expect(first.content == ["n": 1], "\(first)")
                for n in 2...3 {
                    try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                    #expect(try await hammock.nextAnswer("api").content == ["n": .number(JSONNumber(n))])
                }
                let tokenRequests = server.requests(to: "/token")
                #expect(tokenRequests.count == 1, "the token is reused until it expires")
                let request = try #require(tokenRequests.first)
                #expect(request.method == "POST")
                #expect(request.header("Content-Type") == "application/x-www-form-urlencoded")
                #expect(request.header("Authorization") == "Basic " + Data("cid:\(formEncoded(Self.secret))".utf8).base64EncodedString())
                #expect(formFields(request.body) == ["grant_type": "client_credentials", "scope": "read write", "audience": "https://api.example.com"])
                #expect(server.requests(to: "/api").allSatisfy { $0.header("Authorization") == "Bearer \(endpoint.token(1))" })
                #expect(!hammock.stdoutText.contains(endpoint.token(1)))
                #expect(!hammock.stderrText.contains(endpoint.token(1)))
            }
        }
    }

    @Test("client-auth: body sends client_id and client_secret in the form, no Authorization")
    func clientCredentialsInTheBody() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        try await TestHTTPServer.with { server in
            server.route("/token", handler: endpoint.answer)
            Self.api(server) { $0 == endpoint.token(1) }
            let config = Self.config(server, sources: ["api": ", client-auth: body"])
            try await HammockProcess.withRunning(config: config, environment: ["CLIENT_SECRET": Self.secret]) { hammock in
                #expect(try await hammock.nextAnswer("api").content == ["n": 1])
                let request = try #require(server.requests(to: "/token").first)
                #expect(request.header("Authorization") == nil)
                #expect(formFields(request.body) == ["grant_type": "client_credentials", "client_id": "cid", "client_secret": Self.secret])
            }
        }
    }

    @Test("a token is renewed ahead of its expiry: a quarter of its life before (at most a minute)")
    func renewalAheadOfExpiry() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        endpoint.set(expiresIn: 8)
        try await TestHTTPServer.with { server in
            server.route("/token", handler: endpoint.answer)
            Self.api(server) { _ in true }
            let config = Self.config(server, sources: ["api": ""])
            try await HammockProcess.withRunning(config: config, environment: ["CLIENT_SECRET": Self.secret]) { hammock in
                _ = try await hammock.nextAnswer("api")
                let issuedAt = try #require(server.requests(to: "/token").first).receivedAt
                try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                _ = try await hammock.nextAnswer("api")
                #expect(server.requests(to: "/token").count == 1, "reused while fresh")
                // 6.3 s of 8 are past: within the last quarter, renewed though the server still takes it (1.7 s
                // left for the load to reach the plugin on a loaded machine).
                try await Task.sleep(until: issuedAt + .milliseconds(6300))
                try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                _ = try await hammock.nextAnswer("api")
                let requests = server.requests(to: "/token")
                #expect(requests.count == 2, "renewed")
                if requests.count == 2 { #expect(requests[1].receivedAt - issuedAt < .seconds(8), "before it expired") }
                #expect(server.requests(to: "/api").last?.header("Authorization") == "Bearer \(endpoint.token(2))")
            }
        }
    }

    @Test("a renewal ahead of expiry that fails keeps the current token until it expires")
    func failedRenewalKeepsTheCurrentToken() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        endpoint.set(expiresIn: 8)
        try await TestHTTPServer.with { server in
            server.route("/token", handler: endpoint.answer)
            Self.api(server) { $0 == endpoint.token(1) }
            let config = Self.config(server, sources: ["api": ""])
            try await HammockProcess.withRunning(config: config, environment: ["CLIENT_SECRET": Self.secret]) { hammock in
                #expect(try await hammock.nextAnswer("api").content == ["n": 1])
                let issuedAt = try #require(server.requests(to: "/token").first).receivedAt
                server.route("/token", .json(#"{"error": "temporarily_unavailable"}"#, status: 503))
                try await Task.sleep(until: issuedAt + .milliseconds(6300))
                try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                let answer = try await hammock.nextAnswer("api")
                #expect(answer.content == ["n": 2], "\(answer)")
                #expect(server.requests(to: "/token").count == 2, "a renewal was tried")
                try await Task.sleep(for: .milliseconds(200))
                #expect(hammock.stderrText.contains("renewing the OAuth2 token failed"), "\(hammock.stderrText)")
                // Once it has expired, a failed renewal is the source's error.
                try await Task.sleep(until: issuedAt + .milliseconds(8300))
                try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                let expired = try await hammock.nextAnswer("api")
                #expect(expired.errorCode == "oauth2", "\(expired)")
                #expect(server.requests(to: "/api").count == 2)
            }
        }
    }

    @Test("a 401 from the API gets one new token and one replay; a 401 to the new token too is the source's error, not a loop")
    func unauthorizedReplaysOnce() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        try await TestHTTPServer.with { server in
            server.route("/token", handler: endpoint.answer)
            // The first token is refused (revoked); the second is good.
            Self.api(server) { $0 == endpoint.token(2) }
            let config = Self.config(server, sources: ["api": ""])
            try await HammockProcess.withRunning(config: config, environment: ["CLIENT_SECRET": Self.secret]) { hammock in
                let first = try await hammock.nextAnswer("api")
                #expect(first.content == ["n": 1], "\(first)")
                #expect(server.requests(to: "/token").count == 2)
                #expect(server.requests(to: "/api").map { $0.header("Authorization") } == ["Bearer \(endpoint.token(1))", "Bearer \(endpoint.token(2))"])

                // Now nothing is good.
                Self.api(server) { _ in false }
                try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                let refused = try await hammock.nextAnswer("api")
                #expect(refused.event == "error")
                #expect(refused.latestError?["httpStatus"] == 401)
                #expect(refused.errorMessage.contains("a new OAuth2 token was refused too"), "\(refused.errorMessage)")
                #expect(server.requests(to: "/token").count == 3, "one new token")
                #expect(server.requests(to: "/api").count == 4, "one replay")
            }
        }
    }

    @Test("grant: refresh_token sends the refresh token, and the rotated one next time; neither shows")
    func refreshTokenRotation() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        endpoint.set(expiresIn: 1, rotate: true)
        try await TestHTTPServer.with { server in
            server.route("/token", handler: endpoint.answer)
            // The API quotes the token: it must come out redacted.
            server.route("/api") { request in
                .json(JSONValue.object(["sent": .string(request.header("Authorization") ?? "")]).jsonString)
            }
            let config = """
                version: 1
                sources:
                  api:
                    kind: rest
                    url: "\(server.base)/api"
                    retry: off
                    auth:
                      oauth2:
                        token-url: "\(server.base)/token"
                        client-id: cid
                        client-secret: "${file:client-secret}"
                        grant: refresh_token
                        refresh-token: "${secret:REFRESH_TOKEN}"
                """
            let folder = try HammockProcess.makeTemporaryDirectory()
            defer { HammockProcess.removeTemporaryDirectory(folder) }
            try Data((Self.secret + "\n").utf8).write(to: URL(fileURLWithPath: folder + "/client-secret"))
            let configPath = try HammockProcess.writeConfig(config, in: folder)
            try await HammockProcess.withRunning(configPath: configPath, environment: ["REFRESH_TOKEN": endpoint.refreshToken(0)]) { hammock in
                let first = try await hammock.nextAnswer("api")
                #expect(first.content == ["sent": "Bearer [redacted]"], "\(first)")
                try await Task.sleep(for: .milliseconds(1100))
                try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                let second = try await hammock.nextAnswer("api")
                #expect(second.event == "newData" || second.event == "notModified", "\(second)")
                let requests = server.requests(to: "/token")
                #expect(requests.map { formFields($0.body)["refresh_token"] } == [endpoint.refreshToken(0), endpoint.refreshToken(1)])
                #expect(requests.allSatisfy { formFields($0.body)["grant_type"] == "refresh_token" })
                try await Task.sleep(for: .milliseconds(200))
                for secret in [endpoint.token(1), endpoint.token(2), endpoint.refreshToken(1), endpoint.refreshToken(0)] {
                    #expect(!hammock.stdoutText.contains(secret), "\(secret)")
                    #expect(!hammock.stderrText.contains(secret), "\(secret)")
                }
            }
        }
    }

    @Test("a token endpoint that answers HTML, 500, invalid_client, or no access_token is the source's error, saying so")
    func tokenEndpointFailures() async throws {
        try await TestHTTPServer.with { server in
            server.route("/html", TestResponse(status: 200, headers: [("Content-Type", "text/html")], body: Array("<html><body>Log in</body></html>".utf8)))
            server.route("/500", .json(#"{"error": "temporarily_unavailable"}"#, status: 500))
            server.route("/invalid", .json(#"{"error": "invalid_client", "error_description": "Client authentication failed"}"#, status: 401))
            server.route("/empty", .json(#"{"token_type": "bearer", "expires_in": 3600}"#))
            server.route("/api", .json(#"{"ok": true}"#))
            var yaml = "version: 1\nsources:\n"
            // Nothing listens on port 1 of 127.0.0.1.
            for (path, base) in [("html", server.base), ("500", server.base), ("invalid", server.base), ("empty", server.base), ("refused", "http://127.0.0.1:1")] {
                yaml += """
                      s\(path):
                        kind: rest
                        url: "\(server.base)/api"
                        retry: off
                        auth: { oauth2: { token-url: "\(base)/\(path)", client-id: cid, client-secret: "${secret:CLIENT_SECRET}" } }

                    """
            }
            try await HammockProcess.withRunning(config: yaml, environment: ["CLIENT_SECRET": Self.secret]) { hammock in
                let expected = [
                    ("shtml", "answered HTML, not a token"),
                    ("s500", "HTTP 500 Internal Server Error: temporarily_unavailable"),
                    ("sinvalid", "HTTP 401 Unauthorized: invalid_client (Client authentication failed)"),
                    ("sempty", "answered without an access_token"),
                ]
                for (source, words) in expected {
                    let answer = try await hammock.next(source) { $0.event == "error" }
                    #expect(answer.errorCode == "oauth2", "\(source): \(answer)")
                    #expect(answer.errorMessage.hasPrefix("OAuth2 token endpoint 127.0.0.1:\(server.port): "), "\(source): \(answer.errorMessage)")
                    #expect(answer.errorMessage.contains(words), "\(source): \(answer.errorMessage)")
                }
                let refused = try await hammock.next("srefused") { $0.event == "error" }
                #expect(refused.errorCode == "oauth2", "\(refused)")
                #expect(refused.errorMessage.hasPrefix("OAuth2 token endpoint 127.0.0.1:1: connection refused by 127.0.0.1:1"), "\(refused.errorMessage)")
                #expect(server.requests(to: "/api").isEmpty, "no API request without a token")
                // Not stuck: another load asks again, and fails the same way.
                try hammock.send(controlLine: #"{"op":"load","source":"s500"}"#)
                _ = try await hammock.next("s500") { $0.event == "error" }
                #expect(server.requests(to: "/500").count == 2)
            }
        }
    }

    @Test("a token without expires_in is used until the API answers 401, then renewed")
    func tokenWithoutExpiry() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        endpoint.set(expiresIn: nil)
        try await TestHTTPServer.with { server in
            server.route("/token", handler: endpoint.answer)
            let good = Mutex(1)
            Self.api(server) { token in good.withLock { token == endpoint.token($0) } }
            let config = Self.config(server, sources: ["api": ""])
            try await HammockProcess.withRunning(config: config, environment: ["CLIENT_SECRET": Self.secret]) { hammock in
                #expect(try await hammock.nextAnswer("api").content == ["n": 1])
                try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                #expect(try await hammock.nextAnswer("api").content == ["n": 2])
                #expect(server.requests(to: "/token").count == 1)
                good.withLock { $0 = 2 }
                try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                #expect(try await hammock.nextAnswer("api").content == ["n": 3])
                #expect(server.requests(to: "/token").count == 2)
                #expect(hammock.stderrText.contains("no expires_in"), "\(hammock.stderrText)")
            }
        }
    }

    @Test("two sources with the same credentials share one token, asked for once while both wait")
    func sourcesShareOneTokenRequest() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        try await TestHTTPServer.with { server in
            server.route("/token") { request in
                var answer = endpoint.answer(request)
                answer.delay = .milliseconds(500)
                return answer
            }
            Self.api(server) { $0 == endpoint.token(1) }
            let config = Self.config(server, sources: ["a": "", "b": "", "c": ""])
            try await HammockProcess.withRunning(config: config, environment: ["CLIENT_SECRET": Self.secret]) { hammock in
                for source in ["a", "b", "c"] {
                    let answer = try await hammock.nextAnswer(source)
                    #expect(answer.event == "newData", "\(source)")
                }
                #expect(server.requests(to: "/token").count == 1)
                #expect(server.requests(to: "/api").count == 3)
            }
        }
    }

    @Test("a load waiting for a slow token request ends at its own timeout; the request goes on for the others")
    func aWaitingLoadKeepsItsOwnTimeout() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        try await TestHTTPServer.with { server in
            server.route("/token") { request in
                var answer = endpoint.answer(request)
                answer.delay = .seconds(3)
                return answer
            }
            Self.api(server) { $0 == endpoint.token(1) }
            var yaml = "version: 1\nsources:\n"
            for (id, timeout) in [("patient", "6s"), ("hasty", "500ms")] {
                yaml += """
                      \(id):
                        kind: rest
                        url: "\(server.base)/api"
                        timeout: \(timeout)
                        retry: off
                        auth: { oauth2: { token-url: "\(server.base)/token", client-id: cid, client-secret: "${secret:CLIENT_SECRET}" } }

                    """
            }
            try await HammockProcess.withRunning(config: yaml, environment: ["CLIENT_SECRET": Self.secret]) { hammock in
                let hasty = try await hammock.nextAnswer("hasty")
                #expect(hasty.errorCode == "timeout", "\(hasty)")
                let asked = try #require(server.requests(to: "/token").first).receivedAt
                #expect(hasty.receivedAt - asked < .milliseconds(2500), "not held until the token came (3 s)")
                let patient = try await hammock.nextAnswer("patient")
                #expect(patient.event == "newData", "\(patient)")
                #expect(server.requests(to: "/token").count == 1)
            }
        }
    }

    @Test("cache: true keeps the token in the cache folder's oauth2/ (file 0600, folder 0700); a restart reuses it; a corrupt file is ignored")
    func diskCache() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        try await TestHTTPServer.with { server in
            server.route("/token", handler: endpoint.answer)
            Self.api(server) { _ in true }
            let folder = try HammockProcess.makeTemporaryDirectory()
            defer { HammockProcess.removeTemporaryDirectory(folder) }
            let cache = folder + "/cache"
            // `plain` shares the token without saying cache: true; the file is written whichever loads first.
            let configPath = try HammockProcess.writeConfig(Self.config(server, sources: ["api": ", cache: true", "plain": ""]), in: folder)
            let environment = ["CLIENT_SECRET": Self.secret, "HAMMOCK_CACHE_DIR": cache]
            try await HammockProcess.withRunning(configPath: configPath, environment: environment) { hammock in
                _ = try await hammock.nextAnswer("api")
            }
            let files = try FileManager.default.contentsOfDirectory(atPath: cache + "/oauth2")
            #expect(files.count == 1, "\(files)")
            let file = cache + "/oauth2/" + (files.first ?? "")
            let fileMode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
            let folderMode = try FileManager.default.attributesOfItem(atPath: cache + "/oauth2")[.posixPermissions] as? Int
            #expect(fileMode == 0o600)
            #expect(folderMode == 0o700)
            #expect(String(decoding: FileManager.default.contents(atPath: file) ?? Data(), as: UTF8.self).contains(endpoint.token(1)))

            try await HammockProcess.withRunning(configPath: configPath, environment: environment) { hammock in
                _ = try await hammock.nextAnswer("api")
            }
            #expect(server.requests(to: "/token").count == 1, "the restart reused the kept token")
            #expect(server.requests(to: "/api").last?.header("Authorization") == "Bearer \(endpoint.token(1))")

            try Data("{not json".utf8).write(to: URL(fileURLWithPath: file))
            try await HammockProcess.withRunning(configPath: configPath, environment: environment) { hammock in
                let answer = try await hammock.nextAnswer("api")
                #expect(answer.event == "newData")
                try await Task.sleep(for: .milliseconds(200))
                #expect(hammock.stderrText.contains("does not read as one for these credentials"), "\(hammock.stderrText)")
            }
            #expect(server.requests(to: "/token").count == 2, "a corrupt file is ignored")
            #expect(String(decoding: FileManager.default.contents(atPath: file) ?? Data(), as: UTF8.self).contains(endpoint.token(2)))
        }
    }

    @Test("a token the API quotes back (in content, an ETag, an error) never reaches stdout, stderr or the offline cache")
    func obtainedTokenIsRedacted() async throws {
        let endpoint = TokenEndpoint(secret: Self.secret)
        try await TestHTTPServer.with { server in
            server.route("/token", handler: endpoint.answer)
            server.route("/api") { request in
                let sent = request.header("Authorization") ?? ""
                return .json(JSONValue.object(["sent": .string(sent), "again": .string("token=\(sent.dropFirst(7))")]).jsonString, headers: [("ETag", "\"\(sent.dropFirst(7))\"")])
            }
            server.route("/denied") { request in
                .json(JSONValue.object(["message": .string("you sent \(request.header("Authorization") ?? "")")]).jsonString, status: 403)
            }
            let folder = try HammockProcess.makeTemporaryDirectory()
            defer { HammockProcess.removeTemporaryDirectory(folder) }
            let cache = folder + "/cache"
            let config = """
                version: 1
                sources:
                  api:
                    kind: rest
                    url: "\(server.base)/api"
                    cache: true
                    retry: off
                    auth: { oauth2: { token-url: "\(server.base)/token", client-id: cid, client-secret: "${secret:CLIENT_SECRET}" } }
                  denied:
                    kind: rest
                    url: "\(server.base)/denied"
                    cache: true
                    retry: off
                    auth: { oauth2: { token-url: "\(server.base)/token", client-id: cid, client-secret: "${secret:CLIENT_SECRET}" } }
                """
            let configPath = try HammockProcess.writeConfig(config, in: folder)
            try await HammockProcess.withRunning(configPath: configPath, environment: ["CLIENT_SECRET": Self.secret, "HAMMOCK_CACHE_DIR": cache]) { hammock in
                let answer = try await hammock.nextAnswer("api")
                #expect(answer.content == ["sent": "Bearer [redacted]", "again": "token=[redacted]"], "\(answer)")
                let denied = try await hammock.nextAnswer("denied")
                #expect(denied.errorMessage == "HTTP 403 Forbidden: you sent Bearer [redacted]", "\(denied)")
                // The ETag comes back as If-None-Match: redacted, so not the token.
                try hammock.send(controlLine: #"{"op":"load","source":"api"}"#)
                _ = try await hammock.nextAnswer("api")
                try await Task.sleep(for: .milliseconds(300))
                #expect(server.requests(to: "/api").count == 2)
                #expect(server.requests(to: "/token").count == 1)
                let token = endpoint.token(1)
                #expect(!hammock.stdoutText.contains(token))
                #expect(!hammock.stderrText.contains(token))
            }
            let token = endpoint.token(1)
            var cacheFiles = 0
            for path in FileManager.default.enumerator(atPath: cache)?.compactMap({ $0 as? String }) ?? [] {
                guard let data = FileManager.default.contents(atPath: cache + "/" + path) else { continue }
                cacheFiles += 1
                #expect(!String(decoding: data, as: UTF8.self).contains(token), "\(path)")
            }
            #expect(cacheFiles >= 1, "the offline cache was written")
        }
    }

    @Test("hammock check reports bad oauth2 options at their line, never quoting a secret")
    func checkReportsBadOAuth2Options() async throws {
        let config = """
            version: 1
            sources:
              api:
                kind: rest
                url: "https://api.example.com/x"
                auth:
                  oauth2:
                    token-url: "ftp://example.com/token"
                    client-id: cid
                    client-secret: "${secret:CLIENT_SECRET}"
                    grant: password
                    scpe: read
            """
        let result = try await HammockProcess.check(config: config, environment: ["CLIENT_SECRET": Self.secret])
        let output = result.stdout + result.stderr
        #expect(result.termination == .exited(2), "\(output)")
        #expect(output.contains("config.yaml:8:"), "\(output)")
        #expect(output.contains("auth.oauth2.token-url: must start with http:// or https://"), "\(output)")
        #expect(output.contains("config.yaml:11:"), "\(output)")
        #expect(output.contains("auth.oauth2.grant must be client_credentials or refresh_token"), "\(output)")
        #expect(output.contains("config.yaml:12:"), "\(output)")
        #expect(output.contains(#"did you mean "scope"?"#), "\(output)")
        #expect(!output.contains(Self.secret))
    }
}
