/// How the engine's process ended.
public enum EngineExitStatus: Sendable, Hashable, CustomStringConvertible {
    /// It exited with this status.
    case exited(Int32)
    /// A signal ended it (`SIGKILL` is 9).
    case signaled(Int32)
    /// The engine was attached to, not launched: its output ended, and how the process ended is its
    /// launcher's to know.
    case unknown

    public var description: String {
        switch self {
        case .exited(let status): "exit status \(status)"
        case .signaled(let signal): "killed by signal \(signal)"
        case .unknown: "its output ended"
        }
    }
}

/// What ends a `Hammock`'s streams and control calls, or keeps it from starting.
public enum HammockError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The engine exited (or, attached, its output ended) without being asked to stop. `stderrTail` holds the
    /// last lines it wrote on stderr: where it says why (a configuration error, a crash).
    case engineExited(status: EngineExitStatus, stderrTail: String)
    /// The engine could not carry out a control line (an unknown source or view, a refused reload); its
    /// `error` line's message.
    case refused(String)
    /// `stop()` was called: pending control calls end with this, and later ones fail with it at once.
    case stopped
    /// No `hammock` executable at any of these paths (`binary:`, else `$HAMMOCK_BIN`, else beside the app and
    /// on `PATH`).
    case binaryNotFound(searched: [String])
    /// A wait with a deadline (`waitUntilEnded(timeout:)`) ran out; what was waited for.
    case timedOut(String)
    /// The engine could not be started, or its control line could not be written.
    case io(String)
    /// The engine's stdout carried a line that is not hammock's (not a JSON object, no `type`, a known type
    /// without its fields, a line beyond the client's limit): what is at the other end is not a hammock engine,
    /// or something else writes on its stdout. Every stream and call ends with it; `stop()` stops the engine.
    case protocolViolation(String)

    public var description: String {
        switch self {
        case .engineExited(let status, let tail):
            tail.isEmpty ? "hammock ended (\(status))" : "hammock ended (\(status)); its stderr ended with:\n\(tail)"
        case .refused(let message): "hammock refused the control line: \(message)"
        case .stopped: "hammock was stopped"
        case .binaryNotFound(let searched):
            """
            no hammock executable at \(searched.joined(separator: ", ")): pass `binary:`, set HAMMOCK_BIN, \
            or put hammock beside the app or on PATH
            """
        case .timedOut(let what): "timed out: \(what)"
        case .io(let message): message
        case .protocolViolation(let problem): "hammock's output broke its protocol: \(problem)"
        }
    }
}
