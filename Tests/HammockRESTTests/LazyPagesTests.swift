import Foundation
import HammockJSON
import HammockTestSupport
import Synchronization
import Testing

// Issue 29: SwiftEthel's lazy sequences for hammock. `paginate: { lazy: true }` loads the first page; the control
// op `more` loads the next ones and is acknowledged once they are in; a refresh reads the pages held again, each
// with its own validators. The real `hammock` against a server on 127.0.0.1.

@Suite("rest: lazy pages")
struct LazyPagesTests {
    /// Five pages of three, linked by `Link: rel="next"`, each with an ETag that answers 304 when sent back.
    static func fivePages(_ server: TestHTTPServer) {
        let base = server.base
        server.route("/items") { request in
            let page = Int(request.queryParameter("page") ?? "1") ?? 1
            let etag = "\"p\(page)\""
            var headers = [("ETag", etag)]
            if page < 5 { headers.append(("Link", #"<\#(base)/items?page=\#(page + 1)>; rel="next""#)) }
            if request.header("If-None-Match") == etag { return TestResponse(status: 304, headers: headers) }
            let items = (1...3).map { String((page - 1) * 3 + $0) }.joined(separator: ",")
            return .json("[\(items)]", headers: headers)
        }
    }

    /// Broken on purpose: the plugin reading every page of a lazy source (pages 2-5 were asked for at start);
    /// `more` acknowledged at once instead of after its pages (the ack came before the two-page line); the
    /// memory of pages off (the refresh sent no If-None-Match for page 2).
    @Test("a lazy source loads one page; more (and count) loads the next and is acknowledged after them; a refresh keeps them, with 304s")
    func moreLoadsTheNextPages() async throws {
        try await TestHTTPServer.with { server in
            Self.fivePages(server)
            let config = """
                version: 1
                sources:
                  list: { kind: rest, url: "\(server.base)/items", paginate: { style: link, lazy: true }, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.nextAnswer("list")
                #expect(first.content == [1, 2, 3])
                #expect(first[pointer: "/state/meta/pages"] == 1)
                #expect(first[pointer: "/state/meta/hasMore"] == true)
                #expect(server.requests(to: "/items").count == 1, "only the first page")
                // A refresh of the one page held: a 304, so not modified, and meta keeps what the 304 does not say.
                try hammock.send(controlLine: #"{"op":"load","source":"list"}"#)
                let same = try await hammock.nextAnswer("list")
                #expect(same.event == "notModified", "\(same.json)")
                #expect(same[pointer: "/state/meta/httpStatus"] == 304)
                #expect(same[pointer: "/state/meta/contentType"] == "application/json", "\(same.json)")
                #expect(same[pointer: "/state/meta/hasMore"] == true)

                try hammock.send(controlLine: #"{"op":"more","source":"list","id":"m1"}"#)
                let two = try await hammock.nextAnswer("list")
                #expect(two.content == [1, 2, 3, 4, 5, 6])
                #expect(two[pointer: "/state/meta/pages"] == 2)
                let ack = try await hammock.waitFor(type: "ack") { $0.json["id"] == "m1" }
                #expect(ack.seq! > two.seq!, "the ack comes after the pages")

                try hammock.send(controlLine: #"{"op":"more","source":"list","count":10,"id":"m2"}"#)
                let all = try await hammock.nextAnswer("list")
                #expect(all.content == .array((1...15).map { .number(JSONNumber($0)) }))
                #expect(all[pointer: "/state/meta/pages"] == 5)
                #expect(all[pointer: "/state/meta/hasMore"] == false)
                try await hammock.waitFor(type: "ack") { $0.json["id"] == "m2" }

                try hammock.send(controlLine: #"{"op":"more","source":"list","id":"m3"}"#)
                let refused = try await hammock.waitFor(type: "error") { $0.json["id"] == "m3" }
                #expect(refused.json["message"]?.stringValue?.contains("has no more pages to load (its meta says hasMore: false)") == true, "\(refused.json)")

                // A refresh reads the five pages again, each with its own ETag: every one answers 304, and the
                // list is not modified.
                let before = server.requests(to: "/items").count
                try hammock.send(controlLine: #"{"op":"load","source":"list"}"#)
                let refreshed = try await hammock.nextAnswer("list")
                #expect(refreshed.event == "notModified", "\(refreshed.json)")
                #expect(refreshed.content == all.content)
                let again = server.requests(to: "/items").dropFirst(before)
                #expect(again.count == 5)
                #expect(again.map { $0.header("If-None-Match") } == (1...5).map { "\"p\($0)\"" })

                // A wipe forgets the pages asked for: the next load reads the first page alone, as new data.
                try hammock.send(controlLine: #"{"op":"wipe","source":"list"}"#)
                try hammock.send(controlLine: #"{"op":"load","source":"list"}"#)
                let afterWipe = try await hammock.waitFor(type: "source", id: "list") { $0.origin == "load" }
                #expect(afterWipe.content == [1, 2, 3])
            }
        }
    }

    @Test("more: limit still caps the total; a source that is not paginated, an unknown source and a bad count are refused")
    func moreIsBounded() async throws {
        try await TestHTTPServer.with { server in
            Self.fivePages(server)
            server.route("/one", .json("[1]"))
            let config = """
                version: 1
                sources:
                  capped: { kind: rest, url: "\(server.base)/items", paginate: { style: link, lazy: true, limit: 5 }, retry: off }
                  plain: { kind: rest, url: "\(server.base)/one", retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.nextAnswer("capped")
                #expect(first.content == [1, 2, 3])
                try await hammock.nextAnswer("plain")
                try hammock.send(controlLine: #"{"op":"more","source":"capped","count":3,"id":"c"}"#)
                let capped = try await hammock.nextAnswer("capped")
                #expect(capped.content == [1, 2, 3, 4, 5])
                #expect(capped[pointer: "/state/meta/hasMore"] == false, "at its limit a source has all it wants")
                try await hammock.waitFor(type: "ack") { $0.json["id"] == "c" }

                for (line, expected) in [
                    (#"{"op":"more","source":"plain","id":1}"#, "its meta says nothing of more pages"),
                    (#"{"op":"more","source":"nope","id":2}"#, "unknown source \"nope\""),
                    (#"{"op":"more","source":"capped","count":0,"id":3}"#, "\"count\" must be a whole number from 1 to 1000"),
                    (#"{"op":"more","source":"capped","count":"2","id":4}"#, "\"count\" must be a whole number from 1 to 1000"),
                    (#"{"op":"more","view":"v","id":5}"#, "\"more\" needs a \"source\""),
                ] {
                    try hammock.send(controlLine: line)
                    let error = try await hammock.waitFor(type: "error") { $0.json["message"]?.stringValue?.contains(expected) == true }
                    #expect(error.json["id"] != nil, "\(error.json)")
                }
            }
        }
    }

    /// An attack: a consumer floods `more`. Every id is answered exactly once (an ack, or a refusal once the
    /// pages run out), the source never reads past its last page, and the engine goes on.
    @Test("a flood of 2,000 more lines: each id answered once, no page past the last, the engine goes on")
    func aFloodOfMore() async throws {
        try await TestHTTPServer.with { server in
            Self.fivePages(server)
            let config = """
                version: 1
                sources:
                  list: { kind: rest, url: "\(server.base)/items", paginate: { style: link, lazy: true }, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                try await hammock.nextAnswer("list")
                let count = 2000
                var flood = ""
                for n in 0..<count { flood += #"{"op":"more","source":"list","count":\#(n % 3 + 1),"id":\#(n)}"# + "\n" }
                try hammock.send(controlLine: String(flood.dropLast()))
                try hammock.send(controlLine: #"{"op":"snapshot","id":"end"}"#)
                let deadline = ContinuousClock.now + .seconds(60)
                func answered() -> [Int: Int] {
                    var seen: [Int: Int] = [:]
                    for line in hammock.lines where line.type == "ack" || line.type == "error" {
                        if let id = line.json["id"]?.numberValue?.intValue { seen[id, default: 0] += 1 }
                    }
                    return seen
                }
                while answered().count < count && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
                let seen = answered()
                #expect(seen.count == count, "\(count - seen.count) ids never answered")
                #expect(seen.values.allSatisfy { $0 == 1 }, "an id answered twice")
                #expect(server.requests(to: "/items").allSatisfy { Int($0.queryParameter("page") ?? "1")! <= 5 })
                try hammock.send(controlLine: #"{"op":"override","source":"list","content":"still here","id":"alive"}"#)
                try await hammock.waitFor(type: "ack") { $0.json["id"] == "alive" }
            }
        }
    }

    /// Review finding: a list whose first page answered 304 while a later one changed is new data, and its meta
    /// is the first page's last full answer's with the 304's over it (broken on purpose: no content type).
    @Test("a later page changed, the first answered 304: new data, with the first page's meta kept")
    func aLaterPageChanged() async throws {
        try await TestHTTPServer.with { server in
            let version = Mutex(1)
            let base = server.base
            server.route("/two") { request in
                let page = Int(request.queryParameter("page") ?? "1") ?? 1
                let etag = page == 1 ? "\"one\"" : "\"two-\(version.withLock { $0 })\""
                var headers = [("ETag", etag)]
                if page == 1 { headers.append(("Link", #"<\#(base)/two?page=2>; rel="next""#)) }
                if request.header("If-None-Match") == etag { return TestResponse(status: 304, headers: headers) }
                return .json(page == 1 ? "[1]" : "[\(version.withLock { $0 } * 10)]", headers: headers)
            }
            let config = """
                version: 1
                sources:
                  list: { kind: rest, url: "\(base)/two", paginate: { style: link, lazy: true }, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                try await hammock.nextAnswer("list")
                try hammock.send(controlLine: #"{"op":"more","source":"list","id":"m"}"#)
                #expect(try await hammock.nextAnswer("list").content == [1, 10])
                version.withLock { $0 = 2 }
                try hammock.send(controlLine: #"{"op":"load","source":"list"}"#)
                let changed = try await hammock.nextAnswer("list")
                #expect(changed.event == "newData")
                #expect(changed.content == [1, 20])
                #expect(changed[pointer: "/state/meta/contentType"] == "application/json", "\(changed.json)")
                #expect(changed[pointer: "/state/meta/pages"] == 2)
            }
        }
    }
}
