import CHammockSystem
import Glibc
import HammockCore
import HammockPluginKit
import HammockSystem

/// Starts a command and feeds its stdout to `consume` until it returns false or the output ends, `watcher`
/// waking it when the command has something to read or has ended. A command that runs past `timeout` is
/// ended (`EndReason.timeout`).
///
/// The run is never cancelled from outside: ending it goes through `handle`, so that the whole process
/// group is ended the same way whatever the cause (timeout, cancel, stop, too much output), and so that
/// this function returns only once the command has been reaped. It returns when stdout and stderr have
/// both reached their end and the command has ended: a background job that keeps a pipe open keeps the
/// run going until the group is ended.
func runCommand(
    _ plan: CommandPlan, handle: ProcessGroupHandle, watcher: CommandWatcher, timeout: Duration? = nil,
    consume: ([UInt8]) async -> Bool
) async -> CommandResult {
    let deadline = timeout.map { ContinuousClock.now + $0 }
    let command: SpawnedCommand
    switch SpawnedCommand.start(plan) {
    case .success(let started): command = started
    case .failure(let error):
        await handle.finish()
        return CommandResult(ending: .launchFailed(error), stderrTail: "", endReason: handle.endReason)
    }
    handle.attach(command.pid)

    let wakeup = Wakeup()
    let token = watcher.watch([command.stdout, command.stderr, command.pidfd], wakeup: wakeup, deadline: deadline)
    var timedOut = false
    var stdout: Int32? = command.stdout
    var stderr: Int32? = command.stderr
    var tail = StderrTail()
    var ending: CommandResult.Ending?
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
    defer { scratch.deallocate() }
    while stdout != nil || stderr != nil || ending == nil {
        // Edge-triggered: everything there is read before waiting again. A chunk at a time from each pipe,
        // so that a command writing much to one does not stall on the other.
        var progressed = false
        if let descriptor = stdout {
            switch readChunk(descriptor, scratch) {
            case .bytes(let bytes):
                progressed = true
                if await !consume(bytes) {
                    // The command's group is being ended; what it still writes goes nowhere (EPIPE).
                    stdout = nil
                    watcher.close(descriptor)
                }
            case .end:
                progressed = true
                stdout = nil
                watcher.close(descriptor)
            case .nothingYet:
                break
            }
        }
        if let descriptor = stderr {
            switch readChunk(descriptor, scratch) {
            case .bytes(let bytes):
                progressed = true
                tail.append(bytes)
            case .end:
                progressed = true
                stderr = nil
                watcher.close(descriptor)
            case .nothingYet:
                break
            }
        }
        if ending == nil, let ended = command.reapIfEnded() {
            progressed = true
            ending = ended
        }
        // Whether or not the command itself has ended: a job it left behind may hold a pipe open.
        if let timeout, let deadline, !timedOut, ContinuousClock.now >= deadline {
            timedOut = true
            handle.endSoon(.timeout(timeout))
        }
        if !progressed { await wakeup.wait() }
    }
    watcher.close(command.pidfd)
    watcher.stopWatching(token)
    await handle.finish()
    // The loop ends only once the command has been reaped.
    return CommandResult(ending: ending!, stderrTail: tail.text, endReason: handle.endReason)
}

/// A command just started (`ChildProcess`, the one way hammock starts a process): its pid (which is also its
/// process group's id), the read ends of its stdout and stderr (non-blocking), and a pidfd that becomes
/// readable when it ends.
struct SpawnedCommand {
    let process: ChildProcess
    var pid: pid_t { process.pid }
    var stdout: Int32 { process.standardOutput }
    var stderr: Int32 { process.standardError }
    var pidfd: Int32 { process.pidfd }

    static func start(_ plan: CommandPlan) -> Result<SpawnedCommand, SourceError> {
        guard let executable = plan.resolvedExecutable() else {
            return .failure(SourceError(message: "command not found: \(plan.program)", code: .commandNotFound))
        }
        let started = ChildProcess.spawn(
            path: executable, arguments: plan.arguments, environment: plan.environment,
            workingDirectory: plan.workingDirectory, standardInput: .null, nonBlockingOutput: true)
        switch started {
        case .success(let process): return .success(SpawnedCommand(process: process))
        // A pipe that cannot be made (out of descriptors) says so; only the spawn's own errors need telling apart.
        case .failure(.pipe(let error)): return .failure(couldNotRun(plan, error.code))
        case .failure(.spawn(let error)): return .failure(spawnFailure(plan, error.code))
        }
    }

    /// How the command ended, once it has; it is reaped then, and this must not be called again.
    func reapIfEnded() -> CommandResult.Ending? {
        do {
            switch try process.reapIfEnded() {
            case .exited(let code)?: return .exited(code)
            case .signaled(let signal)?: return .signaled(signal)
            case nil: return nil
            }
        } catch {
            // Only a bug could bring this (the pidfd is the plugin's own child's, reaped here alone).
            return .launchFailed(
                SourceError(message: "could not learn how the command ended: \(error)", code: .spawnFailed))
        }
    }
}

/// Why a command could not be started, in the user's terms. glibc brings the child's `chdir` or `exec` error
/// back as one errno, so a working directory that is not there is told apart by looking at it.
private func spawnFailure(_ plan: CommandPlan, _ error: Int32) -> SourceError {
    if let directory = plan.workingDirectory {
        var info = stat()
        if stat(directory, &info) != 0 || info.st_mode & S_IFMT != S_IFDIR || access(directory, X_OK) != 0 {
            return SourceError(message: "cannot change to the working directory \"\(directory)\"", code: .badWorkingDirectory)
        }
    }
    if error == ENOENT {
        return SourceError(message: "command not found: \(plan.program)", code: .commandNotFound)
    }
    return couldNotRun(plan, error)
}

private func couldNotRun(_ plan: CommandPlan, _ error: Int32) -> SourceError {
    SourceError(message: "could not run \(plan.program): \(String(cString: strerror(error)))", code: .spawnFailed)
}

private enum Chunk {
    case bytes([UInt8])
    case end
    case nothingYet
}

/// One read of what a non-blocking pipe holds, through `scratch`, copied out at its exact size.
private func readChunk(_ descriptor: Int32, _ scratch: UnsafeMutableRawBufferPointer) -> Chunk {
    var count: Int
    repeat {
        count = read(descriptor, scratch.baseAddress, scratch.count)
    } while count < 0 && errno == EINTR
    if count > 0 { return .bytes(Array(UnsafeRawBufferPointer(rebasing: scratch[..<count]))) }
    if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .nothingYet }
    // 0 is the end; any other error on a pipe cannot be read past either.
    return .end
}
