import Foundation
import Glibc
import Testing

@testable import HammockEngine
@testable import HammockLogging

/// stderr is best-effort (README): while nobody reads it, at most 1,000 lines or 1 MiB wait, and what is
/// dropped beyond is counted and said once stderr is read again. Plugins' stderr lines are passed through
/// this same queue. A real pipe that the test does not read, then reads.
@Suite(.timeLimit(.minutes(1))) struct StandardErrorBoundTests {
    /// A pipe whose write end is full: the queue's writer blocks on its first line.
    final class FullPipe: @unchecked Sendable {
        let read: Int32
        let write: Int32

        init() throws {
            var ends: [Int32] = [-1, -1]
            try #require(pipe(&ends) == 0)
            (read, write) = (ends[0], ends[1])
            let flags = fcntl(write, F_GETFL)
            _ = fcntl(write, F_SETFL, flags | O_NONBLOCK)
            let page = [UInt8](repeating: UInt8(ascii: "x"), count: 4096)
            while Glibc.write(write, page, page.count) > 0 {}
            _ = fcntl(write, F_SETFL, flags)
        }

        /// Reads everything until `stop` is found in what was read past the filler, or the deadline passes.
        /// Non-blocking reads, and a task's sleep between them: no thread of the cooperative pool is held.
        func readUntil(_ stop: String, within timeout: Duration) async throws -> String {
            let deadline = ContinuousClock.now + timeout
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            _ = fcntl(read, F_SETFL, fcntl(read, F_GETFL) | O_NONBLOCK)
            // Read once more after the deadline: a sleep may end long after it when the pool is busy.
            while true {
                let count = Glibc.read(read, &buffer, buffer.count)
                if count > 0 {
                    bytes += buffer[0..<count].filter { $0 != UInt8(ascii: "x") }
                    if String(decoding: bytes, as: UTF8.self).contains(stop) { break }
                } else {
                    guard ContinuousClock.now < deadline else { break }
                    try await Task.sleep(for: .milliseconds(1))
                }
            }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Queues a first line, which the writer takes and blocks on, then `count` lines of `size` bytes;
    /// returns how many of those waited and what the reader then got.
    func flood(count: Int, size: Int) async throws -> (waited: Int, output: String) {
        let pipe = try FullPipe()
        let queue = StandardErrorQueue(descriptor: pipe.write, secrets: Secrets(), format: .text)
        queue.append(Array("first\n".utf8))
        let deadline = ContinuousClock.now + .seconds(10)
        while queue.waitingCount > 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        try #require(queue.waitingCount == 0, "the writer took the first line")
        let body = String(repeating: "y", count: size - 1) + "\n"
        for _ in 0..<count { queue.append(Array(body.utf8)) }
        let waited = queue.waitingCount
        let output = try await pipe.readUntil("were dropped because stderr was not read", within: .seconds(10))
        return (waited, output)
    }

    @Test("at most 1,000 lines wait; the rest are counted and said")
    func aThousandLines() async throws {
        let (waited, output) = try await flood(count: 1_500, size: 8)
        #expect(waited == 1_000)
        #expect(output.contains("hammock: warning: 500 lines of log were dropped because stderr was not read"), "\(output.suffix(200))")
        #expect(output.components(separatedBy: "yyyyyyy\n").count - 1 == 1_000)
    }

    @Test("at most 1 MiB waits; the rest is counted and said")
    func oneMebibyte() async throws {
        // 512 lines of 2 KiB are 1 MiB exactly.
        let (waited, output) = try await flood(count: 600, size: 2048)
        #expect(waited == 512)
        #expect(output.contains("hammock: warning: 88 lines of log were dropped because stderr was not read"), "\(output.suffix(200))")
    }
}
