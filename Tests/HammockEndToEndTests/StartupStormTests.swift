import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// Thousands of shell sources that start at once on a busy machine: each load's timeout counts from when
/// its command starts, and the shell plugin runs a bounded number of commands at a time, so none runs out
/// its timeout while it waits its turn (issue 15: the 10,000-source round failed with "no answer within 10s").
@Suite("Startup storm")
struct StartupStormTests {
    @Test("2,000 shell sources with a 3 s timeout, starting at once beside a busy loop, all load")
    func twoThousandSourcesAtOnce() async throws {
        // 8 commands of at least 20 ms at a time: the last start 5 s or more after they were all sent, past a
        // timeout counted from the send; yet each command has 3 s from its own start, which even a loaded
        // machine gives it.
        let count = 2000
        var yaml = "version: 1\nsources:\n"
        for index in 0..<count {
            yaml += "  s\(index): { kind: shell, command: [sh, -c, \"sleep 0.02; echo \(index)\"], timeout: 3s }\n"
        }

        let began = ContinuousClock.now
        try await HammockProcess.withRunning(
            config: yaml, arguments: ["--once", "--deadline", "120s"], environment: ["HAMMOCK_SHELL_CONCURRENCY": "8"]
        ) { hammock in
            // The attack beside the storm: a loop that keeps one of the machine's cores busy throughout (the
            // storm takes a few seconds). Started here, not before the harness waits for a slot to run hammock
            // in; and it ends by itself after 20 s, so a storm that hangs, or a test runner that dies, does not
            // keep a core from the other suites for longer.
            let busy = Process()
            busy.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
            busy.arguments = ["-s", "KILL", "20", "/bin/sh", "-c", "while :; do :; done"]
            try busy.run()
            // `timeout` passes SIGTERM on to the loop, and exits.
            defer { kill(busy.processIdentifier, SIGTERM) }
            let bye = try await hammock.waitFor(type: "bye", timeout: .seconds(150))
            let lines = hammock.lines
            let noAnswer = lines.filter { $0.event == "error" && $0.text.contains("no answer") }
            #expect(noAnswer.isEmpty, "\(noAnswer.count) loads ran out their timeout, first: \(noAnswer.first?.text ?? "")")
            let loaded = Set(lines.filter { $0.event == "newData" }.compactMap(\.id))
            #expect(loaded.count == count, "\(loaded.count) of \(count) sources loaded")
            #expect(bye["failed"] == [], "\(bye.text.prefix(300))")
        }
        print("startup storm: \(count) shell sources loaded in \(ContinuousClock.now - began) beside a busy loop")
    }
}
