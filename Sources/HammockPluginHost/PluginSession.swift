import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockProtocol
import HammockSystem

// MARK: - One line from the plugin

package struct ReceivedLine: Sendable {
    package let text: String
    /// The line decoded, or why it could not be.
    package let message: PluginMessage?
    package let error: ProtocolError?
    package let json: JSONValue

    package init(bytes: [UInt8]) {
        text = String(decoding: bytes, as: UTF8.self)
        json = (try? JSONValue(parsing: bytes)) ?? .null
        do throws(ProtocolError) {
            message = try PluginMessage(line: bytes)
            error = nil
        } catch {
            message = nil
            self.error = error
        }
    }

    package var type: String { json["type"]?.stringValue ?? "?" }

    /// The load this line answers, if it is an answer.
    package var loadID: Int? { message?.loadID }

    /// The source of a push (newData or error without an id).
    package var pushSource: String? { message?.pushedSource }

    /// A line too long to keep: a violation in itself.
    package init(tooLong length: Int) {
        text = "(a line of \(length) bytes, not kept)"
        json = .null
        message = nil
        error = ProtocolError("over the limit of \(PluginSession.maximumLineLength) bytes a line")
    }

    package func isConfigureAnswer(for source: String) -> Bool {
        switch message {
        case .configured(source), .invalid(source, _): true
        default: false
        }
    }

    /// The line, shortened for a report.
    package var excerpt: String { text.count > 200 ? String(text.prefix(200)) + "..." : text }

    /// The line's first 200 bytes, redacted before the cut.
    package func excerpt(_ redactor: Redactor) -> String { redactor.excerpt(text, limit: 200) }
}

// MARK: - The plugin process

/// One plugin process: lines to its stdin, every line from its stdout kept in order, the tail of its stderr.
///
/// An actor the checks wait on: each arrival (a line, the exit) wakes the one wait in progress, which
/// otherwise ends at its deadline. `serve` runs the process; `PluginConformance.run` runs it beside the
/// checks, in one task group.
package actor PluginSession {
    package static let maximumLineLength = maximumPluginLineLength

    package enum Next {
        case line(ReceivedLine)
        case exited(String)
        /// With the lines that came meanwhile and did not match.
        case timedOut([ReceivedLine])
    }

    private var lines: [ReceivedLine] = []
    private var cursor = 0
    private var stderrTail: [UInt8] = []
    private var exitStatus: String?
    /// The wait in progress (`changed(before:)`), resumed with true by an arrival, false at its deadline.
    private var waiter: (wait: Int, continuation: CheckedContinuation<Bool, Never>)?
    private var waits = 0
    private nonisolated let transport: ProcessTransport
    /// Its stderr's lines, on their way to `stderrTail`; only the newest matter.
    private nonisolated let standardError = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .bufferingNewest(64))
    private let clock = SupervisionClock.system

    package init(command: [String]) {
        let standardError = standardError.continuation
        transport = ProcessTransport(command: command, maximumLineLength: Self.maximumLineLength, reapsOrphans: false) {
            standardError.yield($0)
        }
    }

    /// Runs the process until it exits.
    package func serve() async {
        // A plugin that dies makes our next write to it raise SIGPIPE; the write's error is enough.
        signal(SIGPIPE, SIG_IGN)
        let status = await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await line in self.standardError.stream { await self.keepStandardError(line) }
            }
            let receive: @Sendable ([LineSplitter.Piece]) async -> Void = { pieces in
                for piece in pieces { await self.received(piece) }
            }
            let status = await transport.run(receive: receive)
            standardError.continuation.finish()
            return status
        }
        exitStatus = status.description
        wake()
    }

    private func received(_ piece: LineSplitter.Piece) {
        let line =
            switch piece {
            case .line(let bytes): ReceivedLine(bytes: bytes)
            case .tooLong(let length, _): ReceivedLine(tooLong: length)
            }
        lines.append(line)
        wake()
    }

    private func keepStandardError(_ line: [UInt8]) {
        stderrTail.append(contentsOf: line + [UInt8(ascii: "\n")])
        if stderrTail.count > 2048 {
            stderrTail.removeFirst(stderrTail.count - 2048)
            // Whole lines only: the first one kept was cut at its start, maybe inside a secret, whose end no
            // redaction would know.
            if let newline = stderrTail.firstIndex(of: UInt8(ascii: "\n")) { stderrTail.removeFirst(newline + 1) } else { stderrTail.removeAll() }
        }
    }

    package nonisolated func send(_ message: EngineMessage) { transport.send(message) }

    package nonisolated func closeInput() { transport.closeInput() }

    /// Ends it if it still runs: its guard kills it and whatever it started (see `ProcessTransport`).
    package nonisolated func kill() { transport.kill() }

    package var allLines: [ReceivedLine] { lines }

    /// `; its stderr ends: ...`, or nothing when it wrote none.
    package var stderrExcerpt: String {
        let text = String(decoding: stderrTail, as: UTF8.self).trimmingWhitespace()
        guard !text.isEmpty else { return "" }
        return "; its stderr ends: " + text.split(separator: "\n").suffix(3).joined(separator: " | ")
    }

    /// The next line after the previous match that `matches` (or is not protocol), the exit, or a timeout.
    package func next(within timeout: Duration, _ matches: @Sendable (ReceivedLine) -> Bool) async -> Next {
        let deadline = clock.now() + timeout
        var others: [ReceivedLine] = []
        while true {
            while cursor < lines.count {
                let line = lines[cursor]
                cursor += 1
                if line.error != nil || matches(line) { return .line(line) }
                others.append(line)
            }
            if let exitStatus { return .exited(exitStatus) }
            guard await changed(before: deadline) else { return .timedOut(others) }
        }
    }

    /// How it exited, if it did within `timeout`.
    package func waitForExit(timeout: Duration) async -> String? {
        let deadline = clock.now() + timeout
        while exitStatus == nil {
            guard await changed(before: deadline) else { break }
        }
        return exitStatus
    }

    /// Waits for the next arrival; false when `deadline` comes first.
    private func changed(before deadline: SupervisionClock.Instant) async -> Bool {
        waits += 1
        let wait = waits
        let clock = clock
        return await withTaskGroup(of: Void.self) { group in
            group.addTask {
                if await clock.sleep(until: deadline) { await self.timeUp(wait) }
            }
            // Registered before the timer can reach the actor, which this body holds until it waits.
            let changed = await withCheckedContinuation { waiter = (wait, $0) }
            group.cancelAll()
            return changed
        }
    }

    private func timeUp(_ wait: Int) {
        guard let waiter, waiter.wait == wait else { return }
        self.waiter = nil
        waiter.continuation.resume(returning: false)
    }

    private func wake() {
        waiter?.continuation.resume(returning: true)
        waiter = nil
    }
}
