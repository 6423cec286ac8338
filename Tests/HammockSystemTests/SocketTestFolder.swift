import Glibc
import HammockSystem
import Testing

/// A fresh folder under /tmp (mode 0700, as `mkdtemp` makes it) for one test's sockets and locks, removed
/// with everything in it by `remove()`.
struct SocketTestFolder {
    let path: String

    init() throws {
        var template = Array("/tmp/hammock-socket-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!).map { String(cString: $0) } }
        path = try #require(made, "mkdtemp: \(String(cString: strerror(errno)))")
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    func remove() {
        guard
            let process = try? ChildProcess.spawn(
                path: "/bin/rm", arguments: CStringArray(["rm", "-rf", path]), environment: CStringArray([]),
                standardInput: .null, nonBlockingOutput: false
            ).get()
        else { return }
        close(process.standardOutput)
        close(process.standardError)
        _ = try? process.waitForEnd()
    }
}

/// `lstat`'s file type and permission bits of `path`, nil when there is nothing there.
func fileMode(_ path: String) -> (type: mode_t, permissions: mode_t)? {
    var status = stat()
    guard lstat(path, &status) == 0 else { return nil }
    return (status.st_mode & S_IFMT, status.st_mode & 0o7777)
}

/// A process of the test's own (python3, flock, setpriv), with its first line of output read when asked.
struct TestChild {
    let process: ChildProcess
    private let lines: AsyncStream<String>

    init(_ argv: [String]) throws {
        process = try ChildProcess.spawn(
            path: argv[0], arguments: CStringArray(argv), environment: CStringArray(["PATH=/usr/bin:/bin"]),
            standardInput: .null, nonBlockingOutput: false
        ).get()
        let output = try PipeChunks(reading: process.standardOutput, name: "test.child")
        lines = AsyncStream { continuation in
            let task = Task {
                var pending: [UInt8] = []
                for await chunk in output {
                    pending += chunk
                    while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                        continuation.yield(String(decoding: pending[..<newline], as: UTF8.self))
                        pending.removeSubrange(...newline)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The child's next line of stdout, nil at its end.
    func nextLine() async -> String? {
        var iterator = lines.makeAsyncIterator()
        return await iterator.next()
    }

    /// SIGKILLs it (when it still runs) and reaps it.
    func kill() throws -> ChildProcess.Termination {
        _ = Glibc.kill(process.pid, SIGKILL)
        close(process.standardError)
        return try process.waitForEnd()
    }

    func waitForEnd() throws -> ChildProcess.Termination {
        close(process.standardError)
        return try process.waitForEnd()
    }
}
