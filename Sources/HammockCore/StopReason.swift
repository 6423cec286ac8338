/// Why hammock stopped: the `reason` of its last line, `bye` (docs/protocol.md), and of its log line
/// "stopping".
///
/// An enumeration rather than the text, because the engine decides by it (a consumer that closed stdout
/// is not waited for, nor told that it did not read); `rawValue` is the text the protocol has always
/// written, which consumers compare.
public enum StopReason: String, Sendable, CaseIterable, CustomStringConvertible {
    /// SIGTERM, or another signal that stops hammock, but SIGINT.
    case signal
    /// SIGINT (Ctrl-C).
    case interrupt
    /// `q` on the watch screen.
    case quit
    /// The consumer closed hammock's stdout.
    case stdoutClosed = "stdout closed"
    /// `--once`: every source answered (or failed) before the deadline.
    case once
    /// `--once`: the deadline passed with a source still loading or failed.
    case deadline
    /// `hammock serve --idle-exit`: no client for that long.
    case idle

    public var description: String { rawValue }
}
