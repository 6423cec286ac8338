import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// `hammock schema [CONFIG]` and the options schemas of `hello`, run for real: the committed
/// docs/schema/configuration.schema.json is what the command prints, a configuration's own plugin is asked
/// for its kind's options, a plugin that will not start is an error, and `hammock plugin check` says what is
/// wrong in a malformed options schema.
@Suite("hammock schema, end to end")
struct SchemaCommandTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let committed = root.appendingPathComponent("docs/schema/configuration.schema.json").path

    /// A plugin of kind `weather` whose hello gives `schema` (JSON text) as its options schema.
    static func weatherPlugin(schema: String) -> String {
        #"""
        import json, sys
        for line in sys.stdin:
            message = json.loads(line)
            op = message.get("op")
            if op == "hello":
                answer = {"type": "hello", "protocol": 1, "kinds": ["weather"], "version": "1", "optionsSchema": {"weather": SCHEMA}}
            elif op == "configure":
                answer = {"type": "configured", "source": message["source"]}
            elif op == "shutdown":
                break
            else:
                continue
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
        """#.replacingOccurrences(of: "SCHEMA", with: schema)
    }

    @Test("the committed schema is what `hammock schema` prints")
    func committedSchemaIsCurrent() async throws {
        let run = try await HammockProcess.execute(["schema"])
        #expect(run.termination == .exited(0), "\(run.stderr)")
        let committed = try String(contentsOfFile: Self.committed, encoding: .utf8)
        #expect(
            run.stdout == committed,
            "docs/schema/configuration.schema.json is out of date: regenerate it with `swift build && .build/debug/hammock schema > docs/schema/configuration.schema.json`")
        // Every shipped kind is described, each by its plugin.
        let schema = try JSONValue(parsing: Array(run.stdout.utf8))
        let described = schema["$defs"]?["source"]?["allOf"]?.arrayValue?.compactMap { $0["if"]?["properties"]?["kind"]?["const"]?.stringValue }
        #expect(described == ["fake", "file", "rest", "shell"])
    }

    @Test("with CONFIG, the kinds of its plugins: section are described by their plugins")
    func configurationPlugins() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let script = folder + "/weather.py"
        try Self.weatherPlugin(schema: #"{"type": "object", "properties": {"city": {"type": "string", "description": "The city."}}, "required": ["city"], "additionalProperties": False}"#)
            .write(toFile: script, atomically: true, encoding: .utf8)
        // `refersh` is a mistake `hammock check` would report: the schema is still given, for finding it.
        let config = try HammockProcess.writeConfig(
            """
            plugins:
              weather: { command: [python3, \(script)] }
            sources:
              oslo: { kind: weather, city: Oslo, refersh: 5m }
            """, in: folder)
        let run = try await HammockProcess.execute(["schema", config])
        #expect(run.termination == .exited(0), "\(run.stderr)")
        let schema = try JSONValue(parsing: Array(run.stdout.utf8))
        let branches = schema["$defs"]?["source"]?["allOf"]?.arrayValue ?? []
        let weather = branches.first { $0["if"]?["properties"]?["kind"]?["const"] == "weather" }
        // The kind's options stand once under $defs, where the branch refers to them.
        #expect(weather?["then"] == ["$ref": "#/$defs/kind:weather"], "\(run.stdout)")
        let options = schema["$defs"]?["kind:weather"]
        #expect(options?["properties"]?["city"]?["description"] == "The city.", "\(run.stdout)")
        #expect(options?["required"] == ["city"])
    }

    @Test("a plugin that will not start is an error on stderr, and nothing is printed")
    func pluginThatWillNotStart() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let config = try HammockProcess.writeConfig(
            """
            plugins:
              broken: { command: [\(folder)/no-such-plugin] }
            sources:
              a: { kind: broken }
            """, in: folder)
        let run = try await HammockProcess.execute(["schema", config])
        #expect(run.termination == .exited(1))
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains(#"hammock schema: the plugin of kind "broken" did not say hello"#), "\(run.stderr)")
    }

    @Test("plugin check passes the shipped plugins' options schemas and says what is wrong in a malformed one")
    func pluginCheck() async throws {
        let shell = try await HammockProcess.execute(
            ["plugin", "check", "--options", #"{"command":["echo","hi"]}"#, "--", "hammock-plugin-shell"], timeout: .seconds(40))
        #expect(shell.stdout.contains("ok   options schema: well-formed for shell"), "\(shell.stdout)")

        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let script = folder + "/weather.py"
        try Self.weatherPlugin(schema: #"{"type": "object", "properties": {"city": {"type": "strin"}}, "required": "city"}"#)
            .write(toFile: script, atomically: true, encoding: .utf8)
        let run = try await HammockProcess.execute(["plugin", "check", "--load-timeout", "1", "--", "python3", script], timeout: .seconds(40))
        #expect(run.termination == .exited(1))
        let line = run.stdout.split(separator: "\n").first { $0.hasPrefix("FAIL options schema") } ?? ""
        #expect(line.contains(#"optionsSchema.weather at /properties/city/type: type "strin" is not a JSON Schema type (did you mean "string"?)"#), "\(run.stdout)")
        #expect(line.contains("optionsSchema.weather at /required: required must be a list of property names"), "\(run.stdout)")
    }
}
