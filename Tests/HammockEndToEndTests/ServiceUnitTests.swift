import Foundation
import HammockTestSupport
import Testing

/// contrib/systemd/hammock.service as systemd reads it: `systemd-analyze --user verify` (Debian's systemd;
/// .ci/run installs it), with ExecStart pointed at the built binary.
@Suite("systemd unit")
struct ServiceUnitTests {
    @Test("systemd-analyze verify accepts the user unit, and hammock accepts its ExecStart's options")
    func unitVerifies() async throws {
        let analyze = "/usr/bin/systemd-analyze"
        try #require(
            FileManager.default.isExecutableFile(atPath: analyze),
            "systemd-analyze is missing: apt-get install systemd (.ci/run does)")
        let hammock = try HammockProcess.executablePath()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let unit = try String(contentsOf: root.appendingPathComponent("contrib/systemd/hammock.service"), encoding: .utf8)
        #expect(unit.contains("Type=notify") && unit.contains("WatchdogSec=") && unit.contains("ExecReload=/bin/kill -HUP $MAINPID"))
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let runtime = folder + "/runtime"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let path = folder + "/hammock.service"
        try Data(unit.replacingOccurrences(of: "%h/.local/bin/hammock", with: hammock).utf8).write(to: URL(fileURLWithPath: path))

        // Bounded: a verify that hangs fails the test instead of holding the suite.
        let verify = try await BoundedRun.run(
            analyze, ["--user", "verify", path],
            environment: ["XDG_RUNTIME_DIR": runtime, "HOME": folder, "PATH": "/usr/bin:/bin"], timeout: .seconds(60))
        let said = verify.stderr
        #expect(verify.termination == .exited(0), "systemd-analyze verify: \(said)")
        #expect(!said.contains("hammock.service"), "systemd-analyze said of the unit: \(said)")

        // The options the unit passes are hammock's: `check` takes the same ones as `run`.
        let line = try #require(unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
        let words = line.dropFirst("ExecStart=".count).split(separator: " ").map(String.init)
        #expect(words.count >= 3 && words[1] == "run")
        let config = try HammockProcess.writeConfig("sources:\n  a: { kind: fake, content: 1 }\n", in: folder)
        let check = try await HammockProcess.execute(["check"] + words.dropFirst(2).dropLast() + [config])
        #expect(check.termination == .exited(0), "\(check.stderr)")
    }
}
