import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// Issue 25's secrets and schema items, run for real: a secret cut by an excerpt, a secret in a plugin's
/// command under `hammock schema`, a secret too short to redact, a refused reload with problems of the file
/// and of a plugin, and options schemas with their own `$defs` and `$ref`s.
@Suite("Secrets, bounds and the schema command, end to end")
struct SecretsRoundThreeTests {
    /// Long enough that a cut inside it leaves a prefix that is plainly part of it.
    static let secret = "tok-5f0c2a9be81d4e7a93c6b0d2f1e4a8c7"

    @Test("a plugin's non-JSON line is redacted before it is cut, on stdout and on stderr")
    func secretCutByThePluginFailedExcerpt() async throws {
        let fixture = TestFiles.fixture("misbehaving-plugin.py")
        // 100 "x"s, then the secret: the excerpt's cut at 120 bytes falls 20 bytes into it.
        let config = """
            sources:
              t: { kind: test, token: "${secret:TOKEN}", retry: off }
            plugins:
              test: { command: [python3, \(TestFiles.yamlQuoted(fixture)), garbage-secret, "100"] }
            """
        try await HammockProcess.withRunning(config: config, environment: ["TOKEN": Self.secret]) { hammock in
            let error = try await hammock.waitFor(type: "source", id: "t") { $0.event == "error" }
            #expect(error.errorCode == "pluginFailed", "\(error)")
            #expect(error.errorMessage.contains("wrote a line that is not protocol"), "\(error)")
            #expect(error.errorMessage.contains(String(repeating: "x", count: 100) + "[redacted]"), "\(error)")
            try await hammock.waitForStderr(containing: "not protocol")
            let prefix = String(Self.secret.prefix(8))
            #expect(!hammock.stdoutText.contains(prefix), "stdout holds the start of the secret: \(hammock.stdoutText)")
            #expect(!hammock.stderrText.contains(prefix), "stderr holds the start of the secret: \(hammock.stderrText)")
        }
    }

