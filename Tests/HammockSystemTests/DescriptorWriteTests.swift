import Dispatch
import Glibc
import HammockSystem
import HammockTestSupport
import Synchronization
import Testing

/// `Descriptor.writeAll` against real pipes: the three cases of its policy, each made by the kernel.
@Suite(.timeLimit(.minutes(1)))
struct DescriptorWriteTests {
    @Test("a full non-blocking pipe: the writer sleeps until the reader makes room, then everything arrives in order")
    func fullNonBlockingPipeWaitsWithoutSpinning() async throws {
        let pipe = try Pipe()
        defer { pipe.close() }
        setBlocking(pipe.write, false)
        let filled = fill(pipe.write)
        let payload = pattern(count: 200_000)
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<(error: SystemCallError?, cpu: Duration)?>(nil)
        OwnThread.start(named: "test.writer") { [write = pipe.write] in
            let start = threadCPUTime()
            var failure: SystemCallError?
            do throws(SystemCallError) { try Descriptor.writeAll(payload, to: write) } catch { failure = error }
            let cpu = threadCPUTime() - start
            outcome.withLock { $0 = (failure, cpu) }
            done.signal()
        }
        // The writer meets EAGAIN at once and waits this long for room: spinning would burn most of it.
        try await Task.sleep(for: .milliseconds(500))
        // The reading and the wait for the writer's end block their thread: one of their own, not the pool's.
        let (received, ended) = try await onOwnThread("the read of the pipe and the writer's end", timeout: .seconds(20)) { [read = pipe.read] in
            let received = readExactly(read, count: filled + payload.count) { outcome.withLock { $0 != nil } }
            return (received, done.wait(timeout: .now() + 10) == .success)
        }
        #expect(ended, "the writer ended within 10 s")
        let result = try #require(outcome.withLock { $0 })
        #expect(result.error == nil)
        #expect(Array(received[filled...]) == payload)
        #expect(result.cpu < .milliseconds(50), "the writer used \(result.cpu) of CPU waiting for a full pipe")
    }

    @Test("a pipe whose reader is gone: EPIPE is thrown at once, for the caller to decide about")
    func closedReaderThrowsBrokenPipe() throws {
        let pipe = try Pipe()
        defer { pipe.close() }
        Glibc.close(pipe.read)
        pipe.read = -1
        #expect(throws: SystemCallError(code: EPIPE)) {
            try Descriptor.writeAllWithoutBrokenPipeSignal(pattern(count: 100_000), to: pipe.write)
        }
    }

    @Test("a signal that interrupts a blocked write: the write is made again and nothing is lost")
    func interruptedWriteGoesOn() async throws {
        let pipe = try Pipe()
        defer { pipe.close() }
        setBlocking(pipe.write, false)
        let filled = fill(pipe.write)
        setBlocking(pipe.write, true)

        // A handler without SA_RESTART, so a blocked write returns EINTR.
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in interruptions.add(1, ordering: .relaxed) }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        var previous = sigaction()
        sigaction(SIGUSR2, &action, &previous)
        defer { sigaction(SIGUSR2, &previous, nil) }
        let before = interruptions.load(ordering: .relaxed)

        let payload = pattern(count: 100_000)
        let done = DispatchSemaphore(value: 0)
        let writer = Mutex<pthread_t?>(nil)
        let failure = Mutex<SystemCallError?>(nil)
        let finished = Atomic<Bool>(false)
        OwnThread.start(named: "test.writer") { [write = pipe.write] in
            // A thread inherits its creator's mask, and the test's may be a libdispatch thread, which blocks
            // signals: let this one in.
            var usr2 = sigset_t()
            sigemptyset(&usr2)
            sigaddset(&usr2, SIGUSR2)
            pthread_sigmask(SIG_UNBLOCK, &usr2, nil)
            writer.withLock { $0 = pthread_self() }
            do throws(SystemCallError) { try Descriptor.writeAll(payload, to: write) } catch { failure.withLock { $0 = error } }
            finished.store(true, ordering: .releasing)
            done.signal()
        }
        let started = ContinuousClock.now + .seconds(10)
        while writer.withLock({ $0 }) == nil {
            try #require(ContinuousClock.now < started, "the writer's thread did not start within 10 s")
            try await Task.sleep(for: .milliseconds(1))
        }
        let thread = writer.withLock { $0 }!
        for _ in 0..<3 {
            try await Task.sleep(for: .milliseconds(100))  // blocked in write(2) on the full pipe by now
            pthread_kill(thread, SIGUSR2)
        }
        try await Task.sleep(for: .milliseconds(100))
        // The reading and the wait for the writer's end block their thread: one of their own, not the pool's.
        let (received, ended) = try await onOwnThread("the read of the pipe and the writer's end", timeout: .seconds(20)) { [read = pipe.read] in
            let received = readExactly(read, count: filled + payload.count) { finished.load(ordering: .acquiring) }
            return (received, done.wait(timeout: .now() + 10) == .success)
        }
        #expect(ended, "the writer ended within 10 s")
        #expect(interruptions.load(ordering: .relaxed) - before >= 3)
        #expect(failure.withLock { $0 } == nil)
        #expect(Array(received[filled...]) == payload)
    }
}

/// Counted by the test's signal handler, which can capture nothing.
private let interruptions = Atomic<Int>(0)

private final class Pipe: Sendable {
    nonisolated(unsafe) var read: Int32
    let write: Int32

    init() throws {
        var descriptors: [Int32] = [0, 0]
        guard pipe(&descriptors) == 0 else { throw SystemCallError(code: errno) }
        read = descriptors[0]
        write = descriptors[1]
    }

    func close() {
        if read >= 0 { Glibc.close(read) }
        Glibc.close(write)
    }
}

private func setBlocking(_ descriptor: Int32, _ blocking: Bool) {
    let flags = fcntl(descriptor, F_GETFL)
    _ = fcntl(descriptor, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK)
}

/// Writes to a non-blocking `descriptor` until it is full; returns how many bytes went.
private func fill(_ descriptor: Int32) -> Int {
    let chunk = [UInt8](repeating: UInt8(ascii: "f"), count: 4096)
    var total = 0
    while true {
        let written = chunk.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress!, $0.count) }
        if written <= 0 { return total }
        total += written
    }
}

/// Reads `count` bytes, or fewer when the writer has given up (`writerEnded`) and nothing more comes: a
/// writer that failed must fail the test, not hang it.
private func readExactly(_ descriptor: Int32, count: Int, writerEnded: () -> Bool) -> [UInt8] {
    setBlocking(descriptor, false)
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while bytes.count < count {
        let ended = writerEnded()
        let got = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress!, min($0.count, count - bytes.count)) }
        if got > 0 {
            bytes += chunk[0..<got]
        } else if got < 0 && errno == EAGAIN && !ended {
            usleep(1000)
        } else if got < 0 && errno == EINTR {
            continue
        } else {
            break  // the writer ended and its bytes are all read, or the pipe failed
        }
    }
    return bytes
}

/// Bytes that show any reordering or loss: their index, cycled.
private func pattern(count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 % 251) } }
