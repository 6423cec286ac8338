import Foundation
import HammockJSON
import HammockTestSupport
import Synchronization
import Testing

/// Issue 13: a control line with an `id` is answered with `{"type":"ack","id":…}` once carried out, after
/// every line it caused, or with an `error` line carrying the same id; a line without one, as before.
@Suite("Acknowledged control")
struct AcknowledgedControlTests {
    static let config = """
        version: 1
        sources:
          a: { kind: fake, content: { v: 1 }, delay: 200ms, retry: off }
          b: { kind: fake, content: 2 }
        views:
          both: { sources: [a, b] }
        """

    /// The index of the first line after `mark` that satisfies `predicate`.
    func index(in hammock: HammockProcess, after mark: Int, _ predicate: (HammockLine) -> Bool) -> Int? {
        hammock.lines(since: mark).firstIndex(where: predicate).map { $0 + mark }
    }

    func isAck(_ id: JSONValue) -> (HammockLine) -> Bool { { $0.type == "ack" && $0["id"] == id } }

    @Test("each op's ack follows the lines it caused; refused lines get an error with their id; no id, no ack")
    func everyOpIsAnswered() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let configPath = try HammockProcess.writeConfig(Self.config, in: folder)
        try await HammockProcess.withRunning(configPath: configPath) { hammock in
            try await hammock.waitUntil("both sources have data") { lines in
                lines.contains { $0.id == "a" && $0.event == "newData" } && lines.contains { $0.id == "b" && $0.event == "newData" }
            }

            var mark = hammock.lineCount
            try hammock.send(controlLine: #"{"op":"load","source":"a","id":1}"#)
            let loadAck = try await hammock.waitFor(type: "ack")
            #expect(loadAck["id"] == 1)
            let requested = try #require(index(in: hammock, after: mark) { $0.id == "a" && $0.event == "requested" })
            #expect(requested < index(in: hammock, after: mark, isAck(1))!, "the ack comes after the requested line")

            mark = hammock.lineCount
            try hammock.send(controlLine: #"{"op":"override","source":"b","content":[3],"id":"o-1"}"#)
            try await hammock.waitFor(type: "ack") { $0["id"] == "o-1" }
            let overridden = try #require(index(in: hammock, after: mark) { $0.id == "b" && $0.origin == "override" })
            #expect(overridden < index(in: hammock, after: mark, isAck("o-1"))!)

            mark = hammock.lineCount
            try hammock.send(controlLine: #"{"op":"snapshot","id":12345678901234567890.50}"#)
            let snapshotAck = try await hammock.waitFor(type: "ack")
            #expect(snapshotAck.text.contains(#""id":12345678901234567890.50}"#), "the number is echoed as written: \(snapshotAck.text)")
            let ackIndex = try #require(index(in: hammock, after: mark) { $0.type == "ack" })
            for id in ["a", "b", "both"] {
                #expect(index(in: hammock, after: mark) { $0.id == id }.map { $0 < ackIndex } == true, "\(id)'s snapshot line precedes the ack")
            }

            // Refused: the error carries the id, whatever made the line wrong.
            try hammock.send(controlLine: #"{"op":"load","source":"nope","id":"x"}"#)
            let unknown = try await hammock.waitFor(type: "error")
            #expect(unknown["id"] == "x")
            #expect(unknown["message"]?.stringValue?.hasPrefix(#"unknown source "nope""#) == true)
            try hammock.send(controlLine: #"{"op":"lod","source":"a","id":9}"#)
            let badOp = try await hammock.waitFor(type: "error")
            #expect(badOp["id"] == 9)
            try hammock.send(controlLine: #"{"op":"snapshot","id":true}"#)
            let badID = try await hammock.waitFor(type: "error")
            #expect(badID["id"] == nil)
            #expect(badID["message"]?.stringValue?.hasPrefix(#""id" must be a string or a number"#) == true)

            // Without an id: the same effect, and no ack.
            mark = hammock.lineCount
            try hammock.send(controlLine: #"{"op":"wipe","source":"b"}"#)
            try hammock.send(controlLine: #"{"op":"cancel","source":"b","id":"after"}"#)
            try await hammock.waitFor(type: "ack") { $0["id"] == "after" }
            #expect(hammock.lines(since: mark).filter { $0.type == "ack" }.count == 1)
            #expect(hammock.lines(since: mark).contains { $0.id == "b" && $0.origin == "wipe" })

            // A reload is answered once the new configuration is in force: after `removed` and `reloaded`.
            _ = try HammockProcess.writeConfig(
                """
                version: 1
                sources:
                  a: { kind: fake, content: { v: 1 }, delay: 200ms, retry: off }
                """, in: folder)
            mark = hammock.lineCount
            try hammock.send(controlLine: #"{"op":"reload","id":"r"}"#)
            try await hammock.waitFor(type: "ack", where: isAck("r"))
            let reloaded = try #require(index(in: hammock, after: mark) { $0.type == "reloaded" })
            let removed = try #require(index(in: hammock, after: mark) { $0.type == "removed" && $0.id == "b" })
            let reloadAck = try #require(index(in: hammock, after: mark, isAck("r")))
            #expect(removed < reloadAck && reloaded < reloadAck)

            // A refused reload answers its id with the reason, and the running configuration goes on.
            _ = try HammockProcess.writeConfig("version: 1\nsources:\n  a: { kind: fake, refresh: soon }\n", in: folder)
            try hammock.send(controlLine: #"{"op":"reload","id":"r2"}"#)
            let refused = try await hammock.waitFor(type: "error") { $0["id"] == "r2" }
            #expect(refused["message"]?.stringValue?.contains("reload failed") == true)
            try hammock.send(controlLine: #"{"op":"load","source":"a","id":"still"}"#)
            try await hammock.waitFor(type: "ack") { $0["id"] == "still" }
            #expect(hammock.malformedLines.isEmpty)
        }
    }

    /// Two ops on one source sent back to back while stdout is not read: the second's state replaces the
    /// first's in stdout's queue, and the first ack must still come after it (the client's
    /// "states the op caused are in place when the call returns" rests on this).
    @Test("an ack still follows its op's state when a newer state of the same source replaced it while waiting")
    func anAckFollowsTheNewestStateOfWhatItsOpChanged() async throws {
        try await HammockProcess.withRunning(config: Self.config) { hammock in
            try await hammock.waitUntil("both sources have data") { lines in
                lines.contains { $0.id == "a" && $0.event == "newData" } && lines.contains { $0.id == "b" && $0.event == "newData" }
            }
            _ = try await hammock.linesUntilQuiet(quiet: .milliseconds(300))
            for round in 0..<5 {
                let mark = hammock.lineCount
                hammock.pauseReading()
                try hammock.send(controlLine: #"{"op":"override","source":"b","content":\#(round),"id":"o\#(round)"}"#)
                try hammock.send(controlLine: #"{"op":"wipe","source":"b","id":"w\#(round)"}"#)
                try await Task.sleep(for: .milliseconds(300))
                hammock.resumeReading()
                try await hammock.waitFor(type: "ack", where: isAck(.string("w\(round)")))
                let lines = hammock.lines(since: mark)
                let overrideAck = try #require(lines.firstIndex(where: isAck(.string("o\(round)"))))
                #expect(
                    lines[..<overrideAck].contains { $0.id == "b" && $0.type == "source" },
                    "a state of b precedes the override's ack: \(lines.map(\.text))")
            }
        }
    }

    /// While a reload waits on a plugin (a `configure` it never answers, 5 s), reload lines with an id each
    /// pile up for the reload after it: at most 1,000 wait; the rest are refused at once, and every id is
    /// answered exactly once.
    @Test("reloads with an id waiting behind a running reload are bounded: 1,000 are acknowledged after it, the rest refused")
    func reloadAnswersWaitingAreBounded() async throws {
        let before = ContainmentTests.fixtureConfig(
            mode: "skip-configure", sources: "  tick: { kind: fake, content: 1 }")
        let after = ContainmentTests.fixtureConfig(
            mode: "skip-configure", sources: "  tick: { kind: fake, content: 1 }\n  stuck: { kind: test }")
        try await HammockProcess.withRunning(config: before) { hammock in
            try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }
            try Data(after.utf8).write(to: URL(fileURLWithPath: hammock.configPath))
            try hammock.send(controlLine: #"{"op":"reload"}"#)
            // Once the reload has started the test plugin, it waits up to 5 s for its answer to `configure`.
            // Sent before, the flood would coalesce with this reload line and wait for nothing.
            let started = try await ProcessTable.eventually(within: .seconds(20)) {
                ProcessTable.descendants(of: hammock.pid).contains { process in
                    process.arguments.contains { $0.hasSuffix("misbehaving-plugin.py") }
                }
            }
            #expect(started, "the reload started the test plugin")
            let sent = 1_100
            let lines = (0..<sent).map { #"{"op":"reload","id":"r\#($0)"}"# + "\n" }.joined()
            #expect(hammock.send(bytes: Array(lines.utf8)))
            try await hammock.waitUntil("every reload line is answered", timeout: .seconds(30)) { lines in
                lines.filter { ["ack", "error"].contains($0.type ?? "") && $0["id"] != nil }.count >= sent
            }
            let answers = hammock.lines.filter { ["ack", "error"].contains($0.type ?? "") && $0["id"] != nil }
            #expect(answers.count == sent, "each id answered once")
            #expect(Set(answers.compactMap { $0["id"]?.stringValue }).count == sent)
            let refused = answers.filter { $0.type == "error" }
            #expect(refused.count == sent - 1_000, "\(refused.first?.text ?? "")")
            #expect(refused.allSatisfy { $0["message"]?.stringValue?.hasPrefix("reload refused: 1000 reload requests already wait") == true })
            let reloaded = try #require(hammock.lines.lastIndex { $0.type == "reloaded" })
            #expect(
                hammock.lines.indices.filter { hammock.lines[$0].type == "ack" }.allSatisfy { $0 > reloaded },
                "the waiting reloads are acknowledged after a reload that began after them")
        }
    }

    /// A consumer that floods one command, each line with a new id, while not reading stdout: every id is
    /// answered once, in the order sent, when it reads again.
    @Test("a flood of ids while stdout is not read: every id is acknowledged exactly once, in order")
    func floodOfIdsIsAnsweredInOrder() async throws {
        let count = 30_000
        try await HammockProcess.withRunning(config: Self.config) { hammock in
            try await hammock.waitFor(type: "source", id: "b") { $0.event == "newData" }
            hammock.pauseReading()
            var text = ""
            for index in 0..<count { text += #"{"op":"loadIfNeeded","source":"b","id":\#(index)}"# + "\n" }
            let bytes = Array(text.utf8)
            let written = Mutex<Bool?>(nil)
            let writer = Thread { written.withLock { $0 = hammock.send(bytes: bytes) } }
            writer.start()
            try await Task.sleep(for: .milliseconds(300))
            #expect(hammock.isRunning)
            hammock.resumeReading()
            try await hammock.waitFor(type: "ack", timeout: .seconds(60)) { $0["id"] == .number(JSONNumber(count - 1)) }
            #expect(written.withLock { $0 } == true)
            let acked = hammock.lines.filter { $0.type == "ack" }.compactMap { line -> Int? in
                if case .number(let id)? = line["id"] { Int(id.description) } else { nil }
            }
            #expect(acked == Array(0..<count))
        }
    }
}
