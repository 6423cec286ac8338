// hammock-client-probe: a small app over HammockClient alone, for `ClientSignalTests`. It writes control lines
// to engines whose stdin nobody reads, with SIGPIPE at its default action (which ends the process), and says
// what happened. In the test runner that check would see nothing whenever SwiftNIO has ignored SIGPIPE for the
// whole process (it does at its first socket); this process links no NIO and starts no thread that touches it.
//
//     hammock-client-probe FOLDER     # FOLDER: an empty folder of the test's, for the fake engine's script
//
// Prints one line per check (`attached: …`, `launched: …`, `disposition: …`) and exits 0; killed by SIGPIPE
// when a write of the client let the signal through.
import Foundation
import HammockClient

/// Whether SIGPIPE's disposition is the default one.
func brokenPipeIsDefault() -> Bool {
    var current = sigaction()
    sigaction(SIGPIPE, nil, &current)
    return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_DFL, to: Int.self)
}

/// Unbuffered: a probe that dies next has said everything before.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// A control call to an engine whose stdin's reader is gone: its line meets EPIPE, and the call ends with the
/// engine's end (`end`, called once the write had its time), never with the process.
func snapshotFails(_ hammock: Hammock, endingTheEngine end: @Sendable () -> Void) async -> String {
    let call = Task {
        do {
            try await hammock.snapshot()
            return "returned"
        } catch {
            return "threw \(error)"
        }
    }
    // The line is handed to the writer as soon as the call runs; whenever the write runs, it runs before the
    // pipe's close at the end, so it always meets EPIPE. The pause lets the call start first.
    try? await Task.sleep(for: .milliseconds(300))
    end()
    return await call.value
}

func run(folder: String) async throws {
    // Whatever the parent left: SIGPIPE at its default action, not blocked.
    signal(SIGPIPE, SIG_DFL)
    var brokenPipe = sigset_t()
    sigemptyset(&brokenPipe)
    sigaddset(&brokenPipe, SIGPIPE)
    pthread_sigmask(SIG_UNBLOCK, &brokenPipe, nil)

    // Attached: the engine's stdin is a pipe whose reading end is closed; its stdout stays open.
    var input: [Int32] = [-1, -1]
    var output: [Int32] = [-1, -1]
    guard pipe(&input) == 0, pipe(&output) == 0 else { throw HammockError.io("no pipe") }
    close(input[0])
    let attached = try Hammock(attachingTo: input[1], output: output[0])
    let outputEnd = output[1]
    say("attached: \(await snapshotFails(attached) { close(outputEnd) })")
    await attached.stop()
    say("disposition after attached: \(brokenPipeIsDefault() ? "default" : "changed")")

    // Launched: an "engine" that closes its stdin, says hello and lives on, so the client's write meets a pipe
    // with no reader while the engine still runs (a real engine killed with SIGKILL leaves that to a race).
    let script = folder + "/closed-stdin-engine"
    try """
        #!/bin/sh
        exec 0<&-
        echo '{"type":"hello","seq":1,"protocol":1,"version":"probe","sources":[],"views":[]}'
        exec sleep 30
        """.write(toFile: script, atomically: true, encoding: .utf8)
    chmod(script, 0o755)
    let launched = try await Hammock.launch(configuration: "unused.yaml", binary: script)
    let pid = launched.processIdentifier ?? 0
    say("launched: \(await snapshotFails(launched) { kill(pid, SIGKILL) })")
    await launched.stop()
    say("disposition after launched: \(brokenPipeIsDefault() ? "default" : "changed")")
}

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: hammock-client-probe FOLDER\n".utf8))
    exit(2)
}
try await run(folder: CommandLine.arguments[1])
