import Foundation
import HammockJSON
import Testing

@testable import HammockEngine

/// Control lines on stdin, each test against its own engine, in memory (`EmbeddedEngine`): moved from
/// `HammockEndToEndTests/ControlTests.swift`, every assertion kept; the engine is the real loop and core, the
/// `fake` kind the built-in plugin, served in process as in hammock.
@Suite("Control lines, in memory")
struct EngineControlTests {
    // Delays of 150 ms and more, so that `requested` is written before the answer: while lines wait to be
    // written, a newer state of the same source replaces the older one.
    static let config = """
        version: 1
        sources:
          a: { kind: fake, content: { v: 1 }, delay: 200ms, retry: off }
          good: { kind: fake, content: ok, delay: 150ms }
          bad:
            kind: fake
            state: error
            error: { message: nope, httpStatus: 500 }
            delay: 150ms
            retry: off
          # Loading for the whole test, however long a busy machine makes it: not timed out at 10 s.
          stuck: { kind: fake, state: loading, timeout: 1h }
        views:
          page: { sources: [a] }
          pair: { sources: [good, bad], ready: any }
          waiting: { sources: [stuck] }
        """

    /// Runs `body` once every source has had its first answer.
    private func withSettledEngine(_ body: (EmbeddedEngine) async throws -> Void) async throws {
        try await EmbeddedEngine.run(Self.config) { hammock in
            try await hammock.waitUntil("a has data and pair shows bad's error") { lines in
                lines.contains { $0.id == "a" && $0.event == "newData" }
                    && lines.contains { $0.id == "pair" && $0["canTryAgain"] == true && $0.status == "data" }
            }
            _ = try await hammock.linesUntilQuiet(quiet: .milliseconds(200))
            hammock.skipLinesReadSoFar()
            try await body(hammock)
        }
    }

