import Foundation
import HammockJSON
import Synchronization
import HammockTestSupport
import Testing

// Issue 29: what a response said, beside its content, on the state's `meta` (Siesta's entity metadata):
// the real `hammock` and `hammock-plugin-rest` against a server on 127.0.0.1, read as a consumer reads lines.

@Suite("rest: the response's metadata on the state")
struct MetaTests {
    /// Broken on purpose (the plugin sending no meta on a 304), the 304's line kept httpStatus 200 and the
    /// rate-limit header's old value.
    @Test("meta says the status, validators, type, final URL and the exposed headers; a 304 updates what it says and keeps the rest")
    func metaFollowsTheAnswers() async throws {
        try await TestHTTPServer.with { server in
            let remaining = Mutex(10)
            server.route("/moved") { request in TestResponse(status: 301, headers: [("Location", "/repo?" + (request.query ?? ""))]) }
            server.route("/repo") { request in
                let left = remaining.withLock { value in
                    value -= 1
                    return value
                }
                let common = [("ETag", #""v1""#), ("X-RateLimit-Remaining", "\(left)"), ("X-Not-Exposed", "x")]
                // X-Big only on the 200: the 304 says nothing of it, so its value stays.
                return request.header("If-None-Match") == #""v1""#
                    ? TestResponse(status: 304, headers: common)
                    : .json(
                        #"{"stars": 1}"#,
                        headers: common + [("Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT"), ("X-Big", String(repeating: "b", count: 5000))])
            }
            let config = """
                version: 1
                sources:
                  repo:
                    kind: rest
                    url: "\(server.base)/moved?key=${secret:META_KEY}"
                    expose-headers: [X-RateLimit-Remaining, X-Absent, X-Big]
                    retry: off
                """
            try await HammockProcess.withRunning(config: config, environment: ["META_KEY": "sekrit-meta-key"]) { hammock in
                let first = try await hammock.nextAnswer("repo")
                #expect(first.event == "newData")
                let meta = try #require(first[pointer: "/state/meta"]?.objectValue, "\(first.json)")
                #expect(meta["httpStatus"] == 200)
                #expect(meta["etag"] == #""v1""#)
                #expect(meta["lastModified"] == "Wed, 21 Oct 2015 07:28:00 GMT")
                #expect(meta["contentType"] == "application/json")
                // The final URL, after the redirect, with the secret in its query redacted as everywhere.
                #expect(meta["url"] == .string("\(server.base)/repo?key=[redacted]"), "\(first.json)")
                #expect(!first.text.contains("sekrit-meta-key"))
                // Only the headers named, by lowercased name; one the answer lacks is left out.
                // A long value is cut at 1 KiB.
                #expect(meta["headers"] == ["x-ratelimit-remaining": "9", "x-big": .string(String(repeating: "b", count: 1024))])

                try hammock.send(controlLine: #"{"op":"load","source":"repo"}"#)
                let second = try await hammock.nextAnswer("repo")
                #expect(second.event == "notModified")
                let updated = try #require(second[pointer: "/state/meta"]?.objectValue, "\(second.json)")
                #expect(updated["httpStatus"] == 304)
                #expect(updated["headers"]?["x-ratelimit-remaining"] == "8")
                #expect(updated["headers"]?["x-big"] == .string(String(repeating: "b", count: 1024)), "a header the 304 does not name stays")
                // What a 304 does not say stays: the content's type and Last-Modified.
                #expect(updated["contentType"] == "application/json")
                #expect(updated["lastModified"] == "Wed, 21 Oct 2015 07:28:00 GMT")
            }
        }
    }

    @Test("an error keeps the meta of the content it keeps; an override has none; a source without meta writes no meta member")
    func anErrorKeepsMetaAndAnOverrideHasNone() async throws {
        try await TestHTTPServer.with { server in
            let failing = Mutex(false)
            server.route("/data") { _ in
                failing.withLock { $0 } ? .json(#"{"message": "down"}"#, status: 500) : .json(#"[1, 2]"#)
            }
            let config = """
                version: 1
                sources:
                  data: { kind: rest, url: "\(server.base)/data", retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.nextAnswer("data")
                #expect(first[pointer: "/state/meta/httpStatus"] == 200)
                #expect(first[pointer: "/state/meta/headers"] == nil, "no expose-headers, no headers")

                failing.withLock { $0 = true }
                try hammock.send(controlLine: #"{"op":"load","source":"data"}"#)
                let failed = try await hammock.nextAnswer("data")
                #expect(failed.event == "error")
                #expect(failed.content == [1, 2])
                #expect(failed[pointer: "/state/meta/httpStatus"] == 200, "the meta of the content kept: \(failed.json)")

                try hammock.send(controlLine: #"{"op":"override","source":"data","content":"mine"}"#)
                let overridden = try await hammock.waitFor(type: "source", id: "data") { $0.origin == "override" }
                #expect(overridden.state?["meta"] == nil, "\(overridden.json)")
            }
        }
    }

    /// Broken on purpose (the plugin not passing no-store on), the private answer was in the cache file.
    @Test("Cache-Control: no-store keeps an answer out of the offline cache, and forgets what the cache held of the source")
    func noStoreStaysOffTheDisk() async throws {
        try await TestHTTPServer.with { server in
            let secretive = Mutex(false)
            server.route("/me") { _ in
                secretive.withLock { $0 }
                    ? .json(#"{"who": "private-answer"}"#, headers: [("Cache-Control", "private, no-store")])
                    : .json(#"{"who": "public-answer"}"#)
            }
            let cache = try HammockProcess.makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: cache) }
            @Sendable func cached() -> String? {
                guard let file = (try? FileManager.default.subpathsOfDirectory(atPath: cache))?.first(where: { $0.hasSuffix("me.json") }),
                    let bytes = FileManager.default.contents(atPath: cache + "/" + file)
                else { return nil }
                return String(decoding: bytes, as: UTF8.self)
            }
            let config = """
                version: 1
                sources:
                  me: { kind: rest, url: "\(server.base)/me", cache: true, retry: off }
                """
            try await HammockProcess.withRunning(config: config, environment: ["HAMMOCK_CACHE_DIR": cache]) { hammock in
                try await hammock.nextAnswer("me")
                let deadline = ContinuousClock.now + .seconds(10)
                while cached()?.contains("public-answer") != true && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                #expect(cached()?.contains("public-answer") == true, "an answer without no-store is cached")

                secretive.withLock { $0 = true }
                try hammock.send(controlLine: #"{"op":"load","source":"me"}"#)
                let answer = try await hammock.nextAnswer("me")
                #expect(answer.content == ["who": "private-answer"], "no-store content is shown")
                while cached() != nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                #expect(cached() == nil, "the cache forgot the source: \(cached() ?? "")")
            }
            #expect(cached()?.contains("private-answer") != true)
        }
    }

    @Test("expose-headers: a name that is not a header name is an error at its place in the file")
    func badExposedHeaderName() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            sources:
              data:
                kind: rest
                url: http://127.0.0.1:9/data
                expose-headers: [ok, "bad name"]
            """, in: directory)
        let check = try await HammockProcess.execute(["check", path])
        #expect(check.termination == .exited(2), "\(check.stderr)")
        #expect(check.stderr.contains(#"\#(path):5:26: source "data": "bad name" is not a valid HTTP header name"#), "\(check.stderr)")
    }
}
