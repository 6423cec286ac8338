import HammockCore
import HammockJSON
import HammockLogging
import Synchronization

/// One line of the engine as a door outside the package reads it (`EngineStream`): the HTTP door's event
/// streams, its `GET`s and its control answers.
public struct EngineEvent: Sendable {
    /// The line's `type`: `hello`, `source`, `view`, `removed`, `reloaded`, `ack`, `error`, `bye`.
    public let type: String
    /// The source's or view's id (a `source`, `view` or `removed` line), the answered `id` as text (an `ack`
    /// or `error` that has one), or nil.
    public let id: String?
    /// The line's number in the engine (`EventJournal`), written as its `seq`.
    public let number: Int
    /// Whether a stream that has read this line has read every state it takes up to `number`: a change
    /// written live, or the `ack` that ends the snapshot. `hello` and the snapshot's states are not (a stream
    /// cut off in the middle of its snapshot must not resume after a number it has not read all of).
    public let isResumable: Bool
    /// The line as hammock writes it, without its newline: `seq` is `number`, and secrets are redacted as on
    /// stdout.
    public let json: [UInt8]
}

/// A reader of the engine's lines from outside the package, as a client of `hammock serve`'s socket is from
/// outside the process: it joins the engine with a subscription (and so makes what it watches load), reads
/// `hello`, a snapshot and an `ack` that ends it, then every change as it happens, coalesced per id while it
/// does not read; it may send control lines. `close()` leaves the engine.
///
/// A `Mutex` around what waits (the engine's loop puts lines in, one reader task takes them out).
public final class EngineStream: Sendable {
    /// The `id` of the subscription of every stream: the `ack` that ends the snapshot carries it.
    public static let snapshotID = "snapshot"

    private let consumerID: ConsumerID
    private let output: StreamOutput
    private let controls: ControlMailbox
    private let inbox: EngineInbox
    private let secrets: Secrets

    fileprivate init(consumerID: ConsumerID, output: StreamOutput, controls: ControlMailbox, inbox: EngineInbox, secrets: Secrets) {
        self.consumerID = consumerID
        self.output = output
        self.controls = controls
        self.inbox = inbox
        self.secrets = secrets
    }

    /// What came since the last call, oldest first, waiting until something does; nil once the engine has let
    /// the stream go (it stops, the subscription named an unknown id, or the stream fell too far behind) and
    /// everything before has been read, or once `close()` was called.
    public func next() async -> [EngineEvent]? {
        guard let entries = await output.take() else { return nil }
        let redactor = secrets.redactor
        return entries.map { entry in
            var bytes: [UInt8] = []
            entry.line.encode(seq: entry.number, into: &bytes, redactor: redactor)
            if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
            return EngineEvent(
                type: entry.line.typeName, id: entry.line.subjectID, number: entry.number, isResumable: entry.isResumable,
                json: bytes)
        }
    }

    /// Sends one control line (protocol.md's ops), as a client writes one to the socket; its answer, if it
    /// has an `id`, comes on this stream alone.
    public func send(controlLine line: [UInt8]) {
        if controls.receive(.line(line)) { inbox.yield(.controls(consumerID)) }
    }

    /// The reader is gone: the engine forgets the stream, and a waiting `next()` returns nil.
    public func close() {
        if output.end() { inbox.yield(.left(consumerID)) }
    }
}

extension Engine {
    /// Joins the running engine as a reader of `subscription` (`Subscription.everything`, or the sources and
    /// views named). `resumeAfter`: the number of the last line a previous stream read that can be resumed
    /// after (`EngineEvent.isResumable`): when the engine still knows it, the snapshot holds only the ids
    /// that changed since (and the `removed` lines of those a reload removed), else every id.
    public func openStream(_ subscription: Subscription, resumeAfter: Int? = nil) -> EngineStream {
        let id = ConsumerID.next()
        let output = StreamOutput()
        let controls = ControlMailbox()
        let stream = EngineStream(consumerID: id, output: output, controls: controls, inbox: inbox, secrets: secrets)
        inbox.yield(
            .joined(
                Consumer(
                    id: id, subscription: subscription, subscriptionID: .string(EngineStream.snapshotID), output: output,
                    controls: controls, close: { _ = output.end() }, resumeAfter: resumeAfter)))
        return stream
    }
}

/// An `EngineStream`'s side in the engine: the consumer's output, numbered (`EventJournal`), coalesced per id
/// as every consumer's is.
final class StreamOutput: NumberedEngineOutput {
    struct Entry: Sendable {
        let line: OutputLine
        let number: Int
        let isResumable: Bool
    }

    /// Waiting lines that no newer line replaces (`removed`, `reloaded`, errors) beyond this many end the
    /// stream: its reader is that far behind, and reconnects for a snapshot.
    static let maximumUncoalescedLines = 1000

    private struct State {
        var waiting = CoalescingQueue<Entry>()
        var uncoalesced = 0
        /// The engine let the stream go, or the reader closed it: what waits is read, then nothing.
        var isEnded = false
        /// The reader waiting for lines.
        var reader: CheckedContinuation<[Entry]?, Never>?
        /// `finish` waiting for the reader to take what waits.
        var finishing: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    func send(_ line: OutputLine) {
        put([Entry(line: line, number: 0, isResumable: false)])
    }