    @Test("hammock schema redacts a secret in a plugin's command and in what the plugin wrote, cut or not")
    func schemaRedactsItsStderr() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { HammockProcess.removeTemporaryDirectory(folder) }
        // The plugin answers hello with 180 zeros and its $0, the secret: the excerpt's cut at 200 bytes
        // falls inside it, and the message quotes the command, which holds it whole.
        let config = try HammockProcess.writeConfig(
            """
            plugins:
              leaky: { command: [sh, -c, "printf '%0180d%s\\\\n' 0 \\"$0\\"", "${secret:TOKEN}"] }
            sources:
              a: { kind: leaky }
            """, in: folder)
        let run = try await HammockProcess.execute(["schema", config], environment: ["TOKEN": Self.secret])
        #expect(run.termination == .exited(1), "\(run.stderr)")
        #expect(run.stderr.contains("did not say hello"), "\(run.stderr)")
        #expect(run.stderr.contains("[redacted]"), "\(run.stderr)")
        #expect(run.stderr.contains(String(repeating: "0", count: 180) + "[redacted]"), "the plugin's line, redacted: \(run.stderr)")
        #expect(!run.stderr.contains(String(Self.secret.prefix(8))), "\(run.stderr)")
    }

    @Test("a secret shorter than 4 characters is refused by check at its line and column, and the message keeps its letters")
    func shortSecretIsRefused() async throws {
        let run = try await HammockProcess.check(
            config: """
                sources:
                  a: { kind: shell, command: [echo, hi], env: { KEY: "${secret:KEY}" } }
                """, environment: ["KEY": "e"])
        #expect(run.termination == .exited(2), "\(run.stderr)")
        #expect(run.stderr.contains("config.yaml:2:54: a secret here is shorter than 4 characters"), "\(run.stderr)")
        #expect(!run.stderr.contains("[redacted]"), "nothing was redacted, the letter e least of all: \(run.stderr)")
    }

    @Test("a refused reload reports the file's problem and a plugin's own, each at its line and column")
    func refusedReloadWithProblemsOfTheFileAndOfAPlugin() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { HammockProcess.removeTemporaryDirectory(folder) }
        let configPath = try HammockProcess.writeConfig(
            """
            sources:
              tick: { kind: fake, content: 1, refresh: 200ms }
            """, in: folder)
        try await HammockProcess.withRunning(configPath: configPath) { hammock in
            try await hammock.waitFor(type: "source", id: "tick") { $0.event == "newData" }
            // Line 2: the engine's problem (a duration). Line 3: the fake plugin's own (an option it does
            // not know), reported only by the plugin.
            _ = try HammockProcess.writeConfig(
                """
                sources:
                  tick: { kind: fake, content: 1, refresh: soon }
                  other: { kind: fake, contnet: 2 }
                """, in: folder)
            try hammock.send(controlLine: #"{"op":"reload","id":"r1"}"#)
            let error = try await hammock.waitFor(type: "error")
            let message = error["message"]?.stringValue ?? ""
            #expect(message.contains("config.yaml:2:44: refresh"), "the file's problem: \(message)")
            #expect(message.contains("config.yaml:3:24: source \"other\""), "the plugin's problem: \(message)")
            try await hammock.waitForStderr(containing: "config.yaml:3:24:")
            #expect(hammock.stderrText.contains("config.yaml:2:44:"), "\(hammock.stderrText)")
            // The running configuration goes on.
            let mark = hammock.lineCount
            try await hammock.waitUntil("tick refreshes after the refused reload") { lines in
                lines.dropFirst(mark).contains { $0.id == "tick" && $0.event == "newData" }
            }
        }
    }

    // MARK: Options schemas with references

    /// `python3 -c SCRIPT ARGUMENTS`, killed if it runs past `timeout`; its status and its stdout and
    /// stderr together.
    static func python(_ script: String, _ arguments: [String], timeout: Duration = .seconds(30)) async throws -> (status: Int32, text: String) {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { HammockProcess.removeTemporaryDirectory(folder) }
        let outputPath = folder + "/output.txt"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        defer { try? output.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script] + arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline {
                process.terminate()
                Issue.record("python3 ran past \(timeout)")
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        // Its end, waited for by polling: `waitUntilExit()` would hold one of the cooperative pool's threads
        // (at once after an exit; after the terminate above, SIGKILL follows when SIGTERM has not ended it in 5 s).
        let killAt = ContinuousClock.now + .seconds(5)
        while process.isRunning {
            if ContinuousClock.now > killAt { kill(process.processIdentifier, SIGKILL) }
            try await Task.sleep(for: .milliseconds(20))
        }
        return (process.terminationStatus, (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "")
    }

    /// Checks the schema with jsonschema's 2020-12 validator, then validates each instance (a JSON file) and
    /// prints `valid` or `invalid: MESSAGE` for each.
    static let validator = #"""
        import json, sys
        from jsonschema import Draft202012Validator
        schema = json.load(open(sys.argv[1]))
        Draft202012Validator.check_schema(schema)
        validator = Draft202012Validator(schema)
        for path in sys.argv[2:]:
            errors = list(validator.iter_errors(json.load(open(path))))
            print("valid" if not errors else "invalid: " + "; ".join(e.message for e in errors))
        """#

    @Test("a plugin's options schema with $defs and $refs is placed under #/$defs/kind:NAME and validators follow it")
    func optionsSchemaWithItsOwnDefinitions() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { HammockProcess.removeTemporaryDirectory(folder) }
        let script = folder + "/weather.py"
        // `city` by reference to its own $defs (which the configuration's root has none of), and `near` a list
        // of the same; a city of one letter breaks the referenced minLength.
        try SchemaCommandTests.weatherPlugin(
            schema: ##"{"type": "object", "$defs": {"city": {"type": "string", "minLength": 2}}, "properties": {"city": {"$ref": "#/$defs/city"}, "near": {"type": "array", "items": {"$ref": "#/$defs/city"}}}, "additionalProperties": False}"##
        ).write(toFile: script, atomically: true, encoding: .utf8)
        let config = try HammockProcess.writeConfig(
            """
            plugins:
              weather: { command: [python3, \(script)] }
            sources:
              oslo: { kind: weather, city: Oslo }
            """, in: folder)
        let run = try await HammockProcess.execute(["schema", config])
        #expect(run.termination == .exited(0), "\(run.stderr)")
        let schemaPath = folder + "/schema.json"
        try run.stdout.write(toFile: schemaPath, atomically: true, encoding: .utf8)
        let schema = try JSONValue(parsing: Array(run.stdout.utf8))
        #expect(schema["$defs"]?["kind:weather"]?["properties"]?["city"]?["$ref"] == "#/$defs/kind:weather/$defs/city", "\(run.stdout)")

        var instances: [String] = []
        for (index, sources) in [
            #"{"oslo": {"kind": "weather", "city": "Oslo", "near": ["Bergen"]}}"#,
            #"{"oslo": {"kind": "weather", "city": "O"}}"#,
            #"{"oslo": {"kind": "weather", "near": ["B"]}}"#,
        ].enumerated() {
            let path = folder + "/instance\(index).json"
            try #"{"sources": SOURCES}"#.replacingOccurrences(of: "SOURCES", with: sources).write(toFile: path, atomically: true, encoding: .utf8)
            instances.append(path)
        }
        let checked = try await Self.python(Self.validator, [schemaPath] + instances)
        #expect(checked.status == 0, "\(checked.text)")
        let verdicts = checked.text.split(separator: "\n").map(String.init)
        #expect(verdicts.count == 3 && verdicts[0] == "valid", "\(checked.text)")
        #expect(verdicts.count == 3 && verdicts[1].hasPrefix("invalid") && verdicts[2].hasPrefix("invalid"), "\(checked.text)")
    }

    @Test(
        "a $ref that loops, leads nowhere or leaves the options schema is refused with a clear message",
        arguments: [
            (##"{"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "properties": {"city": {"$ref": "#/$defs/a"}}}"##, "$ref loop"),
            (##"{"type": "object", "properties": {"city": {"$ref": "#/$defs/missing"}}}"##, "leads nowhere"),
            (##"{"type": "object", "properties": {"city": {"$ref": "https://example.org/city.json"}}}"##, "leaves the options schema"),
        ])
    func badReferencesAreRefused(schema: String, says: String) async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { HammockProcess.removeTemporaryDirectory(folder) }
        let script = folder + "/weather.py"
        try SchemaCommandTests.weatherPlugin(schema: schema).write(toFile: script, atomically: true, encoding: .utf8)
        let config = try HammockProcess.writeConfig(
            """
            plugins:
              weather: { command: [python3, \(script)] }
            sources:
              oslo: { kind: weather, city: Oslo }
            """, in: folder)
        let run = try await HammockProcess.execute(["schema", config])
        #expect(run.termination == .exited(1), "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains(#"the options schema of kind "weather""#) && run.stderr.contains(says), "\(run.stderr)")
    }

    @Test("a recursive options schema that descends into the value is no loop")
    func recursionThroughPropertiesIsAllowed() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { HammockProcess.removeTemporaryDirectory(folder) }
        let script = folder + "/weather.py"
        try SchemaCommandTests.weatherPlugin(
            schema: ##"{"type": "object", "$defs": {"area": {"type": "object", "properties": {"name": {"type": "string"}, "inner": {"$ref": "#/$defs/area"}}, "additionalProperties": False}}, "properties": {"area": {"$ref": "#/$defs/area"}}}"##
        ).write(toFile: script, atomically: true, encoding: .utf8)
        let config = try HammockProcess.writeConfig(
            """
            plugins:
              weather: { command: [python3, \(script)] }
            sources:
              oslo: { kind: weather }
            """, in: folder)
        let run = try await HammockProcess.execute(["schema", config])
        #expect(run.termination == .exited(0), "\(run.stderr)")
        let schemaPath = folder + "/schema.json"
        try run.stdout.write(toFile: schemaPath, atomically: true, encoding: .utf8)
        let good = folder + "/good.json", bad = folder + "/bad.json"
        try #"{"sources": {"oslo": {"kind": "weather", "area": {"name": "a", "inner": {"name": "b"}}}}}"#.write(toFile: good, atomically: true, encoding: .utf8)
        try #"{"sources": {"oslo": {"kind": "weather", "area": {"inner": {"inner": {"wrong": 1}}}}}}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        let checked = try await Self.python(Self.validator, [schemaPath, good, bad])
        #expect(checked.text.split(separator: "\n").map(String.init).first == "valid", "\(checked.text)")
        #expect(checked.text.split(separator: "\n").dropFirst().first?.hasPrefix("invalid") == true, "\(checked.text)")
    }
}
