import HammockCore
import HammockPluginKit
import Subprocess

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
