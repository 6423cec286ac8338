import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockSystem
import Logging

/// `--log-format`: how each record on stderr looks.
public enum LogFormat: String, Sendable, CaseIterable {
    /// `hammock: level: message key=value`, for people.
    case text
    /// One JSON object per line (`time`, `level`, `message`, then the record's fields), for journald's
    /// readers and log shippers; a message of several lines stays one line.
    case json
}

/// hammock's stderr, shared by its logs and its plugins' stderr: best-effort, so that a consumer that never
/// reads it can neither stall the engine nor make it grow.
///
/// It lives as long as the command, not the engine (`check`, a start-up stop and the last words use it too),
/// so it is no child of the engine's task group. Lines wait in a bounded queue and are written by a thread
/// of their own; whoever logs (the engine loop, a
/// plugin's stderr task) only appends. When the queue is full, new lines are dropped and counted, and once
/// stderr takes lines again one line says how many were lost. Every line passes the redactor just before it
/// is written, so a secret added by a reload is kept out of lines that were already waiting; as text, its
/// control characters are escaped there too (`escapeControlCharacters`).
public struct StandardError: Sendable {
    public let secrets: Secrets
    public let format: LogFormat
    private let queue: StandardErrorQueue

    public init(secrets: Secrets, format: LogFormat = .text, descriptor: Int32 = STDERR_FILENO) {
        self.secrets = secrets
        self.format = format
        queue = StandardErrorQueue(descriptor: descriptor, secrets: secrets, format: format)
    }

    /// A line a plugin (or a click's command) wrote on its stderr: `prefix: line` as text; as JSON, the line
    /// is the message and `prefix` the value of `field`.
    package func write(prefix: String, line: [UInt8], field: String = "plugin") {
        switch format {
        case .text:
            var bytes = Array(prefix.utf8)
            bytes.reserveCapacity(bytes.count + line.count + 3)
            bytes += [UInt8(ascii: ":"), UInt8(ascii: " ")]
            bytes += line
            bytes.append(UInt8(ascii: "\n"))
            queue.append(bytes)
        case .json:
            queue.append(
                Self.jsonRecord(level: "notice", message: String(decoding: line, as: UTF8.self), fields: [field: .string(prefix)]))
        }
    }

    /// `text` as it is; it should end with a newline.
    public func write(_ text: String) { queue.append(Array(text.utf8)) }

    /// One record: `hammock: level: message key=value` or a JSON line.
    public func log(level: String, message: String) { log(level: level, message: message, fields: JSONObject()) }

    /// One record: `hammock: level: message key=value` or a JSON line.
    public func log(level: String, message: String, fields: JSONObject) {
        switch format {
        case .text:
            let suffix = fields.map { key, value in " \(key)=\(value.stringValue ?? value.description)" }.joined()
            queue.append(Array("hammock: \(level): \(message)\(suffix)\n".utf8))
        case .json:
            queue.append(Self.jsonRecord(level: level, message: message, fields: fields))
        }
    }

