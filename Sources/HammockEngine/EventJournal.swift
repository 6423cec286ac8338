import HammockCore

/// The engine-wide numbers of its states, for the HTTP door (docs/http.md, "Event numbers"): every state line
/// the engine writes (a source's, a view's, a `removed`) gets the next number, and the journal remembers the
/// number of each id's newest line. A line of the HTTP door carries its number as `seq`, an event stream its
/// `id:`; a stream that comes back with `Last-Event-ID: N` is sent the ids whose newest line came after N
/// (their current state, or their `removed`), and nothing it already has.
///
/// Numbers start at the engine's start time in microseconds since 1970, so an id an earlier engine gave is
/// below every number of this one (a fresh snapshot, never a wrong resume), and all stay below 2^53 (exact
/// in JavaScript) for centuries.
///
/// Pure, owned by the loop: `record` numbers a turn's lines as the loop delivers them, and `numbers(for:)`
/// gives a consumer's share of that turn its numbers.
struct EventJournal {
    /// Below every number of this engine: a number from before it started.
    let base: Int
    /// The newest number given.
    private(set) var head: Int
    /// Each id's newest number (`key(of:)`).
    private var newest: [String: Int] = [:]
    /// The `removed` line of each id a reload removed (and no later line brought back), with its number.
    private var removals: [String: (number: Int, line: OutputLine)] = [:]
    /// The last recorded turn's numbers by id, in order: an id may change twice in one turn.
    private var turn: [String: [Int]] = [:]

    init(startedAt wall: Timestamp) {
        base = Int(wall.millisecondsSince1970) * 1000
        head = base
    }

    /// The id a line numbers (every line of a source shares one: a wipe's, a cache's), or nil for a line that
    /// is not a state.
    static func key(of line: OutputLine) -> String? {
        switch line {
        case .source(let id, _, _): "s\u{0}" + id.rawValue
        case .view(let id, _): "v\u{0}" + id.rawValue
        case .removed(let id, let what): (what == "source" ? "s\u{0}" : "v\u{0}") + id
        case .hello, .reloaded, .ack, .error, .bye: nil
        }
    }

    /// Numbers the state lines of one turn of the engine, in order.
    mutating func record(_ lines: [OutputLine]) {
        turn.removeAll(keepingCapacity: true)
        for line in lines {
            guard let key = Self.key(of: line) else { continue }
            head += 1
            newest[key] = head
            turn[key, default: []].append(head)
            if case .removed = line { removals[key] = (head, line) } else { removals[key] = nil }
        }
    }

    /// The numbers of `batch`, a consumer's share of lines: `ofTurn`, of the turn just recorded (a consumer
    /// reads all of an id's lines in a turn or none, so the n-th line of an id in the batch is its n-th in the
    /// turn); else a snapshot, whose states carry their id's newest number. A line that is not a state
    /// (`hello`, an `ack`, `bye`) carries the head: every state before it has been written.
    func numbers(for batch: [OutputLine], ofTurn: Bool) -> [Int] {
        var taken: [String: Int] = [:]
        return batch.map { line in
            guard let key = Self.key(of: line) else { return head }
            guard ofTurn, let numbers = turn[key] else { return newest[key] ?? base }
            let index = taken[key, default: 0]
            taken[key] = index + 1
            return numbers[min(index, numbers.count - 1)]
        }
    }

    /// Whether a stream that has read up to `number` can be told just what came after it: the number is this
    /// engine's, and not ahead of it.
    func canResume(after number: Int) -> Bool {
        number >= base && number <= head
    }

    /// Of a snapshot's `lines`, those whose id changed after `number`, led by the `removed` lines of ids a
    /// reload removed after it.
    func changes(after number: Int, in lines: [OutputLine]) -> [OutputLine] {
        let removed = removals.values.filter { $0.number > number }.sorted { $0.number < $1.number }.map(\.line)
        return removed + lines.filter { line in Self.key(of: line).map { (newest[$0] ?? base) > number } ?? true }
    }
}
