import Foundation
import HammockCore
import HammockJSON
import HammockProtocol
import HammockSystem
import Synchronization
import Testing

@testable import HammockEngine

/// stdin's control lines, from bytes to what the engine loop takes, in memory.
@Suite(.timeLimit(.minutes(1)))
struct ControlMailboxTests {
    @Test("a flood of overrides of one source waits as one command, the newest, and announces itself once")
    func overrideFloodCoalesces() {
        let mailbox = ControlMailbox()
        var announcements = 0
        for index in 0..<5000 {
            if mailbox.receive(.line(Array(#"{"op":"override","source":"a","content":\#(index)}"#.utf8))) {
                announcements += 1
            }
        }
        #expect(announcements == 1)
        let taken = mailbox.take()
        #expect(taken.count == 1)
        guard case .command(.override("a", let content), _)? = taken.first else {
            Issue.record("expected the newest override, got \(taken)")
            return
        }
        #expect(content == .number(4999))
        // Taken: the next line announces itself again.
        #expect(mailbox.receive(.line(Array(#"{"op":"snapshot"}"#.utf8))))
    }

    @Test("a command moves behind those that came after the one it replaces; other sources keep their order")
    func coalescingKeepsOrder() {
        let mailbox = ControlMailbox()
        for line in [
            #"{"op":"override","source":"a","content":1}"#, #"{"op":"load","source":"b"}"#,
            #"{"op":"override","source":"a","content":2}"#, #"{"op":"override","source":"c","content":3}"#,
        ] {
            _ = mailbox.receive(.line(Array(line.utf8)))
        }
        let commands = mailbox.take().compactMap { entry -> ControlCommand? in
            if case .command(let command, _) = entry { command } else { nil }
        }
        #expect(commands == [.load(.source("b")), .override(source: "a", content: 2), .override(source: "c", content: 3)])
    }

    @Test("invalid JSON, a non-object and an unknown op each give one error entry, in order with the commands")
    func invalidLines() {
        let mailbox = ControlMailbox()
        for line in [#"{"op":"load","#, "[1,2]", #"{"op":"explode"}"#, #"{"op":"snapshot"}"#] {
            _ = mailbox.receive(.line(Array(line.utf8)))
        }
        let entries = mailbox.take()
        #expect(entries.count == 4)
        let messages = entries.compactMap { entry -> String? in if case .invalid(let message, _) = entry { message } else { nil } }
        #expect(messages.count == 3)
        #expect(messages[0].hasPrefix("control line is not valid JSON"))
        #expect(messages[1].contains("must be a JSON object"))
        #expect(messages[2].contains("explode"))
        guard case .command(.snapshot, _) = entries[3] else {
            Issue.record("expected the snapshot last, got \(entries[3])")
            return
        }
    }

    @Test("a line over the limit is refused with its length, and the lines around it still count")
    func overLongLine() throws {
        let mailbox = ControlMailbox()
        var splitter = LineSplitter(maximumLineLength: ControlMailbox.maximumLineLength)
        let long = #"{"op":"override","source":"a","content":""# + String(repeating: "x", count: 2 << 20) + "\"}\n"
        let input = #"{"op":"load","source":"a"}"# + "\n" + long + #"{"op":"snapshot"}"# + "\n"
        let bytes = Array(input.utf8)
        // Fed in pieces, as reads of a pipe come.
        for start in stride(from: 0, to: bytes.count, by: 65536) {
            bytes[start..<min(start + 65536, bytes.count)].withUnsafeBytes { piece in
                splitter.feed(piece) { piece in
                    switch piece {
                    case .line(let line): _ = mailbox.receive(.line(line))
                    case .tooLong(let length, _): _ = mailbox.receive(.tooLong(length))
                    }
                }
            }
        }
        let entries = mailbox.take()
        #expect(entries.count == 3)
        guard entries.count == 3, case .invalid(let message, _) = entries[1] else {
            Issue.record("expected load, the refusal, snapshot; got \(entries)")
            return
        }
        #expect(message == "control line of \(long.utf8.count - 1) bytes is longer than the limit of \(ControlMailbox.maximumLineLength) bytes; ignored")
    }

    @Test("commands that coalesce keep every id, oldest first, and a bad line keeps its own")
    func coalescedCommandsKeepEveryID() {
        let mailbox = ControlMailbox()
        for line in [
            #"{"op":"load","source":"a","id":1}"#, #"{"op":"load","source":"a"}"#, #"{"op":"snapshot","id":"s"}"#,
            #"{"op":"load","source":"a","id":"two"}"#, #"{"op":"lod","source":"a","id":3}"#,
        ] {
            _ = mailbox.receive(.line(Array(line.utf8)))
        }
        let taken = mailbox.take()
        guard taken.count == 3, case .command(.snapshot, let snapshotIDs) = taken[0],
            case .command(.load(.source("a")), let loadIDs) = taken[1], case .invalid(let message, let badID) = taken[2]
        else {
            Issue.record("unexpected entries \(taken)")
            return
        }
        #expect(snapshotIDs == [.string("s")])
        #expect(loadIDs == [.number(1), .string("two")])
        #expect(message.hasPrefix(#"unknown op "lod""#))
        #expect(badID == .number(3))
    }

    @Test("a flood of one command with a new id each is bounded: the ids it carries count against the mailbox's bytes")
    func idsCountAgainstTheBound() async throws {
        let mailbox = ControlMailbox()
        let delivered = Mutex(0)
        let reader = Task {
            await OwnThread.run(named: "test.stdin") {
                for index in 0..<150_000 {
                    let id = String(repeating: "i", count: 80) + String(index)
                    _ = mailbox.receive(.line(Array(#"{"op":"load","source":"a","id":"\#(id)"}"#.utf8)))
                    delivered.withLock { $0 += 1 }
                }
            }
        }
        // The ids alone would be ~13 MiB: the reader must wait well before that.
        var stalledAt = -1
        while stalledAt != delivered.withLock({ $0 }) {
            stalledAt = delivered.withLock { $0 }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(stalledAt < 150_000)
        // Each id costs at least 32 bytes and its text.
        #expect(stalledAt * 100 <= ControlMailbox.maximumBytes)
        var ids = 0
        while ids < 150_000 {
            for entry in mailbox.take() { if case .command(_, let taken) = entry { ids += taken.count } }
            if ids < 150_000 { try await Task.sleep(for: .milliseconds(5)) }
        }
        await reader.value
        #expect(ids == 150_000)
    }

    @Test("a full mailbox makes the reader wait until the engine takes, and drops nothing")
    func fullMailboxMakesTheReaderWait() async throws {
        let mailbox = ControlMailbox()
        for index in 0..<ControlMailbox.maximumEntries {
            _ = mailbox.receive(.line(Array(#"{"op":"load","source":"s\#(index)"}"#.utf8)))
        }
        let delivered = Mutex(false)
        let reader = Task {
            await OwnThread.run(named: "test.stdin") {
                _ = mailbox.receive(.line(Array(#"{"op":"snapshot"}"#.utf8)))
                delivered.withLock { $0 = true }
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(!delivered.withLock { $0 })
        #expect(mailbox.take().count == ControlMailbox.maximumEntries)
        await reader.value
        let rest = mailbox.take()
        #expect(rest.count == 1)
    }

    @Test("closing the mailbox lets a waiting reader go, and what it held is dropped")
    func closeReleasesTheReader() async {
        let mailbox = ControlMailbox()
        for index in 0..<ControlMailbox.maximumEntries {
            _ = mailbox.receive(.line(Array(#"{"op":"load","source":"s\#(index)"}"#.utf8)))
        }
        let reader = Task {
            await OwnThread.run(named: "test.stdin") { mailbox.receive(.line(Array(#"{"op":"snapshot"}"#.utf8))) }
        }
        mailbox.close()
        #expect(await reader.value == false)
        #expect(mailbox.take().isEmpty)
    }

    @Test("stdin read from a pipe: lines become commands, a flood waits bounded, and the end of input is no stop")
    func readFromAPipe() async throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        let mailbox = ControlMailbox()
        let announced = Mutex(0)
        LineReader.start(descriptor: ends[0], maximumLineLength: ControlMailbox.maximumLineLength, name: "test.stdin") {
            if mailbox.receive($0) { announced.withLock { $0 += 1 } }
        }
        var text = ""
        for index in 0..<20_000 { text += #"{"op":"override","source":"a","content":\#(index)}"# + "\n" }
        text += "not json\n"
        let bytes = Array(text.utf8)
        let writeEnd = ends[1]
        await OwnThread.run(named: "test.writer") {
            _ = bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(writeEnd, buffer.baseAddress! + offset, buffer.count - offset)
                    if written <= 0 { return false }
                    offset += written
                }
                return true
            }
            close(writeEnd)
        }
        var entries: [ControlMailbox.Entry] = []
        try await waitFor("the invalid line") {
            entries += mailbox.take()
            return entries.contains { if case .invalid = $0 { true } else { false } }
        }
        #expect(entries.count < 20_000)
        let last = entries.last { if case .command = $0 { true } else { false } }
        guard case .command(.override("a", let content), _)? = last else {
            Issue.record("expected an override last, got \(String(describing: last))")
            return
        }
        #expect(content == .number(19_999))
        // ends[0] stays open: the reader thread may still be about to read its end of input.
    }

    @Test("stdin's reader ends when its owner asks, though stdin stays open, and says end of input")
    func readerStopsWhenAsked() async {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        let stopping = WakeupPipe()
        let events = Counter()
        let reading = Task { [ends] in
            await OwnThread.run(named: "test.stdin") {
                LineReader.read(descriptor: ends[0], maximumLineLength: 100, stopDescriptor: stopping.readEnd) { event in
                    if case .end = event { events.add() }
                }
            }
        }
        stopping.wake()
        await reading.value
        #expect(events.value == 1)
        close(ends[0])
        close(ends[1])
    }
}
