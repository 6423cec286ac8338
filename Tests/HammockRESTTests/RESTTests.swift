import Foundation
import HammockCore
import HammockJSON
import HammockTestSupport
import Synchronization
import Testing

// The `rest` kind end to end: the real `hammock` runs the real `hammock-plugin-rest` against a real HTTP
// server on 127.0.0.1, and the tests read hammock's JSON lines as a consumer would.

@Suite("rest kind")
struct RESTTests {
    @Test("ETag: 200, then 304 keeps the content, then 200 with new content; If-None-Match is sent")
    func etagCycle() async throws {
        try await TestHTTPServer.with { server in
            server.route("/repo", .json(#"{"stars": 1}"#, headers: [("ETag", #""v1""#)]))
            let config = """
                version: 1
                sources:
                  repo: { kind: rest, url: "\(server.base)/repo", retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.nextAnswer("repo")
                #expect(first.event == "newData")
                #expect(first.content == ["stars": 1])

                server.route("/repo") { request in
                    request.header("If-None-Match") == #""v1""#
                        ? TestResponse(status: 304, headers: [("ETag", #""v1""#)])
                        : .json(#"{"stars": 1}"#, headers: [("ETag", #""v1""#)])
                }
                try hammock.send(controlLine: #"{"op":"load","source":"repo"}"#)
                let second = try await hammock.nextAnswer("repo")
                #expect(second.event == "notModified")
                #expect(second.content == ["stars": 1], "a 304 keeps the content")
                #expect(server.requests(to: "/repo").last?.header("If-None-Match") == #""v1""#)
                #expect(server.requests(to: "/repo").first?.header("If-None-Match") == nil)

                server.route("/repo") { request in
                    request.header("If-None-Match") == #""v2""#
                        ? TestResponse(status: 304) : .json(#"{"stars": 2}"#, headers: [("ETag", #""v2""#)])
                }
                try hammock.send(controlLine: #"{"op":"load","source":"repo"}"#)
                let third = try await hammock.nextAnswer("repo")
                #expect(third.event == "newData")
                #expect(third.content == ["stars": 2])

                try hammock.send(controlLine: #"{"op":"load","source":"repo"}"#)
                let fourth = try await hammock.nextAnswer("repo")
                #expect(fourth.event == "notModified", "the new ETag is the one sent next")
                #expect(fourth.content == ["stars": 2])
            }
        }
    }

    @Test("Last-Modified comes back as If-Modified-Since")
    func lastModified() async throws {
        try await TestHTTPServer.with { server in
            let stamp = "Wed, 21 Oct 2015 07:28:00 GMT"
            server.route("/feed") { request in
                request.header("If-Modified-Since") == stamp
                    ? TestResponse(status: 304) : .text("fresh\n", headers: [("Last-Modified", stamp)])
            }
            let config = """
                version: 1
                sources:
                  feed: { kind: rest, url: "\(server.base)/feed", retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.nextAnswer("feed")
                #expect(first.content == "fresh", "text, without the final newline")
                try hammock.send(controlLine: #"{"op":"load","source":"feed"}"#)
                let second = try await hammock.nextAnswer("feed")
                #expect(second.event == "notModified")
                #expect(second.content == "fresh")
                #expect(server.requests(to: "/feed").map { $0.header("If-Modified-Since") } == [nil, stamp])
            }
        }
    }

    @Test("HTTP errors carry httpStatus and the server's message, or the reason phrase")
    func httpErrors() async throws {
        try await TestHTTPServer.with { server in
            server.route("/json404", .json(#"{"message": "no such repo", "documentation_url": "x"}"#, status: 404))
            server.route("/json500", .json(#"{"error": "database is down"}"#, status: 500))
            server.route("/plain404", .text("nothing here\nat all", status: 404))
            server.route("/html500", TestResponse(status: 500, headers: [("Content-Type", "text/html")], body: Array("<html>oops</html>".utf8)))
            let config = """
                version: 1
                sources:
                  a: { kind: rest, url: "\(server.base)/json404", retry: off }
                  b: { kind: rest, url: "\(server.base)/json500", retry: off }
                  c: { kind: rest, url: "\(server.base)/plain404", retry: off }
                  d: { kind: rest, url: "\(server.base)/html500", retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let expected: [(String, Int, String)] = [
                    ("a", 404, "HTTP 404 Not Found: no such repo"),
                    ("b", 500, "HTTP 500 Internal Server Error: database is down"),
                    ("c", 404, "HTTP 404 Not Found: nothing here"),
                    ("d", 500, "HTTP 500 Internal Server Error"),
                ]
                for (source, status, message) in expected {
                    let answer = try await hammock.next(source) { $0.event == "error" }
                    #expect(answer.latestError?["httpStatus"] == .number(JSONNumber(status)), "\(source)")
                    #expect(answer.errorMessage == message, "\(source)")
                }
            }
        }
    }

    @Test("A slower answer than the timeout is a timeout error, and the content stays")
    func timeout() async throws {
        try await TestHTTPServer.with { server in
            server.route("/slow", .json("[1, 2]"))
            let config = """
                version: 1
                sources:
                  slow: { kind: rest, url: "\(server.base)/slow", timeout: 1s, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.nextAnswer("slow")
                #expect(first.content == [1, 2])
                var slow = TestResponse.json("[3]")
                slow.delay = .seconds(4)
                server.route("/slow", slow)
                let start = ContinuousClock.now
                try hammock.send(controlLine: #"{"op":"load","source":"slow"}"#)
                let answer = try await hammock.nextAnswer("slow")
                let elapsed = ContinuousClock.now - start
                #expect(answer.event == "error")
                #expect(answer.errorCode == "timeout")
                #expect(answer.errorMessage.contains("127.0.0.1") == true)
                #expect(answer.content == [1, 2], "the stale content is kept")
                // The plugin's own timeout, not the engine's backstop (1 s + 2 s later, saying "no answer from
                // the loader"): told by the message, which names the host, not by the clock.
                #expect(!answer.errorMessage.contains("no answer from"), "\(answer)")
                #expect(elapsed >= .milliseconds(900), "the timeout was waited out: \(elapsed)")
            }
        }
    }

    @Test("A body larger than maxBytes is an error, whether announced or streamed")
    func maxBytes() async throws {
        try await TestHTTPServer.with { server in
            server.route("/announced", TestResponse(headers: [("Content-Type", "text/plain")], body: Array(repeating: 0x61, count: 4096)))
            server.route("/streamed", TestResponse(headers: [("Content-Type", "text/plain")], streamedBytes: 256 << 20))
            server.route("/fits", TestResponse(headers: [("Content-Type", "text/plain")], body: Array(repeating: 0x61, count: 1024)))
            let config = """
                version: 1
                sources:
                  announced: { kind: rest, url: "\(server.base)/announced", maxBytes: 1KiB, retry: off }
                  streamed: { kind: rest, url: "\(server.base)/streamed", maxBytes: 64KiB, retry: off, timeout: 20s }
                  fits: { kind: rest, url: "\(server.base)/fits", maxBytes: 1024, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let announced = try await hammock.nextAnswer("announced")
                #expect(announced.errorCode == "tooLarge")
                #expect(announced.errorMessage.contains("maxBytes") == true)
                // 256 MiB would take far longer than this to read; stopping at the limit is quick.
                let streamed = try await hammock.nextAnswer("streamed", timeout: .seconds(8))
                #expect(streamed.errorCode == "tooLarge")
                let fits = try await hammock.nextAnswer("fits")
                #expect(fits.content == .string(String(repeating: "a", count: 1024)))
            }
        }
    }

    @Test("Link pagination follows rel=next and joins the pages; limit caps the items")
    func linkPagination() async throws {
        try await TestHTTPServer.with { server in
            let base = server.base
            server.route("/items") { request in
                let page = Int(request.queryParameter("page") ?? "1") ?? 1
                let items = (1...3).map { String((page - 1) * 3 + $0) }.joined(separator: ",")
                var headers: [(String, String)] = []
                if page < 3 {
                    headers.append(("Link", #"<\#(base)/items?page=\#(page + 1)>; rel="next", <\#(base)/items?page=3>; rel="last""#))
                }
                return .json("[\(items)]", headers: headers)
            }
            let config = """
                version: 1
                sources:
                  all: { kind: rest, url: "\(base)/items", paginate: { style: link }, retry: off }
                  some: { kind: rest, url: "\(base)/items?start=1", paginate: { style: link, limit: 4 }, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let all = try await hammock.nextAnswer("all")
                #expect(all.content == [1, 2, 3, 4, 5, 6, 7, 8, 9])
                let some = try await hammock.nextAnswer("some")
                #expect(some.content == [1, 2, 3, 4])
                #expect(server.requests(to: "/items").filter { $0.query?.hasPrefix("start") == true }.count == 1)
                #expect(server.requests(to: "/items").count == 5, "3 pages for all, 2 for some")
            }
        }
    }

    @Test("Page pagination walks pages until a short one; limit stops early")
    func pagePagination() async throws {
        try await TestHTTPServer.with { server in
            let total = 5
            server.route("/list") { request in
                let page = Int(request.queryParameter("p") ?? "0") ?? 0
                let size = Int(request.queryParameter("per_page") ?? "0") ?? 0
                let range = ((page - 1) * size)..<min(page * size, total)
                return .json("[" + range.map { #"{"n":\#($0)}"# }.joined(separator: ",") + "]")
            }
            let config = """
                version: 1
                sources:
                  all:
                    kind: rest
                    url: "\(server.base)/list"
                    query: { sort: "a b&c" }
                    paginate: { style: page, param: p, sizeParam: per_page, size: 2 }
                    retry: off
                  capped:
                    kind: rest
                    url: "\(server.base)/list?capped=1"
                    paginate: { style: page, param: p, sizeParam: per_page, size: 2, limit: 3 }
                    retry: off
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let all = try await hammock.nextAnswer("all")
                #expect(all.content == .parse(#"[{"n":0},{"n":1},{"n":2},{"n":3},{"n":4}]"#))
                let capped = try await hammock.nextAnswer("capped")
                #expect(capped.content == .parse(#"[{"n":0},{"n":1},{"n":2}]"#))
                let requests = server.requests(to: "/list")
                let uncapped = requests.filter { $0.queryParameter("capped") == nil }
                #expect(uncapped.map { $0.queryParameter("p") } == ["1", "2", "3"])
                #expect(uncapped.allSatisfy { $0.queryParameter("sort") == "a%20b%26c" && $0.queryParameter("per_page") == "2" })
                #expect(requests.filter { $0.queryParameter("capped") == "1" }.count == 2)
            }
        }
    }

    @Test("A dependent source loads from the other's content and reloads when the value it uses changes")
    func dependentChain() async throws {
        try await TestHTTPServer.with { server in
            server.route("/posts/1", .json(#"{"id": 1, "userId": 7, "title": "hello"}"#))
            server.route("/users/7", .json(#"{"name": "Ada"}"#))
            server.route("/users/8", .json(#"{"name": "Grace"}"#))
            let config = """
                version: 1
                sources:
                  post: { kind: rest, url: "\(server.base)/posts/1", retry: off }
                  author: { kind: rest, url: "\(server.base)/users/{{ post.userId }}", retry: off }
                views:
                  page: { sources: [post, author] }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.next("author") { $0.event == "newData" }
                #expect(first.content == ["name": "Ada"])
                server.route("/posts/1", .json(#"{"id": 1, "userId": 8, "title": "hello"}"#))
                try hammock.send(controlLine: #"{"op":"load","source":"post"}"#)
                // Another user is another resource: Ada goes before Grace loads (the wipe line itself may be
                // replaced by a newer state of the same source before the consumer reads it).
                let second = try await hammock.next("author") { $0.event == "newData" && $0.json["origin"] != "wipe" }
                #expect(second.content == ["name": "Grace"])
                #expect(server.requests(to: "/users/8").count == 1)
            }
        }
    }

    /// Broken on purpose (the plugin sending no `fresh` advice), the second request came 300 ms after the
    /// first.
    @Test("what the server says of freshness (max-age, X-Poll-Interval on a 304) holds polls back; respect-server: false polls as refresh says")
    func serverFreshnessIsAFloor() async throws {
        try await TestHTTPServer.with { server in
            server.route("/cached", .json(#"{"n": 1}"#, headers: [("Cache-Control", "public, max-age=2")]))
            server.route("/polled") { request in
                // GitHub's way: an ETag, 304s, and X-Poll-Interval on each.
                request.header("if-none-match") == "\"v1\""
                    ? .text("", status: 304, headers: [("ETag", "\"v1\""), ("X-Poll-Interval", "2")])
                    : .json(#"{"n": 2}"#, headers: [("ETag", "\"v1\""), ("X-Poll-Interval", "2")])
            }
            server.route("/ignored", .json(#"{"n": 3}"#, headers: [("Cache-Control", "max-age=60")]))
            let config = """
                version: 1
                sources:
                  cached: { kind: rest, url: "\(server.base)/cached", refresh: 300ms }
                  polled: { kind: rest, url: "\(server.base)/polled", refresh: 300ms }
                  ignored: { kind: rest, url: "\(server.base)/ignored", refresh: 300ms, respect-server: false }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                try await hammock.nextAnswer("cached")
                try await Task.sleep(for: .milliseconds(4500))
                // The gaps between requests, not their count: on a loaded machine the sleep above may last far
                // longer than 4.5 s (a CI run: 9 requests, every one 2 s after the one before).
                for path in ["/cached", "/polled"] {
                    let times = server.requests(to: path).map(\.receivedAt)
                    try #require(times.count >= 2, "\(path): \(times.count) requests in 4.5 s")
                    for (earlier, later) in zip(times, times.dropFirst()) {
                        #expect(later - earlier >= .milliseconds(1900), "\(path): a request \(later - earlier) after the one before")
                    }
                }
                // A 304 keeps the content.
                #expect(try await hammock.nextAnswer("polled").content == ["n": 2])
                #expect(server.requests(to: "/ignored").count >= 8, "respect-server: false polls every 300 ms")
            }
        }
    }

    /// Broken on purpose (no hold before a request), /second was asked while the count was used up.
    @Test("a used-up rate limit holds every source of the origin until its reset, saying until when")
    func aUsedUpRateLimitHoldsTheOrigin() async throws {
        try await TestHTTPServer.with { server in
            // The reset 4 s after the first request (whole seconds: 3 to 4 s), however long hammock took to start.
            let resets = Mutex<[Int]>([])
            server.route("/first") { _ in
                let reset = resets.withLock { resets in
                    if resets.isEmpty { resets.append(Int(Date().timeIntervalSince1970) + 4) }
                    return resets[0]
                }
                return .json(#"{"n": 1}"#, headers: [("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "\(reset)")])
            }
            server.route("/second", .json(#"{"n": 2}"#))
            // second waits for first's content (its url reads it), so it asks after the count was used up.
            let config = """
                version: 1
                sources:
                  first: { kind: rest, url: "\(server.base)/first", refresh: 200ms }
                  second: { kind: rest, url: "\(server.base)/second?after={{ first.n }}", refresh: 200ms, retry: 100ms }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let held = try await hammock.nextAnswer("second")
                #expect(held.latestError?["code"] == "rateLimited", "\(held.json)")
                #expect(held.errorMessage.contains("is used up until"), "\(held.json)")
                // When, for a program: the reset, within its second.
                let retryAt = try #require(held.latestError?["retryAt"]?.stringValue.flatMap(Timestamp.init(rfc3339:)), "\(held.json)")
                let resetAt = Timestamp(millisecondsSince1970: Int64(resets.withLock { $0[0] }) * 1000)
                #expect(abs((retryAt - resetAt).milliseconds) <= 1500, "retryAt \(retryAt), reset \(resetAt)")
                #expect(server.requests(to: "/second").isEmpty, "no request while the count is used up")
                try await hammock.next("second", timeout: .seconds(10)) { $0.content == ["n": 2] }
                let started = server.requests(to: "/first").map(\.receivedAt)
                try #require(started.count >= 1)
                let second = try #require(server.requests(to: "/second").first?.receivedAt)
                #expect(second - started[0] >= .milliseconds(2500), "/second was asked \(second - started[0]) after the count was used up")
                if started.count > 1 {
                    #expect(started[1] - started[0] >= .milliseconds(2500), "/first again after \(started[1] - started[0])")
                }
            }
        }
    }

    @Test("Retry-After holds the engine's next attempt back")
    func retryAfter() async throws {
        try await TestHTTPServer.with { server in
            server.route("/busy", .json(#"{"message": "slow down"}"#, status: 503, headers: [("Retry-After", "2")]))
            server.route("/dated") { _ in
                // An HTTP date 3 s ahead: with its whole-second resolution, between 2 and 3 s from now.
                let formatter = DateFormatter()
                formatter.locale = Locale(identifier: "en_US_POSIX")
                formatter.timeZone = TimeZone(identifier: "GMT")
                formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
                return .text("busy", status: 429, headers: [("Retry-After", formatter.string(from: Date().addingTimeInterval(3)))])
            }
            let config = """
                version: 1
                sources:
                  busy: { kind: rest, url: "\(server.base)/busy", retry: 100ms }
                  dated: { kind: rest, url: "\(server.base)/dated", retry: 100ms }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.nextAnswer("busy")
                #expect(first.errorMessage == "HTTP 503 Service Unavailable: slow down")
                #expect(first.latestError?["retryAfter"] == nil, "retryAfter steers the engine; it is not on the line")
                try await hammock.next("busy", timeout: .seconds(6)) { $0.event == "error" }
                let times = server.requests(to: "/busy").map(\.receivedAt)
                try #require(times.count >= 2, "two errors, two requests: \(times)")
                let gap = times[1] - times[0]
                #expect(gap >= .milliseconds(1900), "the retry came \(gap) after the first attempt")
                #expect(gap < .seconds(5))
                try await hammock.next("dated", timeout: .seconds(8)) { $0.event == "error" && $0.latestError?["httpStatus"] == 429 }
                try await hammock.next("dated", timeout: .seconds(8)) { $0.event == "error" }
                let dated = server.requests(to: "/dated").map(\.receivedAt)
                try #require(dated.count >= 2, "two errors, two requests: \(dated)")
                #expect(dated[1] - dated[0] >= .milliseconds(1500), "an HTTP-date Retry-After: \(dated[1] - dated[0])")
            }
        }
    }

    @Test("A secret header reaches the server but never hammock's stdout or stderr")
    func secretHeader() async throws {
        let token = "s3cr3t-token-\(UUID().uuidString.prefix(8))"
        try await TestHTTPServer.with { server in
            server.route("/private") { request in
                let sent = request.header("Authorization") ?? "nothing"
                return .json(JSONValue.object(["message": .string("bad credentials: \(sent)")]).jsonString, status: 401)
            }
            let config = """
                version: 1
                sources:
                  private:
                    kind: rest
                    url: "\(server.base)/private"
                    headers: { Authorization: "Bearer ${HAMMOCK_TEST_TOKEN}", X-Empty: "${HAMMOCK_UNSET:-}" }
                    retry: off
                """
            try await HammockProcess.withRunning(config: config, environment: ["HAMMOCK_TEST_TOKEN": token]) { hammock in
                let answer = try await hammock.nextAnswer("private")
                #expect(answer.latestError?["httpStatus"] == 401)
                #expect(answer.errorMessage.contains("[redacted]") == true, "\(answer)")
                #expect(server.requests(to: "/private").first?.header("Authorization") == "Bearer \(token)")
                #expect(server.requests(to: "/private").first?.header("X-Empty") == nil, "an empty header is left out")
                try await Task.sleep(for: .milliseconds(200))
                #expect(!hammock.stdoutText.contains(token))
                #expect(!hammock.stderrText.contains(token))
            }
        }
    }

    @Test("POST sends a mapping as JSON with headers and query; redirects are followed unless told not to")
    func requestShape() async throws {
        try await TestHTTPServer.with { server in
            server.route("/echo") { request in
                .json(
                    JSONValue.object([
                        "method": .string(request.method), "uri": .string(request.uri),
                        "type": .string(request.header("Content-Type") ?? ""), "body": .string(String(decoding: request.body, as: UTF8.self)),
                        "agent": .string(request.header("User-Agent") ?? ""), "x": .string(request.header("X-Thing") ?? ""),
                    ]).jsonString)
            }
            server.route("/old", TestResponse(status: 302, headers: [("Location", "/echo?moved=1")]))
            let config = """
                version: 1
                sources:
                  post:
                    kind: rest
                    url: "\(server.base)/echo"
                    method: POST
                    headers: { X-Thing: "42" }
                    query: { q: "ü" }
                    body: { name: hammock, tags: [a, b] }
                  moved: { kind: rest, url: "\(server.base)/old", retry: off }
                  stays: { kind: rest, url: "\(server.base)/old", followRedirects: false, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let post = try await hammock.nextAnswer("post")
                #expect(post.content?["method"] == "POST")
                #expect(post.content?["uri"] == "/echo?q=%C3%BC")
                #expect(post.content?["type"] == "application/json")
                #expect(post.content?["body"].flatMap { $0.stringValue.map(JSONValue.parse) } == .parse(#"{"name":"hammock","tags":["a","b"]}"#))
                #expect(post.content?["x"] == "42")
                #expect(post.content?["agent"]?.stringValue?.hasPrefix("hammock") == true)
                let moved = try await hammock.nextAnswer("moved")
                #expect(moved.content?["uri"] == "/echo?moved=1")
                let stays = try await hammock.nextAnswer("stays")
                #expect(stays.latestError?["httpStatus"] == 302)
            }
        }
    }

    @Test("A refused connection says so")
    func connectionRefused() async throws {
        // A port that was just free: bind, note it, close.
        let server = try await TestHTTPServer.start()
        let url = server.base + "/nothing"
        await server.stop()
        let config = """
            version: 1
            sources:
              gone: { kind: rest, url: "\(url)", retry: off }
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            let answer = try await hammock.nextAnswer("gone")
            #expect(answer.errorCode == "connectionRefused")
            #expect(answer.errorMessage.contains("refused") == true)
        }
    }

    @Test("hammock check reports bad rest options at their line and column")
    func checkReportsBadOptions() async throws {
        let config = """
            version: 1
            sources:
              repo:
                kind: rest
                urll: https://example.com/
                method: FETCH
                parse: xml
                paginate: { style: pages, limt: 3 }
              ok:
                kind: rest
                url: "https://example.com/users/{{ repo.owner }}"
                headers: { Authorization: "Bearer ${HAMMOCK_TEST_TOKEN}" }
              bad_url:
                kind: rest
                url: ftp://example.com/file
            """
        let check = try await HammockProcess.check(config: config, environment: ["HAMMOCK_TEST_TOKEN": "abcdefgh"])
        let output = check.stdout + "\n" + check.stderr
        #expect(check.termination == .exited(2), "\(output)")
        #expect(output.contains(#"config.yaml:5:5: source "repo": unknown key "urll" in a rest source (did you mean "url"?)"#), "\(output)")
        #expect(output.contains(#"missing required key "url""#), "\(output)")
        #expect(output.contains(#"config.yaml:6:5: source "repo": method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, found "FETCH""#), "\(output)")
        #expect(output.contains("config.yaml:7:"), "\(output)")
        #expect(output.contains(#"paginate.style must be link or page, found "pages" (did you mean "page"?)"#), "\(output)")
        #expect(output.contains(#"unknown key "limt" in paginate (did you mean "limit"?)"#), "\(output)")
        #expect(output.contains("config.yaml:15:"), "\(output)")
        #expect(output.contains("http:// or https://"), "\(output)")
        #expect(!output.contains("config.yaml:11:"), "a templated url is fine: \(output)")
        #expect(!output.contains("abcdefgh"))
    }
}

extension JSONValue {
    /// Parses test text that must be JSON (a value that cannot be one compares unequal to any answer).
    static func parse(_ text: String) -> JSONValue {
        (try? JSONValue(parsing: Array(text.utf8))) ?? .string("NOT JSON: " + text)
    }
}
