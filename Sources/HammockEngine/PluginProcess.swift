import Glibc
import HammockProtocol
import Subprocess
import SystemPackage

/// Runs a plugin program the way hammock runs every plugin, for the plugin host and for
/// `hammock plugin check` alike.
///
/// The plugin gets a process group of its own (a terminal's Ctrl-C is hammock's to handle, and a kill reaches
/// whatever the plugin started in its group). Its stdin is fed from `input`; its stderr is cut into lines for
/// `standardErrorLine`; its stdout is cut into protocol lines (at most `maximumLineLength` bytes) for
/// `receive`. When its stdout closes the plugin is ending, so `input` is finished and nothing more is
/// written to it. Returns how it ended, in words: "exited with status 3".
func runPluginProcess(
    _ command: [String], input: AsyncStream<[UInt8]>, inputContinuation: AsyncStream<[UInt8]>.Continuation,
    maximumLineLength: Int, started: (pid_t) -> Void,
    standardErrorLine: @escaping @Sendable ([UInt8]) -> Void,
    receive: (LineSplitter.Piece) async -> Void
) async -> String {
    var platformOptions = PlatformOptions()
    platformOptions.processGroupID = 0
    let executable: Executable = command[0].contains("/") ? .path(FilePath(command[0])) : .name(command[0])
    // Tells a plugin whose child it must stay: one that finds itself re-parented before it could ask for a
    // parent-death signal then knows that the engine is already gone (see HammockPluginKit's ParentWatch).
    let environment = Environment.inherit.updating(["HAMMOCK_ENGINE_PID": String(getpid())])
    let configuration = Configuration(
        executable: executable, arguments: Arguments(Array(command.dropFirst())), environment: environment,
        platformOptions: platformOptions)
    do {
        let result = try await run(configuration, input: .inputWriter, output: .sequence, error: .sequence) {
            execution in
            started(execution.processIdentifier.value)
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    do {
                        for await line in input { _ = try await execution.standardInputWriter.write(line) }
                        try await execution.standardInputWriter.finish()
                    } catch {
                        // The plugin closed its stdin or died; its exit is reported below.
                    }
                }
                group.addTask {
                    var splitter = LineSplitter(maximumLineLength: 64 << 10)
                    let forward: (LineSplitter.Piece) -> Void = { piece in
                        if case .line(let bytes) = piece { standardErrorLine(bytes) }
                    }
                    do {
                        for try await buffer in execution.standardError {
                            buffer.withUnsafeBytes { splitter.feed($0, emit: forward) }
                        }
                    } catch {}
                    splitter.finish(emit: forward)
                }
                var splitter = LineSplitter(maximumLineLength: maximumLineLength)
                do {
                    for try await buffer in execution.standardOutput {
                        var pieces: [LineSplitter.Piece] = []
                        buffer.withUnsafeBytes { splitter.feed($0) { pieces.append($0) } }
                        for piece in pieces { await receive(piece) }
                    }
                } catch {}
                var last: [LineSplitter.Piece] = []
                splitter.finish { last.append($0) }
                for piece in last { await receive(piece) }
                inputContinuation.finish()
            }
        }
        switch result.terminationStatus {
        case .exited(let code): return "exited with status \(code)"
        case .signaled(let signal): return "was killed by signal \(signal)"
        }
    } catch {
        return "could not be started (\(command.joined(separator: " "))): \(error)"
    }
}
