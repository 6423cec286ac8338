import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// docs/plugin-protocol.md and docs/configuration.md, "Plugins": where a plugin is found, what hammock does
/// with a second `hello`, the order of pushes and answers, and `check` on a plugin that cannot start.
@Suite("Documented behaviour: plugins")
struct DocumentedBehaviourPluginTests {
    /// Writes `hammock-plugin-lookupdoc` into `folder/subfolder`: the fixture plugin, tagged `tag`.
    static func lookupPlugin(in folder: Documented.Folder, subfolder: String, tag: String) throws -> String {
        let fixture = try folder.fixturePlugin()
        let script = """
            #!/bin/sh
            exec python3 \(fixture) --kind lookupdoc --tag \(tag)
            """
        try folder.write(script, to: subfolder + "/hammock-plugin-lookupdoc", executable: true)
        return folder.path + "/" + subfolder
    }

    static let lookupConfig = """
        version: 1
        sources:
          found: { kind: lookupdoc, retry: off }
        """

    /// "Without it, hammock looks for `hammock-plugin-K` beside its own executable, then on
    /// `HAMMOCK_PLUGIN_PATH`, then on `PATH`."
    @Test("a kind with no plugins entry is served by hammock-plugin-K on HAMMOCK_PLUGIN_PATH before one on PATH")
    func pluginOnHammockPluginPath() async throws {
        try await Documented.Folder.with { folder in
            let pluginPath = try Self.lookupPlugin(in: folder, subfolder: "plugin-path", tag: "plugin-path")
            let onPath = try Self.lookupPlugin(in: folder, subfolder: "on-path", tag: "path")
            let environment = [
                // A folder list: the first folder has no such plugin.
                "HAMMOCK_PLUGIN_PATH": folder.path + "/nothing-here:" + pluginPath,
                "PATH": onPath + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
            ]
            try await HammockProcess.withRunning(config: Self.lookupConfig, environment: environment) { hammock in
                let loaded = try await hammock.waitFor(type: "source", id: "found") { $0.event != "requested" }
                #expect(loaded.event == "newData", "\(loaded)")
                #expect(loaded[pointer: "/state/content/tag"] == "plugin-path", "\(loaded)")
            }
        }
    }

