import Foundation
import HammockJSON
import Testing

/// A consumer that stops reading must neither stall the engine nor make it grow: lines for one id coalesce
/// to the newest state while they wait.
@Suite("Slow consumer")
struct SlowConsumerTests {
    static let sourceCount = 20
    static let refresh = Duration.milliseconds(100)
    static let pause = Duration.seconds(5)
    static let rssGrowthLimitKiB = 20 * 1024

    static var config: String {
        var yaml = "version: 1\nsources:\n"
        for index in 0..<sourceCount {
            yaml += "  s\(index): { kind: fake, content: { index: \(index), padding: \"\(String(repeating: "x", count: 64))\" }, refresh: 100ms }\n"
        }
        // overlay puts loading first, so the view changes at every refresh too.
        yaml += "views:\n  everything:\n    display: overlay\n    sources: [\((0..<sourceCount).map { "s\($0)" }.joined(separator: ", "))]\n"
        return yaml
    }

    @Test("after 5 s without reading, the engine is alive, small, and the consumer gets recent states, not a backlog")
    func slowConsumer() async throws {
        try await HammockProcess.withRunning(config: Self.config) { hammock in
            try await hammock.waitFor(type: "view", id: "everything") { $0.status == "data" }
            try await Task.sleep(for: .milliseconds(500))  // let the engine reach its steady state
            let rssBefore = try #require(hammock.residentKiB())

            hammock.pauseReading()
            try await Task.sleep(for: Self.pause)
            #expect(hammock.isRunning, "the engine died while stdout was not read: \(hammock.stderrText)")
            let rssAfter = try #require(hammock.residentKiB(), "the engine is gone")
            let resumedAt = Date()
            let mark = hammock.lineCount
            hammock.resumeReading()

            // Read until s0's data is from after the pause: everything before it is the backlog.
            let caughtUp = try await hammock.waitFor(type: "source", id: "s0") { line in
                guard line.event == "newData", let text = line.state?["timestamp"]?.stringValue,
                    let timestamp = parseTimestamp(text)
                else { return false }
                return timestamp >= resumedAt
            }
            let backlog = hammock.lines(since: mark).prefix { $0.seq != caughtUp.seq }
            let s0Backlog = backlog.filter { $0.id == "s0" }.count
            let viewBacklog = backlog.filter { $0.id == "everything" }.count
            let unthrottled = 2 * Int(Self.pause / Self.refresh)  // requested + newData per refresh
            print(
                """
                slow consumer: RSS \(rssBefore) KiB before the pause, \(rssAfter) KiB after; \
                \(backlog.count) lines before catching up, \(s0Backlog) of them for s0 and \(viewBacklog) for the view \
                (without coalescing: \(unthrottled) for s0)
                """)

            #expect(
                rssAfter - rssBefore <= Self.rssGrowthLimitKiB,
                "RSS grew from \(rssBefore) KiB to \(rssAfter) KiB while stdout was not read")
            // What waits for a consumer that paused is what the kernel's pipe buffer held when it filled
            // (64 KiB, written before the pause could be noticed), then one line per id from hammock's queue,
            // then the live traffic of the moment it takes to catch up. Without coalescing it would be every
            // line of the pause: megabytes.
            let pipeCapacity = 64 * 1024
            let longestLine = backlog.map { $0.text.utf8.count + 1 }.max() ?? 0
            let backlogBytes = backlog.reduce(0) { $0 + $1.text.utf8.count + 1 }
            let bound = pipeCapacity + 2 * (Self.sourceCount + 1) * longestLine
            #expect(
                backlogBytes <= bound,
                "\(backlogBytes) bytes of stale lines waited (bound \(bound)); without coalescing there would be \(unthrottled) lines for s0 alone")
            #expect(s0Backlog < unthrottled / 4, "s0 had \(s0Backlog) stale lines waiting; without coalescing there would be \(unthrottled)")
            #expect(viewBacklog < unthrottled / 2, "the view had \(viewBacklog) stale lines waiting")

            // Still alive and polling after the catch-up, with seq unbroken.
            try await hammock.waitFor(type: "source", id: "s19") { $0.event == "newData" }
            let lines = hammock.lines
            #expect(lines.map(\.seq) == lines.indices.map { $0 + 1 }, "seq stays 1, 2, 3, ... when lines coalesce")
            #expect(hammock.isRunning)
        }
    }
}
