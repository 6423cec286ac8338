import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockPluginHost
import HammockProtocol
import HammockSystem
import Synchronization

/// Everything that can wake the engine.
///
/// A plugin host (`PluginHost`) answers its loads through these, never by return value, because a load may
/// take minutes and a plugin may push new data at any time.
enum EngineInput: Sendable {
    /// What a plugin host told the engine (a load's end, a push, a hello's template rules), through the
    /// `PluginHost.Report` the engine gave it; heeded only while that host serves its kind.
    case plugin(PluginHostEvent, from: PluginHostID)
    /// The plugin of a kind, started for its template rules (`EngineAction.startLoader`), did not say hello.
    case loaderFailedToStart(Kind)
    /// Control lines wait in the consumer's `ControlMailbox`; at most one of these per consumer is in the
    /// inbox at a time.
    case controls(ConsumerID)
    /// A client connected to `hammock serve`'s socket and said what it reads: it gets `hello` and a snapshot
    /// of that in this turn of the loop, before any later line, so it misses nothing and sees nothing twice.
    case joined(Consumer)
    /// A client closed its connection (or the engine dropped it): nothing more goes to it.
    case left(ConsumerID)
    /// `--idle-exit`'s wait, begun when the last client left (the `generation`th time), is over.
    case idleCheck(generation: Int)
    case tick
    /// The wall clock was stepped or the machine slept (`ClockWatch`).
    case clockJumped
    /// SIGHUP: read the configuration again.
    case reload
    /// SIGUSR1 (`failingOnly`) or SIGUSR2: load every failing source, or every source.
    case loadEverySource(failingOnly: Bool)
    /// A step of a reload, done off the loop, is over (see `Engine.ReloadStep`).
    case reloadStep(Engine.ReloadStep)
    /// Time to tell systemd's watchdog that the loop is alive (`WATCHDOG_USEC`).
    case watchdog
    /// `Engine.ask`: answered in the loop's turn, through `reply`, at once.
    case question(EngineQuestion, reply: @Sendable (EngineAnswer) -> Void)
    /// Wakes the loop for a stop; the reason itself is in the engine's `StopRequest`, which every input
    /// looks at first, so a stop never waits behind other inputs.
    case stop
}

typealias EngineInbox = AsyncStream<EngineInput>.Continuation

/// Control lines read from stdin that the engine has not carried out yet.
///
/// The stdin reader parses each line on its own thread and puts the command here; the engine takes
/// everything that waits when it reaches the one `.controls` input that announces it (as with
/// `PushMailbox`, at most one such input is in the inbox). A command replaces a waiting one with the same
/// `ControlCommand.coalescingKey` and moves to the back, so a flood of `override`s or `load`s of one source
/// waits as one command. Beyond `maximumEntries` entries or `maximumBytes` of lines, the reader waits for
/// room: stdin is no longer read and the consumer's writes block, which is how a pipe says "slow down".
/// The engine never waits for the reader.
///
/// A `LockedCondition` rather than a `Mutex`: the reader must sleep until the engine makes room.
final class ControlMailbox: Sendable {
    enum Entry: Sendable {
        /// `ids`: the command's own and those of the waiting commands it replaced, oldest first; each gets
        /// its answer.
        case command(ControlCommand, ids: [ControlID])
        /// A line that is not a valid command: the consumer gets this message on an `error` line, with the
        /// line's `id` if it had one.
        case invalid(String, id: ControlID?)
        /// `--format i3bar`: a click on a view's block (stdin carries clicks, not control lines).
        case click(BarClick)
    }

    static let maximumEntries = 1024
    static let maximumBytes = 8 << 20
    /// A control line longer than this is refused rather than buffered.
    static let maximumLineLength = 1 << 20

    /// Blocks until stdout has room for the answer a line with an `id` will get.
    private let waitForRoomForAnswers: @Sendable () -> Void

    init(waitForRoomForAnswers: @escaping @Sendable () -> Void = {}) {
        self.waitForRoomForAnswers = waitForRoomForAnswers
    }

    private struct State {
        var entries = CoalescingQueue<(entry: Entry, key: String?, cost: Int)>()
        /// The ids of the waiting command under each key, its replaced commands' included, oldest first; kept
        /// beside the queue so that a flood of one command costs a constant time per line.
        var idsByKey: [String: [ControlID]] = [:]
        var bytes = 0
        /// A `.controls` input waits in the engine's inbox.
        var isAnnounced = false
        var isClosed = false

