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

    @Test("systemd-analyze verify accepts the shared engine's socket and service units, and their ExecStart serves")
    func serveUnitsVerify() async throws {
        let analyze = "/usr/bin/systemd-analyze"
        try #require(
            FileManager.default.isExecutableFile(atPath: analyze),
            "systemd-analyze is missing: apt-get install systemd (.ci/run does)")
        let hammock = try HammockProcess.executablePath()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let socketUnit = try String(contentsOf: root.appendingPathComponent("contrib/systemd/hammock-serve@.socket"), encoding: .utf8)
        let serviceUnit = try String(contentsOf: root.appendingPathComponent("contrib/systemd/hammock-serve@.service"), encoding: .utf8)
        #expect(socketUnit.contains("ListenStream=%t/hammock/%i.sock") && socketUnit.contains("SocketMode=0600"))
        #expect(socketUnit.contains("DirectoryMode=0700") && socketUnit.contains("Accept=no"))
        #expect(serviceUnit.contains("ExecReload=/bin/kill -HUP $MAINPID") && serviceUnit.contains("Requires=hammock-serve@%i.socket"))
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let runtime = folder + "/runtime"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let units = folder + "/units"
        try FileManager.default.createDirectory(atPath: units, withIntermediateDirectories: false)
        try Data(socketUnit.utf8).write(to: URL(fileURLWithPath: units + "/hammock-serve@.socket"))
        try Data(serviceUnit.replacingOccurrences(of: "%h/.local/bin/hammock", with: hammock).utf8)
            .write(to: URL(fileURLWithPath: units + "/hammock-serve@.service"))

        // An instance of each template, as `systemctl --user enable --now hammock-serve@bar.socket` makes.
        let verify = try await BoundedRun.run(
            analyze, ["--user", "verify", units + "/hammock-serve@bar.socket", units + "/hammock-serve@bar.service"],
            environment: ["XDG_RUNTIME_DIR": runtime, "HOME": folder, "PATH": "/usr/bin:/bin"], timeout: .seconds(60))
        let said = verify.stderr
        #expect(verify.termination == .exited(0), "systemd-analyze verify: \(said)")
        #expect(!said.contains("hammock-serve@"), "systemd-analyze said of the units: \(said)")

        // ExecStart, with %h, %t and %i as systemd fills them in, serves the configuration on the socket
        // the .socket unit names.
        let line = try #require(serviceUnit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
        let words = line.dropFirst("ExecStart=".count).split(separator: " ").map {
            $0.replacingOccurrences(of: "%h/.local/bin/hammock", with: hammock).replacingOccurrences(of: "%h", with: folder)
                .replacingOccurrences(of: "%t", with: runtime).replacingOccurrences(of: "%i", with: "bar")
        }
        #expect(words.count >= 3 && words[1] == "serve")
        try FileManager.default.createDirectory(atPath: folder + "/.config/hammock", withIntermediateDirectories: true)
        try HammockProcess.writeConfig("sources:\n  a: { kind: fake, content: 1 }\n", in: folder + "/.config/hammock", name: "bar.yaml")
        let serve = try HammockProcess.launch(program: words[0], arguments: Array(words.dropFirst()), environment: ["XDG_RUNTIME_DIR": runtime])
        defer { Task { await serve.stop() } }
        try await serve.waitForStderr(containing: runtime + "/hammock/bar.sock", timeout: .seconds(20))
        #expect(FileManager.default.fileExists(atPath: runtime + "/hammock/bar.sock"))
        serve.signal(SIGTERM)
        #expect(try await serve.waitForExit(timeout: .seconds(15)) == .exited(0), "\(serve.stderrText)")
        await serve.stop()
    }
}