    @Test("load gives requested, with the stale content kept, then newData")
    func load() async throws {
        try await withSettledEngine { hammock in
            hammock.send(controlLine: #"{"op":"load","source":"a"}"#)
            let requested = try await hammock.waitFor(type: "source", id: "a")
            #expect(requested.event == "requested")
            #expect(requested.state?["isLoading"] == true)
            #expect(requested.state?["content"] == ["v": 1], "a load does not clear the content")
            let answer = try await hammock.waitFor(type: "source", id: "a")
            #expect(answer.event == "newData")
            #expect(answer.origin == "load")
            #expect(answer.state?["isLoading"] == false)
        }
    }

    @Test("load of a view loads each of its sources; loadIfNeeded skips fresh data")
    func loadViewAndLoadIfNeeded() async throws {
        try await withSettledEngine { hammock in
            let mark = hammock.lineCount
            hammock.send(controlLine: #"{"op":"loadIfNeeded","source":"a"}"#)
            hammock.send(controlLine: #"{"op":"load","view":"pair"}"#)
            try await hammock.waitUntil("bad and good have answered again") { lines in
                let since = lines.dropFirst(mark)
                return since.contains { $0.id == "bad" && $0.event == "error" && $0.state?["failures"] == 2 }
                    && since.contains { $0.id == "good" && $0.event == "newData" }
            }
            let requested = hammock.lines(since: mark).filter { $0.event == "requested" }.compactMap(\.id)
            #expect(requested.sorted() == ["bad", "good"], "a is fresh (expiration 30s), so loadIfNeeded does not load it")
        }
    }

    @Test("override sets the content with origin override, and the view follows")
    func override() async throws {
        try await withSettledEngine { hammock in
            hammock.send(controlLine: #"{"op":"override","source":"a","content":{"x":[1,2],"y":null}}"#)
            let line = try await hammock.waitFor(type: "source", id: "a")
            #expect(line.event == "newData")
            #expect(line.origin == "override")
            #expect(line.state?["content"] == ["x": [1, 2], "y": nil])
            #expect(line.state?["isLoading"] == false)
            let view = try await hammock.waitFor(type: "view", id: "page")
            #expect(view.status == "data")
            #expect(view["content"] == ["a": ["x": [1, 2], "y": nil]])
        }
    }

    @Test("wipe clears the content with origin wipe, and the view loses it")
    func wipe() async throws {
        try await withSettledEngine { hammock in
            hammock.send(controlLine: #"{"op":"wipe","source":"a"}"#)
            let line = try await hammock.waitFor(type: "source", id: "a")
            #expect(line.event == "newData")
            #expect(line.origin == "wipe")
            #expect(line.state?["content"] == .null)
            #expect(line.state?["latestError"] == .null)
            let view = try await hammock.waitFor(type: "view", id: "page")
            #expect(view["content"] == .null)
            #expect(view.status == "idle", "no data, not loading, no error: no rule of [allData, loading, error] matches")
        }
    }

    @Test("snapshot writes every source and view again, with their current states")
    func snapshot() async throws {
        try await withSettledEngine { hammock in
            let latest = Dictionary(hammock.lines.compactMap { line in line.id.map { ("\(line.type ?? ""):\($0)", line) } }) { _, new in new }
            let snapshot = try await settledSnapshot(of: hammock)
            #expect(snapshot.sources.count == 4)
            #expect(snapshot.views.count == 3)
            for (id, line) in snapshot.sources {
                #expect(line.state == latest["source:\(id)"]?.state, "\(id)")
                #expect(line.event == latest["source:\(id)"]?.event, "\(id)")
            }
            for (id, line) in snapshot.views {
                var expected = latest["view:\(id)"]?.json.objectValue
                var actual = line.json.objectValue
                expected?["seq"] = nil
                actual?["seq"] = nil
                #expect(actual == expected, "\(id)")
            }
            #expect(snapshot.sources["stuck"]?.state?["isLoading"] == true)
        }
    }

    @Test("retry on a view loads only its failing sources, even right after the error")
    func retryView() async throws {
        try await withSettledEngine { hammock in
            let mark = hammock.lineCount
            hammock.send(controlLine: #"{"op":"retry","view":"pair"}"#)
            let requested = try await hammock.waitFor(type: "source", id: "bad")
            #expect(requested.event == "requested")
            let again = try await hammock.waitFor(type: "source", id: "bad")
            #expect(again.event == "error")
            #expect(again.state?["failures"] == 2)
            _ = try await hammock.linesUntilQuiet(quiet: .milliseconds(200))
            let touched = Set(hammock.lines(since: mark).filter { $0.type == "source" }.compactMap(\.id))
            #expect(touched == ["bad"], "good has data and must not be loaded again")
        }
    }

    @Test("cancel on a loading source gives requestCancelled")
    func cancel() async throws {
        try await withSettledEngine { hammock in
            hammock.send(controlLine: #"{"op":"cancel","source":"stuck"}"#)
            let line = try await hammock.waitFor(type: "source", id: "stuck")
            #expect(line.event == "requestCancelled")
            #expect(line.state?["isLoading"] == false)
            #expect(line.state?["content"] == .null)
            #expect(line.state?["latestError"] == .null)
            let view = try await hammock.waitFor(type: "view", id: "waiting")
            #expect(view.status == "idle")
        }
    }

    @Test(
        "a bad control line gets an error line and the engine goes on",
        arguments: [
            ("this is not json", "JSON"),
            (#"{"op":"frobnicate","source":"a"}"#, "frobnicate"),
            (#"{"op":"load","source":"nope"}"#, "nope"),
            (#"{"op":"load","view":"nowhere"}"#, "nowhere"),
            (#"[1,2,3]"#, "object"),
            (#"{"op":"override","source":"a"}"#, "content"),
        ])
    func invalidLine(line: String, mentions: String) async throws {
        try await withSettledEngine { hammock in
            hammock.send(controlLine: line)
            let error = try await hammock.waitFor(type: "error")
            let message = try #require(error["message"]?.stringValue)
            #expect(message.contains(mentions), "\(message)")
            #expect(error.seq != nil)
            // The engine still obeys.
            hammock.send(controlLine: #"{"op":"load","source":"a"}"#)
            try await hammock.waitFor(type: "source", id: "a") { $0.event == "newData" }
            #expect(hammock.isRunning)
            let unexpected = hammock.lines.filter { $0.type == "error" || $0.type == "bye" }
            #expect(unexpected.count == 1, "exactly one error line: \(unexpected)")
        }
    }
}
