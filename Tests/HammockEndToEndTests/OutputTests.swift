import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// `hello`, `seq`, source states and views, as read from the real executable's stdout.
@Suite("Output lines")
struct OutputTests {
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
        try await HammockProcess.withRunning(config: config) { hammock in
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
            try hammock.send(controlLine: #"{"op":"snapshot"}"#)
            try hammock.send(controlLine: "not json")
            try await hammock.waitFor(type: "error")
            hammock.signal(SIGTERM)
            try await hammock.waitFor(type: "bye")
            #expect(try await hammock.waitForExit() == .exited(0))

            let lines = hammock.lines
            #expect(lines.count >= 15, "hello, 6 source lines, views, a snapshot of 5, an error, bye")
            #expect(lines.map(\.seq) == lines.indices.map { $0 + 1 }, "seq must count 1, 2, 3, ... over every line")
            #expect(lines.last?.type == "bye")
            #expect(lines.allSatisfy { $0.type != nil }, "every line has a type")
            #expect(lines.dropFirst().allSatisfy { $0.type != "hello" }, "hello is written once")
        }
    }

    @Test("fake sources: data, error with httpStatus, and delay give the states of Siesta's table")
    func fakeSourceStates() async throws {
        let config = """
            version: 1
            sources:
              good:
                kind: fake
                content: { n: 1, list: [a, b] }
                delay: 150ms
              bad:
                kind: fake
                state: error
                error: { message: "upstream is down", httpStatus: 503 }
                delay: 300ms
                retry: off
              slow:
                kind: fake
                content: late
                delay: 900ms
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            let launched = Date()
            // slow answers last; then look at every source's lines, whatever order good and bad came in.
            let slowData = try await hammock.waitFor(type: "source", id: "slow") { $0.event == "newData" }
            _ = try await hammock.linesUntilQuiet()
            let all = hammock.lines
            func lines(of id: String) -> [HammockLine] { all.filter { $0.id == id } }
            for id in ["good", "bad", "slow"] {
                // requested, then exactly one answer (retry is off, no refresh).
                let events = lines(of: id).map(\.event)
                #expect(events == ["requested", id == "bad" ? "error" : "newData"], "\(id): \(events)")
            }

            let goodRequested = try #require(lines(of: "good").first)
            #expect(goodRequested.state == [
                "content": nil, "latestError": nil, "isLoading": true, "timestamp": nil, "failures": 0,
            ])

            let goodData = try #require(lines(of: "good").last)
            #expect(goodData.origin == "load")
            #expect(goodData.state?["content"] == ["n": 1, "list": ["a", "b"]])
            #expect(goodData.state?["latestError"] == .null)
            #expect(goodData.state?["isLoading"] == false)
            #expect(goodData.state?["failures"] == 0)
            let timestamp = try #require(goodData.state?["timestamp"]?.stringValue)
            #expect(timestamp.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "RFC 3339 with ms: \(timestamp)")
            let loadedAt = try #require(parseTimestamp(timestamp))
            // Within the run, on the wall clock: not a placeholder, not the time of some other event.
            #expect(loadedAt >= launched.addingTimeInterval(-1) && loadedAt <= Date(), "the timestamp is the time of the load")

            let badError = try #require(lines(of: "bad").last)
            #expect(badError.origin == nil)
            #expect(badError.state?["latestError"] == ["message": "upstream is down", "httpStatus": 503])
            #expect(badError.state?["content"] == .null)
            #expect(badError.state?["isLoading"] == false)
            #expect(badError.state?["failures"] == 1)
            #expect(badError.state?["timestamp"]?.stringValue != nil, "an error sets the timestamp")

            #expect(slowData.state?["content"] == "late")
            let slowRequested = try #require(lines(of: "slow").first)
            let waited = slowData.receivedAt - slowRequested.receivedAt
            #expect(waited >= .milliseconds(750), "delay: 900ms, but the data came after \(waited)")
            let slowTimestamp = try #require(slowData.state?["timestamp"]?.stringValue.flatMap(parseTimestamp))
            #expect(slowTimestamp > loadedAt, "slow's data (900 ms) is younger than good's (150 ms)")
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
        try await HammockProcess.withRunning(config: config) { hammock in
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
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitFor(type: "view", id: "unrelated") { $0.status == "data" }
            try hammock.send(controlLine: #"{"op":"cancel","source":"stuck"}"#)
            let idle = try await hammock.waitFor(type: "view", id: "waiting") { $0.status != "loading" }
            #expect(idle.status == "idle")
            #expect(idle["content"] == .null)
            _ = try await hammock.linesUntilQuiet()
            let viewLines = hammock.lines.filter { $0.type == "view" }.map { "\($0.id ?? "") \($0.status ?? "")" }
            #expect(viewLines == ["waiting loading", "unrelated loading", "unrelated data", "waiting idle"])
        }
    }
}

/// Sends `snapshot` once the engine is quiet and returns the re-emitted states, by id, checking that every
/// source and view comes back, sources first, each in file order.
func settledSnapshot(
    of hammock: HammockProcess, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> (sources: [String: HammockLine], views: [String: HammockLine]) {
    let hello = try #require(hammock.lines.first { $0.type == "hello" }, sourceLocation: sourceLocation)
    let sourceIDs = (hello["sources"]?.arrayValue ?? []).compactMap(\.stringValue)
    let viewIDs = (hello["views"]?.arrayValue ?? []).compactMap(\.stringValue)
    _ = try await hammock.linesUntilQuiet()
    hammock.skipLinesReadSoFar()
    let mark = hammock.lineCount
    try hammock.send(controlLine: #"{"op":"snapshot"}"#, sourceLocation: sourceLocation)
    var sources: [String: HammockLine] = [:]
    var views: [String: HammockLine] = [:]
    for id in sourceIDs {
        sources[id] = try await hammock.waitFor(type: "source", id: id, sourceLocation: sourceLocation)
    }
    for id in viewIDs {
        views[id] = try await hammock.waitFor(type: "view", id: id, sourceLocation: sourceLocation)
    }
    let order = hammock.lines(since: mark).prefix(sourceIDs.count + viewIDs.count).map { $0.id ?? "?" }
    #expect(order == sourceIDs + viewIDs, "a snapshot writes every source, then every view", sourceLocation: sourceLocation)
    return (sources, views)
}

/// Parses the engine's RFC 3339 timestamps (`2026-11-22T10:00:00.123Z`).
func parseTimestamp(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.date(from: text)
}
