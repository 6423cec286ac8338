import Foundation
import Synchronization
import Testing

/// A program run to its end with a deadline, for the tests that need a working folder or an environment of
/// their own (`HammockProcess.execute` gives a fresh folder and a small environment). A read of a pipe to its
/// end, or `waitUntilExit`, waits for ever on a program that hangs, or whose child keeps the pipe open; here
/// every wait has a deadline, and a program still running at it is killed and the test told.
public enum BoundedRun {
    /// Runs `executable ARGUMENTS` with stdin empty, reading stdout and stderr as it goes; returns how it ended
    /// and what it wrote. Throws (after killing it) when it has not ended within `timeout`, or when its output
    /// has not reached its end within 5 s of its exit (a child of its holds a pipe open).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
        timeout: Duration, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> CompletedRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = errors
        let stdout = Collected()
        let stderr = Collected()
        try process.run()
        // Threads of their own: a read blocks its thread, which must not be one of the cooperative pool's.
        stdout.read(output.fileHandleForReading)
        stderr.read(errors.fileHandleForReading)
        let started = ContinuousClock.now
        let what = ([executable] + arguments).joined(separator: " ")
        while process.isRunning {
            if ContinuousClock.now - started >= timeout {
                kill(process.processIdentifier, SIGKILL)
                throw HammockHarnessError(
                    message: "\(what) was still running after \(timeout) (killed); stderr: \(stderr.text.suffix(2000))",
                    sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let ended = ContinuousClock.now
        while !(stdout.finished && stderr.finished) {
            if ContinuousClock.now - ended >= .seconds(5) {
                throw HammockHarnessError(
                    message: "\(what) exited, but its output did not reach its end within 5 s (a child holds it open)",
                    sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let termination: Termination =
            process.terminationReason == .uncaughtSignal
            ? .signaled(process.terminationStatus) : .exited(process.terminationStatus)
        return CompletedRun(termination: termination, stdout: stdout.text, stderr: stderr.text)
    }

    /// What one pipe delivered, read to its end by a thread of its own.
    private final class Collected: Sendable {
        private struct State {
            var data = Data()
            var finished = false
        }
        private let state = Mutex(State())

        func read(_ handle: FileHandle) {
            Thread { [self] in
                let data = handle.readDataToEndOfFile()
                state.withLock { state in
                    state.data = data
                    state.finished = true
                }
            }.start()
        }

        var finished: Bool { state.withLock { $0.finished } }
        var text: String { state.withLock { String(decoding: $0.data, as: UTF8.self) } }
    }
}
