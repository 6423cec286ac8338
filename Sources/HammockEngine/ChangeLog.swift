import HammockCore

/// The state lines of the engine's turns since `SocketWriter`'s last pass, kept once for every client:
/// the engine hands a turn over in one call, not one per client, and the writer gives each client its share
/// when it next writes, by then coalesced.
///
/// Lines are numbered as they come (`head` is the newest number). A newer state of a source or view
/// supersedes the older one still here, which is skipped from then on, so a thousand changes of one source
/// between two passes reach each client as one line; superseded entries are dropped once they are most of
/// the log, so it is bounded by the number of ids (and the few lines nothing replaces: `removed`, `bye`).
/// A reader keeps a cursor (the `head` it last read up to) and reads what came after it, in order.
///
/// A value, owned by whoever holds the writer's lock.
struct ChangeLog {
    private struct Entry {
        let number: Int
        let key: String?
        let line: OutputLine
    }

    private(set) var head = 0
    private var entries: [Entry] = []
    /// A key's newest entry's number: an entry of that key with another number is superseded.
    private var newest: [String: Int] = [:]
    private var superseded = 0

    var isEmpty: Bool { entries.isEmpty }
    /// Entries kept, superseded ones included (tests watch it stay bounded).
    var storedCount: Int { entries.count }

    mutating func append(_ line: OutputLine) {
        head += 1
        let key = line.coalescingKey
        if let key, newest.updateValue(head, forKey: key) != nil { superseded += 1 }
        entries.append(Entry(number: head, key: key, line: line))
        if superseded > 32 && superseded * 2 > entries.count { dropSuperseded() }
    }

    /// The lines that came after `cursor` and are not superseded, in the order they came.
    func forEach(after cursor: Int, _ body: (OutputLine) -> Void) {
        guard cursor < head else { return }
        // Numbered in order: the entries after the cursor are a suffix.
        var start = entries.count
        while start > 0 && entries[start - 1].number > cursor { start -= 1 }
        for entry in entries[start...] where isNewest(entry) { body(entry.line) }
    }

    /// Every reader has read up to `head`.
    mutating func removeAll() {
        entries.removeAll(keepingCapacity: entries.capacity <= 1024)
        newest.removeAll(keepingCapacity: newest.capacity <= 1024)
        superseded = 0
    }

    private func isNewest(_ entry: Entry) -> Bool {
        entry.key.map { newest[$0] == entry.number } ?? true
    }

    private mutating func dropSuperseded() {
        let newest = newest
        entries.removeAll { entry in entry.key.map { newest[$0] != entry.number } ?? false }
        superseded = 0
    }
}
