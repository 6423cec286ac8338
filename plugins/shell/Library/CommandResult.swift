import Glibc
import HammockCore

/// The shell plugin's own failure codes, beside the common ones in `SourceError.Code`.
extension SourceError.Code {
    static let signaled = Self("signaled")
    static let spawnFailed = Self("spawnFailed")
    static let stopped = Self("stopped")
}

/// How one run of a command ended, with what the messages need.
struct CommandResult: Sendable {
    enum Ending: Sendable {
        case exited(Int32)
        case signaled(Int32)
        case launchFailed(SourceError)
    }

    var ending: Ending
    /// Only the end of stderr: it is there to explain a failure, and a chatty command must not fill memory.
    var stderrTail: String
    /// Set when the plugin ended the command rather than the command ending by itself.
    var endReason: EndReason?

    /// The failure this run amounts to, or nil when it succeeded.
    func failure() -> SourceError? {
        switch endReason {
        case .timeout(let limit):
            return SourceError(message: "timed out after \(limit.humanReadable)", code: .timeout)
        case .cancelled:
            return SourceError(message: "cancelled", code: .cancelled)
        case .stopped:
            return SourceError(message: "the source was stopped", code: .stopped)
        case .outputTooLarge, .lineTooLong, nil:
            break
        }
        switch ending {
        case .launchFailed(let error):
            return error
        case .exited(0):
            return nil
        case .exited(let status):
            return SourceError(message: "exited with status \(status)\(stderrSuffix)", exitStatus: Int(status))
        case .signaled(let number):
            return SourceError(message: "killed by \(signalName(number))\(stderrSuffix)", code: .signaled)
        }
    }

    private var stderrSuffix: String { stderrTail.isEmpty ? "" : ": \(stderrTail)" }
}

/// `SIGTERM` rather than `15`, for messages people read.
func signalName(_ number: Int32) -> String {
    let names: [Int32: String] = [
        SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGILL: "SIGILL", SIGABRT: "SIGABRT",
        SIGBUS: "SIGBUS", SIGFPE: "SIGFPE", SIGKILL: "SIGKILL", SIGSEGV: "SIGSEGV", SIGPIPE: "SIGPIPE",
        SIGALRM: "SIGALRM", SIGTERM: "SIGTERM", SIGUSR1: "SIGUSR1", SIGUSR2: "SIGUSR2",
    ]
    return names[number] ?? "signal \(number)"
}

/// The last `limit` bytes of a command's stderr, trimmed to whole lines, for error messages: a chatty
/// command must not fill memory.
struct StderrTail {
    private var bytes: [UInt8] = []
    private var truncated = false
    let limit = 2048

    mutating func append(_ more: [UInt8]) {
        bytes += more
        // Trimmed in steps, not at every append: a command that writes a byte at a time must not cost a copy each.
        if bytes.count > 2 * limit {
            bytes.removeFirst(bytes.count - limit)
            truncated = true
        }
    }

    var text: String {
        var kept = bytes[...]
        var cut = truncated
        if kept.count > limit {
            kept = kept.suffix(limit)
            cut = true
        }
        if cut, let newline = kept.firstIndex(of: UInt8(ascii: "\n")) { kept = kept[(newline + 1)...] }
        return String(decoding: kept, as: UTF8.self).trimmingWhitespace()
    }
}
