import Synchronization
import Testing

@testable import HammockPluginKit

/// The plugin's stdout writer: answers of loads in flight together go in few writes (each write wakes the
/// engine's reader, its plugin host and its loop), and a line with no load in flight goes at once.
@Suite(.timeLimit(.minutes(1))) struct BatchedStandardOutputTests {
    /// Every batch written, with when.
    final class Writes: Sendable {
        private let batches = Mutex<[(text: String, at: ContinuousClock.Instant)]>([])
        func record(_ bytes: [UInt8]) { batches.withLock { $0.append((String(decoding: bytes, as: UTF8.self), .now)) } }
        var texts: [String] { batches.withLock { $0.map(\.text) } }
        var times: [ContinuousClock.Instant] { batches.withLock { $0.map(\.at) } }
    }

    func written(_ writes: Writes, count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while writes.texts.count < count {
            guard ContinuousClock.now < deadline else { Issue.record("only \(writes.texts.count) writes: \(writes.texts)"); return }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test func answersOfLoadsInFlightTogetherGoInOneWriteOnceTheLastIsIn() async throws {
        let writes = Writes()
        let output = BatchedStandardOutput(linger: .seconds(30), write: writes.record)
        output.loadsInFlight(3)
        output.append(Array("a\n".utf8))
        output.loadsInFlight(2)
        output.append(Array("b\n".utf8))
        output.loadsInFlight(1)
        output.append(Array("c\n".utf8))
        output.loadsInFlight(0)
        try await written(writes, count: 1)
        try await Task.sleep(for: .milliseconds(20))
        #expect(writes.texts == ["a\nb\nc\n"])
    }

    @Test func aLineWithNoLoadInFlightDoesNotLinger() async throws {
        let writes = Writes()
        let output = BatchedStandardOutput(linger: .seconds(30), write: writes.record)
        output.append(Array("pushed\n".utf8))
        try await written(writes, count: 1)  // within 5 s, not 30
        #expect(writes.texts == ["pushed\n"])
    }

    @Test func aLoadThatHangsHoldsTheOthersAnswersNoLongerThanTheLinger() async throws {
        let writes = Writes()
        let output = BatchedStandardOutput(linger: .milliseconds(100), write: writes.record)
        output.loadsInFlight(2)
        let sent = ContinuousClock.now
        output.append(Array("first\n".utf8))
        output.loadsInFlight(1)  // the other never answers
        try await written(writes, count: 1)
        #expect(writes.texts == ["first\n"])
        #expect(writes.times[0] - sent >= .milliseconds(100), "\(writes.times[0] - sent)")
    }
}
