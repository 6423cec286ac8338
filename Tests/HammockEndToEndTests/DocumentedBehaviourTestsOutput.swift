import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// docs/protocol.md, "A slow consumer" and "Control": what a consumer that stops reading, or asks for a
/// retry of one source, is promised.
@Suite("Documented behaviour: output and control lines")
struct DocumentedBehaviourOutputTests {
    /// "`error` lines beyond 1,000 waiting are dropped and counted in one `error` line."
    @Test("error lines beyond 1,000 waiting for a consumer that does not read are dropped and counted in one error line")
    func errorLinesBeyondAThousandAreCounted() async throws {
        let config = """
            version: 1
            sources:
              a: { kind: fake, content: 1 }
            """
        try await HammockProcess.withRunning(config: config) { hammock in
            try await hammock.waitFor(type: "source", id: "a") { $0.event == "newData" }
            let mark = hammock.lineCount
            hammock.pauseReading()

            // Each bad line gets an error line of about 130 bytes: 10,000 of them are 1.3 MB, far more than a
            // pipe holds (64 KiB) plus the 1,000 that may wait.
            let sent = 10_000
            let flood = Array(String(repeating: #"{"op":"nope"}"# + "\n", count: sent).utf8)
            // 140 KB do not fit stdin's pipe: the write waits for hammock to read, on a thread of its own, not
            // on one of the cooperative pool's.
            let taken = try await onOwnThread("the write of 10,000 bad lines to stdin", timeout: .seconds(20)) { hammock.send(bytes: flood) }
            #expect(taken, "hammock reads its stdin while its stdout is not read")
            // Every bad line must have been read (and answered or dropped) before reading resumes, so that the
            // lines that waited can be told from those that came later.
            let drained = try await Documented.eventually(within: .seconds(20)) { Self.unreadStdinBytes(of: hammock.pid) == 0 }
            #expect(drained, "hammock read all of its stdin")
            try await Task.sleep(for: .seconds(1.5))
            hammock.resumeReading()

            try await hammock.waitUntil("every bad line is answered or counted", timeout: .seconds(20)) { lines in
                Self.tally(lines.dropFirst(mark)).total >= sent
            }
            let tally = Self.tally(hammock.lines(since: mark))
            #expect(tally.total == sent, "each bad line gets an error line or is counted, exactly once: \(tally)")
            #expect(tally.dropped > 0, "with 10,000 bad lines and nobody reading, some were dropped: \(tally)")
            // Each time lines were dropped, one line counts them, ahead of the lines that waited meanwhile. (A
            // writer thread slow to start may drop some early too, so there can be more than one.) The last
            // count is followed by the lines that waited while nobody read: exactly 1,000 of them.
            #expect(tally.countLines.count <= 3, "\(tally.countLines.map(\.text))")
            #expect(tally.answeredAfterLastCount == 1000, "\(tally)")
            #expect(hammock.isRunning)
        }
    }

    struct Tally: CustomStringConvertible {
        var answered = 0
        var dropped = 0
        var countLines: [HammockLine] = []
        var answeredAfterLastCount = 0
        var total: Int { answered + dropped }
        var description: String {
            "\(answered) error lines answered bad lines (\(answeredAfterLastCount) after the last count), "
                + "\(dropped) counted as dropped in \(countLines.count) lines"
        }
    }

    /// Error lines that answer the bad control line, and the lines that count dropped ones.
    static func tally(_ lines: some Sequence<HammockLine>) -> Tally {
        var tally = Tally()
        for line in lines where line.type == "error" {
            let message = line["message"]?.stringValue ?? ""
            if message.hasPrefix("unknown op \"nope\"") {
                tally.answered += 1
                if !tally.countLines.isEmpty { tally.answeredAfterLastCount += 1 }
            } else if let count = Int(message.prefix { $0.isNumber }), message.contains("dropped") {
                tally.dropped += count
                tally.countLines.append(line)
                tally.answeredAfterLastCount = 0
            }
        }
        return tally
    }

    /// Bytes written to `pid`'s stdin (a pipe) that it has not read yet, looked at through /proc.
    static func unreadStdinBytes(of pid: Int32) -> Int {
        let descriptor = open("/proc/\(pid)/fd/0", O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        var count: Int32 = 0
        return ioctl(descriptor, UInt(FIONREAD), &count) == 0 ? Int(count) : 0
    }
}
