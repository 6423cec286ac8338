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