    func send(contentsOf lines: [OutputLine]) {
        put(lines.map { Entry(line: $0, number: 0, isResumable: false) })
    }

    func send(contentsOf lines: [OutputLine], numbers: [Int], live: Bool) {
        put(
            zip(lines, numbers).map { line, number in
                let isSnapshotEnd = if case .ack(.string(EngineStream.snapshotID)) = line { true } else { false }
                return Entry(line: line, number: number, isResumable: live || isSnapshotEnd)
            })
    }

    private func put(_ entries: [Entry]) {
        let (reader, taken, tooFarBehind): (CheckedContinuation<[Entry]?, Never>?, [Entry], Bool) = state.withLock { state in
            guard !state.isEnded else { return (nil, [], false) }
            for entry in entries {
                if let key = entry.line.coalescingKey {
                    _ = state.waiting.append(entry, key: key)
                } else {
                    state.waiting.appendBarrier(entry)
                    state.uncoalesced += 1
                }
            }
            if state.uncoalesced > Self.maximumUncoalescedLines {
                state.isEnded = true
                _ = state.waiting.removeAll()
                let reader = state.reader
                state.reader = nil
                return (reader, [], true)
            }
            guard let reader = state.reader else { return (nil, [], false) }
            state.reader = nil
            state.uncoalesced = 0
            return (reader, state.waiting.removeAll(), false)
        }
        reader?.resume(returning: tooFarBehind ? nil : taken)
    }

    /// What waits, waiting until something does; nil once ended and empty.
    func take() async -> [Entry]? {
        await withCheckedContinuation { (continuation: CheckedContinuation<[Entry]?, Never>) in
            let (answer, finishing): ([Entry]??, CheckedContinuation<Void, Never>?) = state.withLock { state in
                if !state.waiting.isEmpty {
                    state.uncoalesced = 0
                    let finishing = state.finishing
                    state.finishing = nil
                    return (.some(state.waiting.removeAll()), finishing)
                }
                if state.isEnded { return (.some(nil), nil) }
                state.reader = continuation
                return (nil, nil)
            }
            finishing?.resume()
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// Ends the stream; true the first time.
    @discardableResult
    func end() -> Bool {
        let (first, reader, finishing) = state.withLock { state in
            defer {
                state.isEnded = true
                state.reader = nil
                state.finishing = nil
            }
            return (!state.isEnded, state.reader, state.finishing)
        }
        reader?.resume(returning: nil)
        finishing?.resume()
        return first
    }

    func run() async {}

    /// The engine stops: `last` goes in, and the reader has until `deadline` to take what waits.
    func finish(with last: OutputLine?, deadline: Duration?) async -> OutputWriter.Completion {
        if let last { send(last) }
        let waited = Task {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let isDone = state.withLock { state in
                    guard !state.waiting.isEmpty, !state.isEnded else { return true }
                    state.finishing = continuation
                    return false
                }
                if isDone { continuation.resume() }
            }
        }
        let timer = Task {
            try? await Task.sleep(for: deadline ?? .seconds(2))
            let finishing = state.withLock { state in
                defer { state.finishing = nil }
                return state.finishing
            }
            finishing?.resume()
        }
        await waited.value
        timer.cancel()
        let unread = state.withLock { $0.waiting.count }
        return unread == 0 ? .complete : .incomplete(unwritten: unread)
    }

    func interrupt() { end() }
    func left() { end() }
    func pause() {}
    func resume() {}
    func viewsReloaded(_ views: [ViewDefinition]) {}
    func waitForRoomForAnswers() {}
    func resized() {}
}

/// A consumer's output that is told each line's engine-wide number (`EventJournal`): the HTTP door's.
protocol NumberedEngineOutput: EngineOutput {
    /// `lines` with their `numbers`; `live`: changes of the turn just numbered, not a join's `hello` and
    /// snapshot.
    func send(contentsOf lines: [OutputLine], numbers: [Int], live: Bool)
}

extension OutputLine {
    /// The `type` a line is written with.
    var typeName: String {
        switch self {
        case .hello: "hello"
        case .source: "source"
        case .view: "view"
        case .reloaded: "reloaded"
        case .removed: "removed"
        case .ack: "ack"
        case .error: "error"
        case .bye: "bye"
        }
    }

    /// The source's or view's id, or the answered control line's `id` as text.
    var subjectID: String? {
        switch self {
        case .source(let id, _, _): id.rawValue
        case .view(let id, _): id.rawValue
        case .removed(let id, _): id
        case .ack(let id): id.text
        case .error(_, let id?): id.text
        case .hello, .reloaded, .error, .bye: nil
        }
    }
}

extension ControlID {
    /// A string id as it is, a number as written.
    var text: String {
        switch self {
        case .string(let text): text
        case .number(let number): number.description
        }
    }
}

extension ConsumerID {
    private static let last = Atomic<Int>(0)

    /// A new consumer's id, never used before in this process (`standardOutput` is 0).
    static func next() -> ConsumerID {
        ConsumerID(rawValue: last.add(1, ordering: .relaxed).newValue)
    }
}
