import HammockCore
import Testing

@testable import HammockEngine

/// The engine-wide numbers of the HTTP door's lines (`EventJournal`): what a resumed event stream is sent
/// rests on them.
@Suite("EventJournal")
struct EventJournalTests {
    static let started = Timestamp(millisecondsSince1970: 1_800_000_000_000)

    static func source(_ id: String, _ content: Int) -> OutputLine {
        var state = SourceState()
        state.content = .number(.init(content))
        return .source(id: SourceID(id), event: .newData(.number(.init(content)), origin: .load), state: state)
    }

    @Test("numbers start at the start time in microseconds; each state line takes the next, answers none")
    func numbering() {
        var journal = EventJournal(startedAt: Self.started)
        #expect(journal.base == 1_800_000_000_000_000 && journal.head == journal.base)
        let turn = [Self.source("a", 1), .ack(id: .number(1)), Self.source("b", 2)]
        journal.record(turn)
        #expect(journal.head == journal.base + 2)
        // A consumer's share of the turn: its lines' own numbers; an answer carries the head.
        #expect(journal.numbers(for: turn, ofTurn: true) == [journal.base + 1, journal.base + 2, journal.base + 2])
        #expect(journal.numbers(for: [Self.source("b", 2)], ofTurn: true) == [journal.base + 2])
    }

    /// Broken on purpose (every line of an id numbered with its newest), the first of a's two lines here
    /// carried the second's number, and a stream cut between them would have resumed past the view.
    @Test("an id that changes twice in a turn: each of its lines keeps its own number, in order")
    func twiceInATurn() {
        var journal = EventJournal(startedAt: Self.started)
        let turn = [Self.source("a", 1), .view(id: "v", state: ViewState(status: .idle, content: .null)), Self.source("a", 2)]
        journal.record(turn)
        let base = journal.base
        #expect(journal.numbers(for: turn, ofTurn: true) == [base + 1, base + 2, base + 3])
        #expect(journal.numbers(for: [Self.source("a", 1), Self.source("a", 2)], ofTurn: true) == [base + 1, base + 3])
    }

    @Test("a snapshot's lines carry their ids' newest numbers; one never changed carries the base")
    func snapshotNumbers() {
        var journal = EventJournal(startedAt: Self.started)
        journal.record([Self.source("a", 1)])
        journal.record([Self.source("a", 2)])
        let snapshot = [Self.source("a", 2), Self.source("b", 0)]
        #expect(journal.numbers(for: snapshot, ofTurn: false) == [journal.base + 2, journal.base])
    }

    /// Broken on purpose (the snapshot sent whole on a resume), the stream that came back after 2 read a
    /// again.
    @Test("resuming after N: only the ids whose newest line came after N, and the removals since, led by them")
    func resume() {
        var journal = EventJournal(startedAt: Self.started)
        let base = journal.base
        journal.record([Self.source("a", 1), Self.source("b", 1), Self.source("c", 1)])
        journal.record([Self.source("b", 2)])
        journal.record([.removed(id: "c", what: "source")])
        let snapshot = [Self.source("a", 1), Self.source("b", 2)]
        let changed = journal.changes(after: base + 3, in: snapshot)
        #expect(changed.map(\.subjectID) == ["c", "b"])
        #expect(changed.first.map { if case .removed = $0 { true } else { false } } == true)
        #expect(journal.changes(after: base + 5, in: snapshot).isEmpty)
        // A source removed, then back: its new state, not its removal.
        journal.record([Self.source("c", 9)])
        #expect(journal.changes(after: base + 3, in: snapshot + [Self.source("c", 9)]).map(\.subjectID) == ["b", "c"])
        // Numbers this engine never gave: not resumable (a whole snapshot).
        #expect(journal.canResume(after: base) && journal.canResume(after: journal.head))
        #expect(!journal.canResume(after: base - 1) && !journal.canResume(after: journal.head + 1) && !journal.canResume(after: 5))
    }
}
