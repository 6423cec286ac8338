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
        for await chunk in try PipeChunks(reading: process.standardOutput, name: "test.stdout") { output += chunk }
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
        for await chunk in try PipeChunks(reading: process.standardOutput, name: "test.stdout") { output += chunk }
        var errors: [UInt8] = []
        for await chunk in try PipeChunks(reading: process.standardError, name: "test.stderr") { errors += chunk }
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
        let output = try PipeChunks(reading: process.standardOutput, name: "test.stdout", maximumWaiting: 4)
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
        let output = try PipeChunks(reading: process.standardOutput, name: "test.stdout", maximumWaiting: 4)
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

    @Test("stopped, the reading takes what the pipe holds and ends, though a process the child left (setsid) still holds it")
    func stopReadsWhatIsBufferedAndEnds() async throws {
        // The child writes (the last line without its newline), says its sleeper's pid on stderr and closes
        // it, and waits; the sleeper, in a session of its own, holds stdout for 30 s.
        let process = try spawn(
            ["/bin/sh", "-c", "setsid sleep 30 2>/dev/null & printf 'before\\nlast'; echo $! >&2; exec sleep 30 2>&-"],
            input: .null)
        var errors: [UInt8] = []
        for await chunk in try PipeChunks(reading: process.standardError, name: "test.stderr") { errors += chunk }
        let sleeper = pid_t(String(decoding: errors, as: UTF8.self).split(separator: "\n").first ?? "")
        defer {
            // Hammock's tests may make this process a subreaper: the sleeper is reaped here if it came to it.
            if let sleeper, kill(sleeper, SIGKILL) == 0 { _ = waitpid(sleeper, nil, 0) }
        }
        kill(process.pid, SIGKILL)
        #expect(try process.waitForEnd() == .signaled(SIGKILL))
        // The child's end, told before the reading starts: all it wrote waits in the pipe.
        var stop: [Int32] = [-1, -1]
        #expect(pipe(&stop) == 0)
        defer { for end in stop { close(end) } }
        #expect(write(stop[1], "x", 1) == 1)
        let start = ContinuousClock.now
        var output: [UInt8] = []
        for await chunk in try PipeChunks(reading: process.standardOutput, name: "test.stdout", stopDescriptor: stop[0]) {
            output += chunk
        }
        #expect(String(decoding: output, as: UTF8.self) == "before\nlast")
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    @Test("a write to a full non-blocking stdin stops waiting for room once its stop is readable")
    func stoppedWriterEnds() async throws {
        let process = try spawn(["/bin/sleep", "30"], input: .pipe, nonBlockingInput: true)
        let input = try #require(process.standardInput)
        defer { for descriptor in [input, process.standardOutput, process.standardError] { close(descriptor) } }
        var stop: [Int32] = [-1, -1]
        #expect(pipe(&stop) == 0)
        defer { for end in stop { close(end) } }
        #expect(write(stop[1], "x", 1) == 1)
        // More than a pipe holds: the write fills it and then waits for room, which never comes. A writer that
        // did not heed the stop would wait until the reader is gone (EPIPE): it is killed after 5 s.
        let killer = Task {
            try? await Task.sleep(for: .seconds(5))
            kill(process.pid, SIGKILL)
        }
        let bytes = [UInt8](repeating: 0x41, count: 4 << 20)
        let written = await OwnThread.run(named: "test.writer") { [stop = stop[0]] in
            Result { () throws(SystemCallError) in try Descriptor.writeAllWithoutBrokenPipeSignal(bytes, to: input, stop: stop) }
        }
        killer.cancel()
        kill(process.pid, SIGKILL)
        _ = try process.waitForEnd()
        #expect(throws: SystemCallError(code: ECANCELED)) { try written.get() }
    }

    private func spawn(
        _ argv: [String], input: ChildProcess.Input, nonBlockingInput: Bool = false, environment: [String] = []
    ) throws -> ChildProcess {
        try ChildProcess.spawn(
            path: argv[0], arguments: CStringArray(argv), environment: CStringArray(["PATH=/usr/bin:/bin"] + environment),
            standardInput: input, nonBlockingInput: nonBlockingInput, nonBlockingOutput: false
        ).get()
    }
}
