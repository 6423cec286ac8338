import Glibc
import HammockCore
import HammockPluginKit
import Subprocess

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
    func failure(timeoutMessage: (Duration) -> String = { "timed out after \(formatDuration($0))" }) -> SourceError? {
        switch endReason {
        case .timeout(let limit):
            return SourceError(message: timeoutMessage(limit), code: .timeout)
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

/// Starts a command and feeds its stdout to `consume` until it returns false or the output ends.
///
/// The run is never cancelled from outside: ending it goes through `handle`, so that the whole process
/// group is ended the same way whatever the cause (timeout, cancel, stop, too much output), and so that
/// this function returns only once the command has been reaped.
func runCommand(
    _ options: ShellOptions, _ configuration: Subprocess.Configuration, handle: ProcessGroupHandle,
    consume: ([UInt8]) async -> Bool
) async -> CommandResult {
    let outcome: CommandResult
    do {
        let result = try await Subprocess.run(configuration, input: .none, output: .sequence, error: .sequence) {
            execution in
            handle.attach(execution.processIdentifier.value)
            async let tail = readTail(of: execution.standardError)
            do {
                for try await buffer in execution.standardOutput {
                    let bytes = buffer.withUnsafeBytes { Array($0) }
                    if await !consume(bytes) { break }
                }
            } catch {
                pluginLog("reading stdout failed: \(error)")
            }
            return await tail
        }
        let ending: CommandResult.Ending =
            switch result.terminationStatus {
            case .exited(let status): .exited(status)
            case .signaled(let number): .signaled(number)
            }
        outcome = CommandResult(ending: ending, stderrTail: result.closureResult, endReason: nil)
    } catch let error as SubprocessError {
        outcome = CommandResult(ending: .launchFailed(launchError(error, options)), stderrTail: "", endReason: nil)
    } catch {
        outcome = CommandResult(
            ending: .launchFailed(SourceError(message: "could not run the command: \(error)", code: .spawnFailed)),
            stderrTail: "", endReason: nil)
    }
    await handle.finish()
    var finished = outcome
    finished.endReason = handle.endReason
    return finished
}

/// How to start a source's command, worked out once when the source is configured.
///
/// A source polled every second starts its command 86,400 times a day. Resolving the program on `PATH`
/// and copying this process's environment each time cost more CPU than the command itself (`cat
/// /proc/loadavg`), so both happen here, once: the environment is the plugin's own (fixed for its life)
/// with the source's `env` on top, and the program's path is looked up on that environment's `PATH`.
/// A program not found now is left to be looked up at each run, so one installed later is found then.
func makeConfiguration(_ options: ShellOptions) -> Subprocess.Configuration {
    var platform = PlatformOptions()
    // A group of its own: one signal reaches every process the command starts, and never the plugin.
    platform.processGroupID = 0
    platform.teardownSequence = [
        .gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: ProcessGroupHandle.gracePeriod)
    ]
    var environment = pluginEnvironment
    for (name, value) in options.environment { environment[name] = value }
    // Sources without `env` of their own share one copy: thousands of them must not each hold one.
    let entries = options.environment.isEmpty ? pluginEnvironmentEntries : environmentEntries(environment)
    let executable: Executable
    let arguments: [String]
    switch options.program {
    case .argv(let argv):
        let program = argv[0]
        if program.contains("/") {
            executable = .path(.init(program))
        } else if let found = findOnPath(program, path: environment["PATH"]) {
            executable = .path(.init(found))
        } else {
            executable = .name(program)
        }
        arguments = Array(argv.dropFirst())
    case .script(let script):
        executable = .path("/bin/sh")
        arguments = ["-c", script]
    }
    return Subprocess.Configuration(
        executable: executable, arguments: Arguments(arguments), environment: .custom(entries),
        workingDirectory: options.workingDirectory.map { .init($0) }, platformOptions: platform)
}

/// This process's environment, read once.
private let pluginEnvironment: [String: String] = {
    var values: [String: String] = [:]
    var entry = environ
    while let pointer = entry.pointee {
        let text = String(cString: pointer)
        if let equals = text.firstIndex(of: "=") {
            values[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        entry += 1
    }
    return values
}()

private let pluginEnvironmentEntries = environmentEntries(pluginEnvironment)

/// `NAME=value` entries, NUL-terminated, as the process receives them.
private func environmentEntries(_ environment: [String: String]) -> [[UInt8]] {
    environment.map { Array("\($0.key)=\($0.value)\0".utf8) }
}

/// The first executable file named `program` in the directories of `path`, as a shell would find it.
private func findOnPath(_ program: String, path: String?) -> String? {
    for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
        let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + program
        var info = stat()
        if access(candidate, X_OK) == 0, stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
            return candidate
        }
    }
    return nil
}

private func launchError(_ error: SubprocessError, _ options: ShellOptions) -> SourceError {
    let program: String =
        switch options.program {
        case .argv(let argv): argv[0]
        case .script: "/bin/sh"
        }
    switch error.code {
    case .executableNotFound:
        return SourceError(message: "command not found: \(program)", code: .commandNotFound)
    case .failedToChangeWorkingDirectory:
        return SourceError(
            message: "cannot change to the working directory \"\(options.workingDirectory ?? "")\"", code: .badWorkingDirectory)
    default:
        let underlying = error.underlyingError.map { "\($0)" } ?? ""
        if underlying.contains("No such file") || underlying.contains("ENOENT") {
            return SourceError(message: "command not found: \(program)", code: .commandNotFound)
        }
        return SourceError(message: "could not run \(program): \(error)", code: .spawnFailed)
    }
}

/// Keeps the last `limit` bytes of a stream, trimmed to whole lines, for error messages.
private func readTail(of stream: SubprocessOutputSequence, limit: Int = 2048) async -> String {
    var tail: [UInt8] = []
    var truncated = false
    do {
        for try await buffer in stream {
            buffer.withUnsafeBytes { tail.append(contentsOf: $0) }
            if tail.count > 2 * limit {
                tail.removeFirst(tail.count - limit)
                truncated = true
            }
        }
    } catch {
        // A read error ends the tail where it is; the exit status still tells what happened.
    }
    if tail.count > limit {
        tail.removeFirst(tail.count - limit)
        truncated = true
    }
    var text = tail[...]
    if truncated, let newline = text.firstIndex(of: UInt8(ascii: "\n")) { text = text[(newline + 1)...] }
    return String(decoding: text, as: UTF8.self).trimmingWhitespace()
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}

/// `5s`, `1.5s`, `250ms`: how the user wrote it in the configuration, near enough.
func formatDuration(_ duration: Duration) -> String {
    let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    if milliseconds < 1000 { return "\(milliseconds)ms" }
    if milliseconds % 1000 == 0 { return "\(milliseconds / 1000)s" }
    let tenths = (milliseconds + 50) / 100
    return "\(tenths / 10).\(tenths % 10)s"
}

