import HammockCore
import Testing

@testable import HammockEngine

/// `SocketWriter`'s log of published state lines, in memory.
@Suite("ChangeLog")
struct ChangeLogTests {
    private func line(_ id: String, _ value: Int) -> OutputLine {
        .source(id: SourceID(id), event: .newData(.number(.init(value)), origin: .push), state: SourceState(content: .number(.init(value))))
    }

    private func read(_ log: ChangeLog, after cursor: Int) -> [String] {
        var lines: [String] = []
        log.forEach(after: cursor) { line in
            if case .source(let id, _, let state) = line { lines.append("\(id.rawValue)=\(state.content?.description ?? "-")") }
            if case .removed(let id, _) = line { lines.append("removed \(id)") }
        }
        return lines
    }

    @Test("a reader gets the newest state of each id after its cursor, in the order of the newest changes")
    func newestAfterCursor() {
        var log = ChangeLog()
        log.append(line("a", 1))
        log.append(line("b", 1))
        let cursor = log.head
        log.append(line("a", 2))
        log.append(.removed(id: "c", what: "source"))
        log.append(line("c", 1))
        log.append(line("a", 3))
        #expect(read(log, after: 0) == ["b=1", "removed c", "c=1", "a=3"])
        #expect(read(log, after: cursor) == ["removed c", "c=1", "a=3"])
        #expect(read(log, after: log.head).isEmpty)
    }

    @Test("a million changes of 10 ids keep the log at about twice the ids, and read as the newest of each")
    func boundedByIDs() {
        var log = ChangeLog()
        for round in 0..<1_000_000 { log.append(line("s\(round % 10)", round)) }
        #expect(log.storedCount <= 2 * 10 + 33, "\(log.storedCount) entries")
        #expect(read(log, after: 0) == (999_990..<1_000_000).map { "s\($0 % 10)=\($0)" })
        log.removeAll()
        #expect(log.isEmpty && read(log, after: 0).isEmpty && log.head == 1_000_000)
    }
}
