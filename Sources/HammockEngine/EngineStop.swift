import Glibc
import HammockCore
import Logging

/// The end of a run, decided without I/O: what the stop does after the loop, in which order, how long the
/// writer may drain, and the exit status with what stderr says about it. `Engine.serve` carries it out;
/// `EngineStopTests` checks every rule without a process.
enum EngineStop {
    /// One thing the stop does once the loop has ended.
    enum Step: Sendable, Equatable, CaseIterable {
        /// No control line is taken any more; systemd hears `STOPPING=1`.
        case closeControls
        /// From here on a signal (a second one, for a stop) means: stop waiting for the consumer.
        case rerouteSignals
        /// On-click commands still running end (a click may start something that runs on).
        case endClickCommands
        /// Every plugin host (running, and those a reload made) shuts its plugin down: a shutdown line, the
        /// grace, then SIGKILL to the guard's group. This ends any reload step waiting on one.
        case shutDownPlugins
        /// Reload steps, retired hosts and click commands: the children of the loop's `work` group.
        case waitForWork
        /// Once more, now that no plugin runs: whatever a guard missed ends with hammock.
        case sweepOrphans
        /// The cache writes what waits, then its task ends.
        case finishCache
        /// The log line "stopping", with the reason.
        case logStopping
        /// The core's last word: `bye`, unless `--once` said it already.
        case bye
        /// The writer drains, and the exit status is decided (`verdict`).
        case finishOutput
    }

    /// The steps in the order they are taken: nothing is left running when `bye` is written, and `bye` is
    /// the last line.
    static let steps: [Step] = Step.allCases

    /// How long the writer goes on for a consumer that does not read.
    enum Drain: Sendable, Equatable {
        /// `--once` is done: until its deadline and the drain time after it (counted from the start).
        case untilOnceOutputDeadline
        /// Any other stop: `RunOptions.drainTimeout`.
        case drainTimeout
    }

    static func drain(isFinished: Bool) -> Drain {
        isFinished ? .untilOnceOutputDeadline : .drainTimeout
    }

    /// What the run ended with, as the stop found it once the writer was done.
    struct Ending: Sendable, Equatable {
        /// `--once`.
        var once: Bool
        /// `--once` got to its end (the core's `.finish`), with `finishedStatus`.
        var isFinished: Bool
        var finishedStatus: Int32 = 0
        /// How the writer's drain ended.
        var completion: OutputWriter.Completion
        /// Why the loop stopped, when something asked it to (a signal, a closed stdout), as it stood when the
        /// loop ended (a second signal during the drain only cuts the drain short: `completion` says so).
        var stopReason: StopReason?
        var stopSignal: Int32?
        /// `--once`'s output deadline had passed when the drain ended.
        var outputDeadlinePassed: Bool = false
        /// For the messages.
        var onceDeadline: Duration = .seconds(30)
        var drainTimeout: Duration = .seconds(2)
    }

    /// A log record of the stop.
    struct Record: Sendable, Equatable {
        var level: Logger.Level
        var message: String
    }

    /// The exit status and what stderr says about it.
    ///
    /// Continuous mode exits 0 however it stopped. `--once` exits 0 only when every source loaded and every
    /// line, `bye` last, reached the consumer by its deadline and the drain time after it: a consumer that
    /// leaves first, or has not read by then, gets status 1, a signal 128 + its number.
    static func verdict(_ ending: Ending) -> (status: Int32, records: [Record]) {
        if ending.isFinished {
            switch ending.completion {
            case .complete:
                return (ending.finishedStatus, [])
            case .incomplete(let unwritten) where ending.outputDeadlinePassed:
                return (1, [.init(level: .error, message: "stdout was not read before --once's deadline (\(ending.onceDeadline.humanReadable), and \(ending.drainTimeout.humanReadable) to write): \(unwritten) lines not written, bye included")])
            case .incomplete(let unwritten):
                return (1, [.init(level: .error, message: "stdout was closed before --once had written every line: \(unwritten) not written, bye included")])
            case .interrupted:
                let signal = ending.stopSignal ?? SIGTERM
                return (128 + signal, [.init(level: .error, message: "stopped by signal \(signal) before the consumer had read every line of --once; the output is cut short")])
            }
        }
        var records: [Record] = []
        if ending.completion != .complete && ending.stopReason != .stdoutClosed {
            records.append(.init(level: .notice, message: "stdout was not read within \(ending.drainTimeout.humanReadable) of the stop: the last lines and bye were not written"))
        }
        guard ending.once else { return (0, records) }
        // `--once` did not get to the end: its status must not say it did.
        if let signal = ending.stopSignal {
            return (128 + signal, records + [.init(level: .error, message: "--once was stopped by signal \(signal) before every source was loaded")])
        }
        return (1, records + [.init(level: .error, message: "stdout was closed before --once was done")])
    }
}
