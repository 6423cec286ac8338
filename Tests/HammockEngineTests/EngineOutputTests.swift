import Foundation
import HammockJSON
import Testing

@testable import HammockEngine

/// `hello`, `seq`, source states and views, read from an engine in memory (`EmbeddedEngine`): moved from
/// `HammockEndToEndTests/OutputTests.swift`, every assertion kept. (`fakeSourceStates` stays there: it
/// measures the plugin's delays and the wall-clock timestamps of a real run.)
@Suite("Output lines, in memory")
struct EngineOutputTests {
    @Test("hello comes first, with protocol 1 and the sources and views in file order; seq is 1, 2, 3, ...")
    func helloAndSequence() async throws {
        let config = """
            version: 1
            sources:
              zulu: { kind: fake, content: 1, delay: 50ms }
              alpha: { kind: fake, state: error, error: broken, delay: 80ms, retry: off }
              mike: { kind: fake, content: [1, 2], delay: 20ms }
            views:
              yankee: { sources: [zulu, mike] }
              bravo: { sources: [alpha], ready: any }
            """
        try await EmbeddedEngine.run(config) { hammock in
            let hello = try await hammock.nextLine(where: { _ in true })
            #expect(hello.type == "hello")
            #expect(hello["protocol"] == 1)
            #expect(hello["version"] == "0.1.0")
            #expect(hello["sources"] == ["zulu", "alpha", "mike"])
            #expect(hello["views"] == ["yankee", "bravo"])

            try await hammock.waitUntil("yankee has data and alpha has failed") { lines in
                lines.contains { $0.id == "yankee" && $0.status == "data" }
                    && lines.contains { $0.id == "alpha" && $0.event == "error" }
            }
            hammock.send(controlLine: #"{"op":"snapshot"}"#)
            hammock.send(controlLine: "not json")
            try await hammock.waitFor(type: "error")
            hammock.stop(signal: SIGTERM)
            try await hammock.waitFor(type: "bye")
            #expect(try await hammock.waitForExit() == 0)

            let lines = hammock.lines
            #expect(lines.count >= 15, "hello, 6 source lines, views, a snapshot of 5, an error, bye")
            #expect(lines.map(\.seq) == lines.indices.map { $0 + 1 }, "seq must count 1, 2, 3, ... over every line")
            #expect(lines.last?.type == "bye")
            #expect(lines.allSatisfy { $0.type != nil }, "every line has a type")
            #expect(lines.dropFirst().allSatisfy { $0.type != "hello" }, "hello is written once")
        }
    }

    @Test("views: ready all and any, the default rules and the presets give status and content")
    func viewStatusAndContent() async throws {
        let config = """
            version: 1
            sources:
              good: { kind: fake, content: { n: 1 }, delay: 150ms }
              bad:
                kind: fake
                state: error
                error: { message: "upstream is down", httpStatus: 503 }
                delay: 200ms
                retry: off
              slow: { kind: fake, content: late, delay: 700ms }
            views:
              both: { sources: [good, slow], ready: all }
              either: { sources: [good, bad, slow], ready: any }
              standardPair: { sources: [good, bad], display: standard }
              overlayPair: { sources: [good, bad], display: overlay }
              defaultPair: { sources: [good, bad] }
              quiet: { sources: [bad], display: noError }
              anyDefault: { sources: [bad, slow], ready: any }
            """
        try await EmbeddedEngine.run(config) { hammock in
            // At the start every view is loading, with no content.
            for id in ["both", "either", "standardPair", "overlayPair", "defaultPair", "quiet", "anyDefault"] {
                let first = try await hammock.waitFor(type: "view", id: id)
                #expect(first.status == "loading", "\(id): \(first)")
                #expect(first["content"] == .null, "\(id): \(first)")
            }

            // Between good's data and slow's: `all` waits, `any` shows what it has.
            try await hammock.waitFor(type: "source", id: "slow") { $0.event == "newData" }
            let beforeSlow = hammock.lines.prefix { !($0.id == "slow" && $0.event == "newData") }
            let bothWhileSlow = try #require(beforeSlow.last { $0.id == "both" })
            #expect(bothWhileSlow.status == "loading")
            #expect(bothWhileSlow["content"] == .null, "ready: all has no content until every source has")
            let eitherWhileSlow = try #require(beforeSlow.last { $0.id == "either" })
            #expect(eitherWhileSlow.status == "data", "ready: any, default rules: anyData comes first")
            #expect(eitherWhileSlow["content"] == ["good": ["n": 1], "bad": nil, "slow": nil])

            let views = try await settledSnapshot(of: hammock).views
            let badError: JSONValue = ["message": "upstream is down", "httpStatus": 503]

            let both = try #require(views["both"])
            #expect(both.status == "data")
            #expect(both["content"] == ["good": ["n": 1], "slow": "late"])
            #expect(both["errors"] == [:])
            #expect(both["latestError"] == .null)
            #expect(both["canTryAgain"] == false)

            let either = try #require(views["either"])
            #expect(either.status == "data")
            #expect(either["content"] == ["good": ["n": 1], "bad": nil, "slow": "late"])
            #expect(either["latestError"] == badError)
            #expect(either["errors"] == ["bad": badError])
            #expect(either["canTryAgain"] == true)

            // standard = [anyData, loading, error]: stale data beats the error, but a data rule needs the
            // view's content, and with ready: all and bad without content there is none: the error shows.
            let standard = try #require(views["standardPair"])
            #expect(standard.status == "error")
            #expect(standard["content"] == .null, "ready: all, and bad has no content")
            #expect(standard["errors"] == ["bad": badError])
            // overlay = [loading, error, anyData]: the error wins.
            #expect(views["overlayPair"]?.status == "error")
            // The default for ready: all is [allData, loading, error].
            let pair = try #require(views["defaultPair"])
            #expect(pair.status == "error")
            #expect(pair["latestError"] == badError)
            // noError = [loading, alwaysData]: no content, so not data (data always has content), and no error.
            #expect(views["quiet"]?.status == "idle")
            #expect(views["quiet"]?["content"] == .null)
            // ready: any with only a failed source and a data one: data.
            #expect(views["anyDefault"]?.status == "data")
            #expect(views["anyDefault"]?["content"] == ["bad": nil, "slow": "late"])
        }
    }

    @Test("a view shows idle when no rule matches, and a view line is written only when it changes")
    func idleViewAndNoDuplicates() async throws {
        let config = """
            version: 1
            sources:
              stuck: { kind: fake, state: loading }
              other: { kind: fake, content: 1, delay: 300ms }
            views:
              waiting: { sources: [stuck] }
              unrelated: { sources: [other] }
            """
        try await EmbeddedEngine.run(config) { hammock in
            try await hammock.waitFor(type: "view", id: "unrelated") { $0.status == "data" }
            hammock.send(controlLine: #"{"op":"cancel","source":"stuck"}"#)
            let idle = try await hammock.waitFor(type: "view", id: "waiting") { $0.status != "loading" }
            #expect(idle.status == "idle")
            #expect(idle["content"] == .null)
            _ = try await hammock.linesUntilQuiet()
            let viewLines = hammock.lines.filter { $0.type == "view" }.map { "\($0.id ?? "") \($0.status ?? "")" }
            #expect(viewLines == ["waiting loading", "unrelated loading", "unrelated data", "waiting idle"])
        }
    }
}
