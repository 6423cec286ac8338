import Glibc
import HammockSystem
import Testing

/// `ChildProcess` and `PipeChunks` with real processes: the one way hammock starts a process.
@Suite(.timeLimit(.minutes(1)))
struct ChildProcessTests {
    @Test("a child given a stdin pipe reads what is written to it; its stdout comes back, and it exits 0")
    func stdinToStdout() async throws {
        let process = try spawn(["/bin/cat"], input: .pipe)
        let input = try #require(process.standardInput)
        try Descriptor.writeAllWithoutBrokenPipeSignal(Array("one\ntwo\n".utf8), to: input)
        close(input)
        var output: [UInt8] = []
        for await chunk in PipeChunks(reading: process.standardOutput, name: "test.stdout") { output += chunk }
        close(process.standardError)
        #expect(String(decoding: output, as: UTF8.self) == "one\ntwo\n")
        #expect(try process.waitForEnd() == .exited(0))
    }

    @Test("stdin is /dev/null without a pipe; stderr is its own pipe; the status and the environment are the child's")
    func nullInputAndStatus() async throws {
        let process = try spawn(
            ["/bin/sh", "-c", "cat; echo \"$GREETING\" >&2; exit 3"], input: .null, environment: ["GREETING=hello"])
        #expect(process.standardInput == nil)
        var output: [UInt8] = []
        for await chunk in PipeChunks(reading: process.standardOutput, name: "test.stdout") { output += chunk }
        var errors: [UInt8] = []
        for await chunk in PipeChunks(reading: process.standardError, name: "test.stderr") { errors += chunk }
        #expect(output.isEmpty)
        #expect(String(decoding: errors, as: UTF8.self) == "hello\n")
        #expect(try process.waitForEnd() == .exited(3))
    }

    @Test("the child leads a process group of its own, and a signal's end is told as such")
    func ownGroupAndSignal() async throws {
        let process = try spawn(["/bin/sleep", "30"], input: .null)
        #expect(getpgid(process.pid) == process.pid)
        #expect(try process.reapIfEnded() == nil)
        kill(process.pid, SIGKILL)
        #expect(try process.waitForEnd() == .signaled(SIGKILL))
        close(process.standardOutput)
        close(process.standardError)
    }

    @Test("a program that is not there is the spawn's failure, with the exec's errno")
    func missingProgram() {
        let started = ChildProcess.spawn(
            path: "/nonexistent/program", arguments: CStringArray(["program"]), environment: CStringArray([]),
            standardInput: .pipe, nonBlockingOutput: false)
        #expect(started.map(\.pid) == .failure(.spawn(SystemCallError(code: ENOENT))))
    }

    @Test("a reader that does not take chunks holds the pipe's writer back instead of buffering all")
    func chunksWaitForTheConsumer() async throws {
        // 64 MiB written; with 4 chunks waiting at most, the writer cannot finish before the reader takes any.
        let process = try spawn(["/bin/sh", "-c", "head -c 67108864 /dev/zero; echo done >&2"], input: .null)
        let output = PipeChunks(reading: process.standardOutput, name: "test.stdout", maximumWaiting: 4)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try process.reapIfEnded() == nil)
        var total = 0
        for await chunk in output { total += chunk.count }
        #expect(total == 64 << 20)
        close(process.standardError)
        _ = try process.waitForEnd()
    }

    @Test("a consumer that stops taking chunks (its task cancelled) does not leave the pipe's writer blocked")
    func stoppedConsumerLetsTheWriterFinish() async throws {
        let process = try spawn(["/bin/sh", "-c", "head -c 67108864 /dev/zero"], input: .null)
        let output = PipeChunks(reading: process.standardOutput, name: "test.stdout", maximumWaiting: 4)
        await Task {
            var chunks = output.makeAsyncIterator()
            _ = await chunks.next()
            withUnsafeCurrentTask { $0?.cancel() }
            // Cancelled, the stream ends: what it still holds comes out, then nothing more.
            while await chunks.next() != nil {}
        }.value
        close(process.standardError)
        // Blocked on a full pipe, the writer never ends; drained, it ends at once.
        let deadline = ContinuousClock.now + .seconds(20)
        var ended = try process.reapIfEnded()
        while ended == nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            ended = try process.reapIfEnded()
        }
        #expect(ended == .exited(0))
        if ended == nil { kill(process.pid, SIGKILL) }
    }

    private func spawn(_ argv: [String], input: ChildProcess.Input, environment: [String] = []) throws -> ChildProcess {
        try ChildProcess.spawn(
            path: argv[0], arguments: CStringArray(argv), environment: CStringArray(["PATH=/usr/bin:/bin"] + environment),
            standardInput: input, nonBlockingOutput: false
        ).get()
    }
}