    @Test("a kind with no plugins entry and no HAMMOCK_PLUGIN_PATH is served by hammock-plugin-K on PATH")
    func pluginOnPath() async throws {
        try await Documented.Folder.with { folder in
            let onPath = try Self.lookupPlugin(in: folder, subfolder: "on-path", tag: "path")
            let environment = ["PATH": onPath + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
            try await HammockProcess.withRunning(config: Self.lookupConfig, environment: environment) { hammock in
                let loaded = try await hammock.waitFor(type: "source", id: "found") { $0.event != "requested" }
                #expect(loaded.event == "newData", "\(loaded)")
                #expect(loaded[pointer: "/state/content/tag"] == "path", "\(loaded)")
            }
        }
    }

    /// "A line that is not valid protocol, a second `hello`, …: the plugin is killed if need be, its loads
    /// fail with a message saying what happened (sources keep their content), and it is restarted".
    @Test("a second hello is a protocol violation: the load fails saying so, the content stays, the plugin restarts")
    func secondHello() async throws {
        try await Documented.Folder.with { folder in
            let plugin = try folder.fixturePlugin()
            let config = """
                version: 1
                sources:
                  t: { kind: test, retry: off }
                \(Documented.Plugin.pluginsSection(path: plugin, arguments: ["--mode", "second-hello"]))
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let first = try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" }
                try hammock.send(controlLine: #"{"op":"load","source":"t"}"#)
                let failed = try await hammock.waitFor(type: "source", id: "t") { $0.event == "error" }
                #expect(failed.documentedErrorMessage.contains("said hello twice"), "\(failed)")
                #expect(failed[pointer: "/state/latestError/code"] == "pluginFailed", "\(failed)")
                #expect(failed.documentedContent == first.documentedContent, "the content is kept: \(failed)")

                // Restarted: a new process answers the next load as its first.
                try hammock.send(controlLine: #"{"op":"load","source":"t"}"#)
                let again = try await hammock.waitFor(type: "source", id: "t") { $0.event == "newData" }
                #expect(again[pointer: "/state/content/n"] == 1, "\(again)")
                #expect(again[pointer: "/state/content/pid"] != first[pointer: "/state/content/pid"], "\(again)")
            }
        }
    }

    /// "A push never overtakes, or is overtaken by, an answer or error of its source."
    @Test("a push written just after an answer shows after it, and an answer written just after a push shows after it")
    func pushAndAnswerKeepTheirOrder() async throws {
        try await Documented.Folder.with { folder in
            let plugin = try folder.fixturePlugin()
            let config = """
                version: 1
                sources:
                  p: { kind: test, retry: off }
                \(Documented.Plugin.pluginsSection(path: plugin, arguments: ["--mode", "push-order"]))
                """
            let rounds = 30
            try await HammockProcess.withRunning(config: config) { hammock in
                // Round k: the plugin writes the answer and the push in one write, answer first when k is odd.
                for round in 1...rounds {
                    if round > 1 { try hammock.send(controlLine: #"{"op":"load","source":"p"}"#) }
                    let last = round % 2 == 1 ? "push" : "answer"
                    try await hammock.waitFor(type: "source", id: "p") {
                        Self.round(of: $0) == round && $0[pointer: "/state/content/by"]?.stringValue == last
                    }
                }
                let rounded = hammock.lineCount
                // Nothing about p comes after the last round's last message but this snapshot of it.
                try hammock.send(controlLine: #"{"op":"snapshot"}"#)
                let snapshot = try await hammock.waitFor(type: "source", id: "p")
                #expect(Self.round(of: snapshot) == rounds, "\(snapshot)")
                #expect(snapshot[pointer: "/state/content/by"] == "answer", "\(snapshot)")

                // Whatever lines a consumer reading at full speed was shown, a round never ends on the
                // message written first, and each message shows with its own origin.
                let data = hammock.lines.prefix(rounded).filter { $0.id == "p" && $0.event == "newData" }
                for round in 1...rounds {
                    let ofRound = data.filter { Self.round(of: $0) == round }
                    let written = round % 2 == 1 ? ["answer", "push"] : ["push", "answer"]
                    let shown = ofRound.compactMap { $0[pointer: "/state/content/by"]?.stringValue }
                    #expect(shown.last == written[1], "round \(round): written \(written), shown \(shown)")
                    #expect(shown == written || shown == [written[1]], "round \(round): written \(written), shown \(shown)")
                    for line in ofRound {
                        let by = line[pointer: "/state/content/by"]?.stringValue
                        #expect(line.origin == (by == "answer" ? "load" : "push"), "\(line)")
                    }
                }
            }
        }
    }

    static func round(of line: HammockLine) -> Int? {
        line[pointer: "/state/content/round"]?.numberValue?.intValue
    }

    /// `hammock check` "starts the plugins so their own keys are checked too": a plugin that cannot start
    /// is a problem of the sources it should serve, reported at their line, exit 2.
    @Test(
        "check on a plugin that fails to start reports it at its source's line and exits 2",
        arguments: ["missing", "exits"])
    func checkOnAPluginThatFailsToStart(_ how: String) async throws {
        try await Documented.Folder.with { folder in
            let command =
                how == "missing"
                ? "[\(Documented.yamlQuoted(folder.path + "/no-such-plugin"))]"
                : #"[sh, -c, "echo cannot start >&2; exit 3"]"#
            let config = try folder.write(
                """
                version: 1
                sources:
                  ok: { kind: fake, content: 1 }
                  t: { kind: test }
                plugins:
                  test: { command: \(command) }
                """, to: "config.yaml")
            let run = try await HammockProcess.execute(["check", config], timeout: .seconds(20))
            #expect(run.termination == .exited(2), "\(run.termination): \(run.stderr)")
            #expect(run.stdout.isEmpty, "\(run.stdout)")
            let problem = run.stderr.split(separator: "\n").first { $0.hasPrefix(config + ":4:3: ") }
            #expect(problem?.contains("source \"t\"") == true, "the problem at t's line and column: \(run.stderr)")
            #expect(problem?.contains("test plugin") == true, "it names the plugin: \(run.stderr)")
            let why = how == "missing" ? "could not be started" : "exited with status 3"
            #expect(problem?.contains(why) == true, "it says why: \(run.stderr)")
            #expect(run.stderr.contains("1 error"), "\(run.stderr)")
        }
    }
}