    /// `{"time":…,"level":…,"message":…,…fields}` and a newline. The time is RFC 3339 in UTC, with
    /// milliseconds; a field may not replace the first three.
    public static func jsonRecord(level: String, message: String, fields: JSONObject, time: Date = Date()) -> [UInt8] {
        var record: JSONObject = [
            "time": .string(Timestamp(millisecondsSince1970: Int64((time.timeIntervalSince1970 * 1000).rounded(.down))).rfc3339),
            "level": .string(level),
            "message": .string(message),
        ]
        for (key, value) in fields where record[key] == nil { record[key] = value }
        var bytes: [UInt8] = []
        JSONValue.object(record).write(into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// Waits until every waiting line is written, for at most `timeout`: before hammock exits, so its last
    /// words reach a consumer that reads stderr, without hanging on one that does not.
    public func flush(timeout: Duration) { queue.flush(timeout: timeout) }
}

/// The queue and the thread behind `StandardError`.
///
/// A `LockedCondition` guards the queue: the writer thread must sleep until there is a line, and `flush`
/// until there is none, which a condition variable expresses directly.
final class StandardErrorQueue: Sendable {
    /// Lines and bytes that may wait; beyond either, new lines are dropped. A plugin's stderr line is at
    /// most 64 KiB, so a full queue is at most about 1 MiB plus one line.
    static let maximumWaitingLines = 1000
    static let maximumWaitingBytes = 1 << 20
    /// Writes of at most this many bytes are atomic on a pipe: a line never mixes with another writer's
    /// bytes (stdout, when the consumer sends both to one pipe).
    static let atomicWrite = Int(PIPE_BUF)

    private let descriptor: Int32
    private let secrets: Secrets
    private struct State {
        var waiting: [[UInt8]] = []
        var waitingBytes = 0
        var dropped = 0
        /// The writer has taken lines and not finished writing them.
        var isWriting = false
        /// A write failed (stderr closed): everything from now on is dropped without a word.
        var isBroken = false
        var isWriterStarted = false
    }

    private let state = LockedCondition(State())

    private let format: LogFormat

    init(descriptor: Int32, secrets: Secrets, format: LogFormat) {
        self.descriptor = descriptor
        self.secrets = secrets
        self.format = format
    }

    func append(_ line: [UInt8]) {
        let startsWriter = state.withLock { state in
            guard !state.isBroken else { return false }
            // One line is always let in, whatever its size, so a long message alone is not lost.
            let full = state.waiting.count >= Self.maximumWaitingLines
                || (!state.waiting.isEmpty && state.waitingBytes + line.count > Self.maximumWaitingBytes)
            if full {
                state.dropped += 1
                return false
            }
            state.waiting.append(line)
            state.waitingBytes += line.count
            // Started with the first line: `check` and a quiet run need no thread.
            defer { state.isWriterStarted = true }
            return !state.isWriterStarted
        }
        // A thread of its own for the rest of the run: it blocks in `write` for as long as nobody reads.
        if startsWriter { OwnThread.start(named: "hammock.stderr") { [self] in run() } }
        // A broadcast: `flush` sleeps on the same condition, and a single wake-up could go to it alone.
        state.broadcast()
    }

    /// Lines waiting for the writer; tests watch the bound with it.
    var waitingCount: Int {
        state.withLock { $0.waiting.count }
    }

    func flush(timeout: Duration) {
        state.withLock(
            when: { $0.isBroken || ($0.waiting.isEmpty && !$0.isWriting && $0.dropped == 0) },
            before: .after(timeout)
        ) { _, _ in }
    }

    private func run() {
        while true {
            let (batch, droppedBefore) = state.withLock(when: { !$0.waiting.isEmpty || $0.dropped > 0 }) { state in
                defer {
                    state.waiting.removeAll(keepingCapacity: true)
                    state.waitingBytes = 0
                    state.dropped = 0
                    state.isWriting = true
                }
                return (state.waiting, state.dropped)
            }

            // Lines dropped while these waited came after them: the notice goes after the batch, so the gap
            // shows where it was.
            var lines = batch
            if droppedBefore > 0 {
                let noun = droppedBefore == 1 ? "line" : "lines"
                let message = "\(droppedBefore) \(noun) of log were dropped because stderr was not read"
                switch format {
                case .text: lines.append(Array("hammock: warning: \(message)\n".utf8))
                case .json: lines.append(StandardError.jsonRecord(level: "warning", message: message, fields: [:]))
                }
            }
            let written = write(lines)

            state.withLock { state in
                state.isWriting = false
                if !written {
                    state.isBroken = true
                    state.waiting.removeAll()
                    state.dropped = 0
                }
            }
            state.broadcast()
            if !written { return }
        }
    }

    /// Writes whole lines, as few at a time as fit in one atomic write. This thread may block here for as
    /// long as nobody reads stderr: that is its purpose, since nothing but the bounded `flush` waits for it.
    private func write(_ lines: [[UInt8]]) -> Bool {
        let redactor = secrets.redactor
        var chunk: [UInt8] = []
        chunk.reserveCapacity(Self.atomicWrite)
        for var line in lines {
            if format == .text { Self.escapeControlCharacters(&line) }
            redactor.redact(&line)
            if !chunk.isEmpty && chunk.count + line.count > Self.atomicWrite {
                guard writeAll(chunk) else { return false }
                chunk.removeAll(keepingCapacity: true)
            }
            chunk += line
        }
        return chunk.isEmpty || writeAll(chunk)
    }

    /// A text record's control characters written as `\u{1B}`, `\n`… (`escapingControlCharacters`), the
    /// newline that ends it kept. A record quotes what others wrote (an id from stdin, a click line, a plugin's
    /// line): raw, an ESC would recolour or clear the terminal that shows stderr, a CR overwrite the record, a
    /// newline start a record that hammock never wrote. Here, one place for every record, rather than at each
    /// message that quotes something. JSON records need none of it: the JSON writer escapes them.
    static func escapeControlCharacters(_ line: inout [UInt8]) {
        let endsLine = line.last == UInt8(ascii: "\n")
        let body = endsLine ? line.dropLast() : line[...]
        // C1 controls are 0xC2 0x80-0x9F in UTF-8: 0xC2 finds them (and a few printable characters, which
        // `escapingControlCharacters` leaves as they are).
        guard body.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 }) else { return }
        let text = String(decoding: body, as: UTF8.self)
        let escaped = text.escapingControlCharacters
        guard escaped != text else { return }
        line = Array(escaped.utf8)
        if endsLine { line.append(UInt8(ascii: "\n")) }
    }

    /// False once stderr fails (EPIPE: nobody reads it): the writer stops.
    private func writeAll(_ bytes: [UInt8]) -> Bool {
        (try? Descriptor.writeAll(bytes, to: descriptor)) != nil
    }
}

/// swift-log's handler for hammock: `hammock: error: message key=value` on stderr (or a JSON line, with
/// `--log-format json`), secrets redacted.
public struct StandardErrorLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let output: StandardError

    public init(level: Logger.Level, output: StandardError) {
        logLevel = level
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        switch output.format {
        case .text:
            let suffix = fields.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
            output.write("hammock: \(event.level): \(event.message)\(suffix)\n")
        case .json:
            var object: JSONObject = [:]
            for (key, value) in fields.sorted(by: { $0.key < $1.key }) { object[key] = Self.json(value) }
            output.log(level: event.level.rawValue, message: "\(event.message)", fields: object)
        }
    }

    /// Metadata as JSON: strings stay strings, lists and dictionaries keep their shape.
    static func json(_ value: Logger.MetadataValue) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let values): .array(values.map(json))
        case .dictionary(let values):
            .object(JSONObject(uniqueKeysWithValues: values.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) }))
        }
    }
}