        /// Whether an entry under `key` that costs `cost` goes in now (always, into an empty mailbox).
        func fits(key: String?, cost: Int) -> Bool {
            let replaced = key.flatMap(entries.waiting(forKey:))
            let count = entries.count - (replaced == nil ? 0 : 1)
            return entries.isEmpty
                || (count < ControlMailbox.maximumEntries
                    && bytes - (replaced?.cost ?? 0) + cost <= ControlMailbox.maximumBytes)
        }
    }

    private let state = LockedCondition(State())

    /// Puts a command (or an error) in, waiting while the mailbox is full; `cost` is its line's length.
    /// Returns whether the engine must be told (no `.controls` input waits yet).
    ///
    /// A command that replaces a waiting one takes over its ids, which keep counting against
    /// `maximumBytes` until the engine takes them: a flood of `load` lines with a new `id` each is bounded
    /// like any other.
    func put(_ entry: Entry, key: String?, cost lineCost: Int) -> Bool {
        var newIDs: [ControlID] = []
        if case .command(_, let ids) = entry { newIDs = ids }
        let cost = lineCost + newIDs.reduce(0) { $0 + Self.cost(of: $1) }
        return state.withLock(when: { $0.isClosed || $0.fits(key: key, cost: cost) }) { state in
            guard !state.isClosed else { return false }
            if let replaced = state.entries.append((entry, key, lineCost), key: key) { state.bytes -= replaced.cost }
            state.bytes += cost
            if let key, !newIDs.isEmpty { state.idsByKey[key, default: []] += newIDs }
            defer { state.isAnnounced = true }
            return !state.isAnnounced
        }
    }

    /// What an id costs while it waits: its text and its `ack` line's share.
    private static func cost(of id: ControlID) -> Int {
        32 + id.description.utf8.count
    }

    /// Puts in what stdin's reader read: a command, or the reason a line is not one. Returns whether the
    /// engine must be told (as `put`).
    func receive(_ event: LineReader.Event) -> Bool {
        switch event {
        case .line(let bytes):
            do throws(ControlLineError) {
                let request = try ControlRequest(line: bytes)
                if request.id != nil { waitForRoomForAnswers() }
                let entry = Entry.command(request.command, ids: request.id.map { [$0] } ?? [])
                return put(entry, key: request.command.coalescingKey, cost: bytes.count)
            } catch {
                if error.id != nil { waitForRoomForAnswers() }
                return put(.invalid(error.message, id: error.id), key: nil, cost: bytes.count)
            }
        case .tooLong(let length):
            let message = "control line of \(length) bytes is longer than the limit of \(Self.maximumLineLength) bytes; ignored"
            return put(.invalid(message, id: nil), key: nil, cost: 0)
        case .end:
            return false  // the end of stdin is not a reason to stop: the consumer may only read
        }
    }

    /// Puts in a command of `hammock watch`'s keys (no line, no id). Returns whether the engine must be told.
    func command(_ command: ControlCommand) -> Bool {
        put(.command(command, ids: []), key: command.coalescingKey, cost: 0)
    }

    /// Puts in what stdin's reader read under `--format i3bar`: a click, or the reason a line is not one
    /// (the `[` that opens i3bar's stream is not a line to act on). Returns whether the engine must be told.
    func receiveClick(_ event: LineReader.Event) -> Bool {
        switch event {
        case .line(let bytes):
            switch BarClick.parse(bytes) {
            case .framing: return false
            case .click(let click):
                return put(.click(click), key: "click\u{0}\(click.view)\u{0}\(click.button)", cost: bytes.count)
            case .invalid(let message): return put(.invalid(message, id: nil), key: nil, cost: bytes.count)
            }
        case .tooLong, .end:
            return receive(event)
        }
    }

    /// Everything that waits, oldest first; the next `put` announces itself again.
    func take() -> [Entry] {
        let taken = state.withLock { state in
            let taken = state.entries.removeAll().map { waiting in
                guard case .command(let command, _) = waiting.entry, let key = waiting.key else { return waiting.entry }
                return Entry.command(command, ids: state.idsByKey[key] ?? [])
            }
            state.idsByKey = [:]
            state.bytes = 0
            state.isAnnounced = false
            return taken
        }
        state.broadcast()
        return taken
    }

    /// The engine is stopping: drops what waits and lets a waiting reader go (it drops its line too).
    func close() {
        state.withLock { state in
            state.isClosed = true
            _ = state.entries.removeAll()
            state.idsByKey = [:]
            state.bytes = 0
        }
        state.broadcast()
    }
}
