import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// A consumer that stops reading must neither stall the engine nor make it grow: lines for one id coalesce
/// to the newest state while they wait.
@Suite("Slow consumer")
struct SlowConsumerTests {
    static let sourceCount = 20
    static let refresh = Duration.milliseconds(100)
    static let pause = Duration.seconds(5)
    /// Each source's content: large enough that a pause's worth of lines, queued whole, would be tens of MiB.
    static let paddingBytes = 8 * 1024

    /// The configuration; the plugin-backed source appends the wall time of each of its runs to `runLog`.
    static func config(runLog: String) -> String {
        var yaml = "version: 1\nsources:\n"
        for index in 0..<sourceCount {
            yaml += "  s\(index): { kind: fake, content: { index: \(index), padding: \"\(String(repeating: "x", count: paddingBytes))\" }, refresh: 100ms }\n"
        }
        // A plugin-backed source, whose loads go through a plugin process while stdout is not read; it is
        // loaded again only once its last answer was handled, so its runs say the engine kept going.
        let script = "date +%s.%N >> \(runLog); cat /proc/sys/kernel/random/uuid"
        yaml += "  ticker: { kind: shell, script: \(TestFiles.yamlQuoted(script)), refresh: 200ms }\n"
        // overlay puts loading first, so the view changes at every refresh too.
        yaml += "views:\n  everything:\n    display: overlay\n    sources: [\((0..<sourceCount).map { "s\($0)" }.joined(separator: ", "))]\n"
        return yaml
    }

    /// The engine timestamp (`state.timestamp`) of a source line.
    static func timestamp(_ line: HammockLine) -> Date? {
        line.state?["timestamp"]?.stringValue.flatMap(parseTimestamp)
    }

    @Test("after 5 s without reading, the engine is alive, its memory grew by far less than the lines it could not write, a plugin-backed source kept updating, and the consumer gets recent states, not a backlog")
    func slowConsumer() async throws {
        let folder = try TestFiles.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let runLog = folder + "/ticker-runs"
        try await HammockProcess.withRunning(config: Self.config(runLog: runLog)) { hammock in
            try await hammock.waitFor(type: "view", id: "everything") { $0.status == "data" }
            try await hammock.waitFor(type: "source", id: "ticker") { $0.event == "newData" }

            // A window of reading first: how hammock's memory moves by itself over a while, so the pause is
            // measured against this machine and this build.
            let rssAtWindowStart = try #require(hammock.residentKiB())
            try await Task.sleep(for: .seconds(2))
            let rssBefore = try #require(hammock.residentKiB())
            let idleGrowthKiB = max(0, rssBefore - rssAtWindowStart)
            // What the pause would queue without coalescing: every state each source goes through (requested
            // and newData per refresh), at the size its lines have. (Not measured from the reading window: on
            // a loaded machine the harness's own reading is slower than hammock's writing.)
            let sourceLine = try #require(hammock.lines.last { $0.id == "s0" }).text.utf8.count + 1
            let statesPerSecond = 2 * Self.sourceCount * Int(Duration.seconds(1) / Self.refresh)

            hammock.pauseReading()
            let pausedAt = Date()
            try await Task.sleep(for: Self.pause)
            #expect(hammock.isRunning, "the engine died while stdout was not read: \(hammock.stderrText)")
            let rssAfter = try #require(hammock.residentKiB(), "the engine is gone")
            let resumedAt = Date()
            let mark = hammock.lineCount
            hammock.resumeReading()

            // Read until s0's data is from after the pause: everything before it is the backlog.
            let caughtUp = try await hammock.waitFor(type: "source", id: "s0") { line in
                line.event == "newData" && (Self.timestamp(line).map { $0 >= resumedAt } ?? false)
            }
            let backlog = hammock.lines(since: mark).prefix { $0.seq != caughtUp.seq }
            let s0Backlog = backlog.filter { $0.id == "s0" }.count
            let viewBacklog = backlog.filter { $0.id == "everything" }.count
            let unthrottled = 2 * Int(Self.pause / Self.refresh)  // requested + newData per refresh
            let uncoalescedKiB = statesPerSecond * Int(Self.pause.components.seconds) * sourceLine / 1024
            let growthKiB = rssAfter - rssBefore
            print(
                """
                slow consumer: RSS \(rssBefore) KiB before the \
                pause, \(rssAfter) KiB after (grew \(idleGrowthKiB) KiB in the reading window); without coalescing \
                the pause would queue \(uncoalescedKiB) KiB; \(backlog.count) lines before catching up, \(s0Backlog) \
                of them for s0 and \(viewBacklog) for the view (without coalescing: \(unthrottled) for s0)
                """)

            // The bound is meaningful only if a backlog would be far over it.
            #expect(uncoalescedKiB >= 8 * 1024, "the sources wrote too little (\(uncoalescedKiB) KiB per pause) for the bound to mean anything")
            let growthBoundKiB = idleGrowthKiB + uncoalescedKiB / 2
            #expect(
                growthKiB <= growthBoundKiB,
                "RSS grew from \(rssBefore) KiB to \(rssAfter) KiB while stdout was not read (bound \(growthBoundKiB) KiB; a queued backlog would be \(uncoalescedKiB) KiB)")
            // What waits for a consumer that paused is what the kernel's pipe buffer held when it filled
            // (64 KiB, written before the pause could be noticed), then one line per id from hammock's queue,
            // then the live traffic of the moment it takes to catch up. Without coalescing it would be every
            // line of the pause: megabytes.
            let pipeCapacity = 64 * 1024
            let longestLine = backlog.map { $0.text.utf8.count + 1 }.max() ?? 0
            let backlogBytes = backlog.reduce(0) { $0 + $1.text.utf8.count + 1 }
            let bound = pipeCapacity + 2 * (Self.sourceCount + 2) * longestLine
            #expect(
                backlogBytes <= bound,
                "\(backlogBytes) bytes of stale lines waited (bound \(bound)); without coalescing there would be \(unthrottled) lines for s0 alone")
            #expect(s0Backlog < unthrottled / 4, "s0 had \(s0Backlog) stale lines waiting; without coalescing there would be \(unthrottled)")
            #expect(viewBacklog < unthrottled / 2, "the view had \(viewBacklog) stale lines waiting")

            // The plugin-backed source kept loading through the pause: its command ran in the pause's second
            // half. (Its lines cannot tell: the state waiting at the end of the pause is replaced by a newer one
            // if the source refreshes before the consumer has read the queue.)
            let runs = ((try? String(contentsOfFile: runLog, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { Double($0) }
            let secondHalf = pausedAt.timeIntervalSince1970 + Double(Self.pause.components.seconds) / 2
            let runsInSecondHalf = runs.filter { $0 >= secondHalf && $0 <= resumedAt.timeIntervalSince1970 }
            #expect(
                !runsInSecondHalf.isEmpty,
                "the ticker's command did not run in the second half of the pause (\(pausedAt) to \(resumedAt)); its runs: \(runs)")

            // Still alive and polling after the catch-up, with seq unbroken.
            try await hammock.waitFor(type: "source", id: "s19") { $0.event == "newData" }
            try await hammock.waitFor(type: "source", id: "ticker") { $0.event == "newData" }
            let lines = hammock.lines
            #expect(lines.map(\.seq) == lines.indices.map { $0 + 1 }, "seq stays 1, 2, 3, ... when lines coalesce")
            #expect(hammock.isRunning)
        }
    }
}
