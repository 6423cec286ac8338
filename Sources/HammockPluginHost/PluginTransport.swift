import HammockProtocol
import HammockSystem

/// The plugin host's end of one plugin: lines in, lines out, and how it ended.
///
/// `ProcessTransport` runs a real plugin process below hammock's guard; the tests put an in-memory plugin
/// here (as swift-nio's `EmbeddedChannel` stands in for a socket) and play the plugin line by line, so
/// that crashes, garbage, half lines and deadlines are tested in milliseconds.
package protocol PluginTransport: Sendable {
    /// Starts the plugin and serves it until it has ended; called once, by the task that supervises it.
    ///
    /// Every piece of the plugin's stdout goes to `receive` in order, a read's worth at a time (one hop to
    /// the host for all the lines a read brought, not one a line), each awaited before more is read, so a
    /// plugin that writes faster than the host reads is held back by its pipe rather than by memory.
    /// Returns once it has exited and its stdout is read: to the end (a last line without a newline
    /// included), or, when a process it left behind holds stdout open, to what the pipe held at its exit.
    /// A cancelled run ends the plugin as `kill` does, and returns once it has ended.
    func run(receive: ([LineSplitter.Piece]) async -> Void) async -> PluginExit

    /// Queues one encoded line (`\n` included) for the plugin's stdin; dropped once the input is closed
    /// or the plugin is ending.
    func send(line: [UInt8])

    /// Closes the plugin's stdin once what is queued has been written.
    func closeInput()

    /// Ends the plugin now, with everything it started, even if it has not finished starting.
    func kill()
}

extension PluginTransport {
    package func send(_ message: EngineMessage) { send(line: message.line) }
}

/// Makes the transport of each process a host starts (the first, and one per restart).
package typealias PluginTransportFactory = @Sendable () -> any PluginTransport

/// How a plugin ended, in the words the messages use ("the shell plugin exited with status 3").
package enum PluginExit: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case killed(signal: Int32)
    /// It never ran; the text says what was run and why it failed.
    case couldNotStart(String)
    /// It ended, but how is not known: something else reaped it and took its status.
    case endedWithUnknownStatus

    package var description: String {
        switch self {
        case .exited(let code): "exited with status \(code)"
        case .killed(let signal): "was killed by signal \(signal)"
        case .couldNotStart(let why): "could not be started \(why)"
        case .endedWithUnknownStatus: "ended (its exit status is unknown)"
        }
    }
}

/// The clock of the plugin host's deadlines: the handshake, each `configure`, the restart backoff, the
/// crash window and the waits of a shutdown.
///
/// `SuspendingClock` (CLOCK_MONOTONIC on Linux), like the engine core's deadlines: neither a stepped wall
/// clock nor libfaketime (which the tests run with DONT_FAKE_MONOTONIC=1) moves it, and it stands still
/// while the machine sleeps, so a plugin is never failed for time in which it could not run.
/// `ContinuousClock` (CLOCK_BOOTTIME) would instead fail every handshake in progress at a resume.
/// Tests pass a clock of their own to step through the deadlines exactly.
package struct SupervisionClock: Sendable {
    package typealias Instant = SuspendingClock.Instant

    let now: @Sendable () -> Instant
    /// Throws `CancellationError` when the task sleeping is cancelled.
    let sleepUntil: @Sendable (Instant) async throws -> Void

    package init<C: Clock>(_ clock: C) where C.Instant == SuspendingClock.Instant {
        now = { clock.now }
        sleepUntil = { try await clock.sleep(until: $0, tolerance: nil) }
    }

    package static let system = SupervisionClock(SuspendingClock())

    /// Sleeps until `deadline`; false when cancelled first.
    package func sleep(until deadline: Instant) async -> Bool {
        (try? await sleepUntil(deadline)) != nil
    }
}
