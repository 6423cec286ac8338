import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// Source states as read from the real executable's stdout, with the plugin's real delays and wall-clock
/// timestamps. `hello`, `seq` and views are tested in memory (`HammockEngineTests/EngineOutputTests`).
@Suite("Output lines")
struct OutputTests {
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
