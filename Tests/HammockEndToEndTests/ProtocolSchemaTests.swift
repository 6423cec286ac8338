import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// The JSON Schemas of the stdout and stdin protocol (docs/schema/) and the real engine must not drift apart:
/// hammock runs a configuration that makes it write every line type and every variant of their fields, and
/// every line it writes must pass the output schema; every control line it acknowledges must pass the control
/// schema and every one it refuses for its shape must fail it. The checking is `docs/schema/validate.py`, the
/// script the protocol documentation gives consumers, run with `python3` and its `jsonschema` module, which
/// must be installed: the test fails without them rather than let the schemas drift unchecked.
@Suite("Protocol schema")
struct ProtocolSchemaTests {
    static let schemaFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/schema").path

    /// A plugin for kind `etag` that answers a load with data and an ETag, and a load that brings the ETag back
    /// with `notModified`: the one answer no shipped kind gives without a server.
    static let etagPlugin = #"""
        import json, sys
        for line in sys.stdin:
            message = json.loads(line)
            op = message.get("op")
            if op == "hello":
                answer = {"type": "hello", "protocol": 1, "kinds": ["etag"], "version": "0.0.1"}
            elif op == "configure":
                answer = {"type": "configured", "source": message["source"]}
            elif op == "load" and message.get("etag") == "v1":
                answer = {"type": "notModified", "id": message["id"]}
            elif op == "load":
                answer = {"type": "newData", "source": message["source"], "id": message["id"], "content": "v1", "etag": "v1"}
            elif op == "shutdown":
                break
            else:
                continue
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
        """#

    /// The main run's configuration. `stage` changes it for the reloads: `.refused` is invalid (a duration
    /// without its unit), `.reduced` drops a source and a view.
    enum Stage { case first, refused, reduced }

    static func config(folder: String, stage: Stage) -> String {
        let dropped = stage == .reduced ? "" : "  dropped: { kind: fake, content: 1 }\n"
        let gone = stage == .reduced ? "" : "  gone: { sources: [dropped] }\n"
        let refresh = stage == .refused ? ", refresh: soon" : ""
        return """
            version: 1
            defaults:
              retry: off
            sources:
              # restored from the cache the --once run left (origin cache), then loaded (origin load)
              cached: { kind: fake, content: { restored: true }, cache: true }
              good: { kind: fake, content: { greeting: hello }\(refresh) }
              http:
                kind: fake
                state: error
                error: { message: service unavailable, httpStatus: 503, code: upstreamDown }
              plain: { kind: fake, state: error, error: plain failure }
              exit: { kind: shell, script: "echo failing >&2; exit 3" }
              # loading for the whole test, however long a busy machine makes it
              stuck: { kind: fake, state: loading, timeout: 1h }
              # never loads (its input never has content): a snapshot shows it with no event
              waiting: { kind: fake, content: "{{ stuck.value }}" }
              watched: { kind: file, path: \(TestFiles.yamlQuoted(folder + "/watched.json")) }
              etag: { kind: etag }
            \(dropped)views:
              ready: { sources: [good] }
              failing: { sources: [http, plain] }
              spinner: { sources: [stuck] }
              quiet: { sources: [good], display: [error] }
            \(gone)plugins:
              etag: { command: [python3, \(TestFiles.yamlQuoted(folder + "/etag-plugin.py"))] }
            """
    }

    /// The `--once` run's configuration, at the same path (the cache folder belongs to the path): it stores
    /// `cached` in the cache and ends with `bye` reason `once` and `failed`.
    static let onceConfig = """
        version: 1
        sources:
          cached: { kind: fake, content: { restored: true }, cache: true }
          plain: { kind: fake, state: error, error: plain failure, retry: off }
        """

    /// Control lines that hammock refuses for their shape, each with an `error` line (with the line's `id`
    /// when it is an object), and that the control schema must refuse too.
    static let malformedControlLines = [
        #"this is not json"#,
        #"[1, 2]"#,
        #"{"source":"good","id":"m-1"}"#,
        #"{"op":"explode","id":"m-2"}"#,
        #"{"op":"load","id":"m-3"}"#,
        #"{"op":"load","source":"good","view":"ready","id":"m-4"}"#,
        #"{"op":"cancel","source":7,"id":"m-5"}"#,
        #"{"op":"override","source":"good","id":"m-6"}"#,
        #"{"op":"override","view":"ready","content":1,"id":"m-7"}"#,
    ]

    /// One control line of every op and target, each with an `id`: hammock must acknowledge each, as the
    /// control schema must accept each, so the two agree on what a well-formed line is.
    static let acknowledgedControlLines = [
        #"{"op":"load","source":"good","id":"a-1"}"#,
        #"{"op":"load","view":"ready","id":2}"#,
        #"{"op":"loadIfNeeded","source":"good","id":3}"#,
        #"{"op":"loadIfNeeded","view":"failing","id":"a-4"}"#,
        #"{"op":"retry","view":"failing","id":5}"#,
        #"{"op":"retry","source":"plain","id":6.5}"#,
        #"{"op":"cancel","source":"stuck","id":7}"#,
        #"{"op":"cancel","view":"spinner","id":-8}"#,
        #"{"op":"wipe","source":"watched","id":9}"#,
        #"{"op":"wipe","view":"quiet","id":"a-10"}"#,
        #"{"op":"override","source":"good","content":null,"id":"a-11"}"#,
        #"{"op":"snapshot","id":"a-12"}"#,
        #"{"op":"reload","id":13}"#,
    ]

    /// The `id` a control line carries.
    static func controlID(_ line: String) -> JSONValue? {
        (try? JSONValue(parsing: Array(line.utf8)))?["id"]
    }

    /// A control line whose `id` is neither a string nor a number: hammock answers with an error line without id.
    static let wrongIdControlLine = #"{"op":"snapshot","id":true}"#

    /// Lines that are wrong in the ways a drifting engine (or a careless consumer's fake) would be, each with
    /// where validate.py must say it is wrong: the output schema is not vacuous, and the script points at the
    /// member at fault.
    static let wrongOutputLines: [(line: String, fault: String)] = [
        (#"{"type":"source","seq":3,"id":"good","event":"requested"}"#, "at /: 'state' is a required property"),
        (#"{"type":"error","seq":0,"message":"m"}"#, "at /seq:"),
        (#"{"type":"error","seq":1.5,"message":"m"}"#, "at /seq:"),
        (#"{"type":"progress","seq":4}"#, "at /type:"),
        (#"{"seq":4,"message":"m"}"#, "at /: 'type' is a required property"),
        (#"{"type":"ack","seq":5}"#, "at /: 'id' is a required property"),
        (#"{"type":"ack","seq":5,"id":true}"#, "at /id:"),
        (#"{"type":"error","seq":5,"message":"m","id":null}"#, "at /id:"),
        (
            #"{"type":"source","seq":6,"id":"a","event":"newData","state":{"content":1,"latestError":null,"isLoading":false,"timestamp":"2026-11-22T10:00:00.123Z","failures":0}}"#,
            "at /: 'origin' is a required property"
        ),
        (
            #"{"type":"source","seq":6,"id":"a","event":"error","origin":"load","state":{"content":1,"latestError":{"message":"m"},"isLoading":false,"timestamp":"2026-11-22T10:00:00.123Z","failures":1}}"#,
            "at /origin: not allowed here"
        ),
        (
            #"{"type":"source","seq":6,"id":"a","event":"newData","origin":"disk","state":{"content":1,"latestError":null,"isLoading":false,"timestamp":"2026-11-22T10:00:00.123Z","failures":0}}"#,
            "at /origin:"
        ),
        (
            #"{"type":"source","seq":7,"id":"a","event":"newData","origin":"load","state":{"content":1,"latestError":null,"isLoading":false,"timestamp":"2026-11-22T10:00:00Z","failures":0}}"#,
            "at /state/timestamp:"
        ),
        (
            #"{"type":"source","seq":7,"id":"a","event":"error","state":{"content":null,"latestError":{"message":"m","httpStatus":"503"},"isLoading":false,"timestamp":"2026-11-22T10:00:00.123Z","failures":1}}"#,
            "at /state/latestError/httpStatus:"
        ),
        (
            #"{"type":"source","seq":7,"id":"a","event":"requested","state":{"content":null,"latestError":null,"isLoading":true,"timestamp":null,"failures":0,"stale":true}}"#,
            "at /state: Additional properties are not allowed"
        ),
        (
            #"{"type":"view","seq":8,"id":"v","status":"busy","content":null,"latestError":null,"errors":{},"canTryAgain":false}"#,
            "at /status:"
        ),
        (#"{"type":"bye","seq":9}"#, "at /: 'reason' is a required property"),
        (#"{"type":"bye","seq":9,"reason":"signal","failed":[]}"#, "at /failed: not allowed here"),
        (#"{"type":"bye","seq":9,"reason":"once"}"#, "at /: 'failed' is a required property"),
        (#"{"type":"hello","seq":1,"protocol":2,"version":"9","sources":[],"views":[]}"#, "at /protocol:"),
        (#"{"type":"removed","seq":2,"id":"x","what":"plugin"}"#, "at /what:"),
    ]

    @Test("every line hammock writes, of every type and variant, passes docs/schema; refused control lines fail it")
    func linesMatchTheSchemas() async throws {
        try await Self.requireValidator()
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data(Self.etagPlugin.utf8).write(to: URL(fileURLWithPath: folder + "/etag-plugin.py"))
        try TestFiles.writeInPlace(#"{"v": 1}"#, to: folder + "/watched.json")
        let environment = ["HAMMOCK_CACHE_DIR": folder + "/cache"]

        // `--once` fills the cache and writes `bye` with `failed`.
        let configPath = try HammockProcess.writeConfig(Self.onceConfig, in: folder)
        let once = try await HammockProcess.execute(["run", "--once", configPath], environment: environment)
        #expect(once.termination == .exited(1), "plain fails, so --once exits 1; stderr: \(once.stderr)")
        var written = once.stdout.split(separator: "\n").map(String.init)

        _ = try HammockProcess.writeConfig(Self.config(folder: folder, stage: .first), in: folder)
        // The well-formed control lines sent (to known targets or not), for the control schema.
        var sentControlLines: [String] = []
        let lines = try await HammockProcess.withRunning(configPath: configPath, environment: environment) { hammock in
            func send(_ line: String) throws {
                try hammock.send(controlLine: line)
                sentControlLines.append(line)
            }
            func has(
                _ lines: [HammockLine], _ id: String, _ event: String, _ condition: (HammockLine) -> Bool = { _ in true }
            ) -> Bool {
                lines.contains { $0.type == "source" && $0.id == id && $0.event == event && condition($0) }
            }
            func message(_ line: HammockLine) -> String { line["message"]?.stringValue ?? "" }

            try await hammock.waitUntil("every source and view has its first state") { lines in
                has(lines, "cached", "newData") { $0.origin == "cache" } && has(lines, "good", "newData")
                    && has(lines, "http", "error") && has(lines, "plain", "error") && has(lines, "exit", "error")
                    && has(lines, "stuck", "requested") && has(lines, "etag", "newData") && has(lines, "watched", "newData")
                    && lines.contains { $0.id == "failing" && $0.status == "error" }
                    && lines.contains { $0.id == "spinner" && $0.status == "loading" }
            }

            // A load that brings the ETag back: notModified.
            try send(#"{"op":"load","source":"etag"}"#)
            try await hammock.next("etag") { $0.event == "notModified" }
            // The watched file changes: a push.
            try TestFiles.replaceAtomically(#"{"v": 2}"#, at: folder + "/watched.json")
            try await hammock.next("watched") { $0.origin == "push" }
            // The consumer sets and clears content, and cancels a load.
            try send(#"{"op":"override","source":"good","content":{"x":[1,2.5,null],"y":"z"}}"#)
            try await hammock.next("good") { $0.origin == "override" }
            try send(#"{"op":"wipe","source":"good"}"#)
            try await hammock.next("good") { $0.origin == "wipe" }
            try send(#"{"op":"cancel","source":"stuck"}"#)
            try await hammock.next("stuck") { $0.event == "requestCancelled" }
            // A snapshot shows the source that never had an event with `"event": null`.
            try send(#"{"op":"snapshot"}"#)
            try await hammock.next("waiting") { $0["event"] == .null }
            // The other ops, by source and by view.
            try send(#"{"op":"loadIfNeeded","source":"good"}"#)
            try send(#"{"op":"retry","view":"failing"}"#)
            try send(#"{"op":"load","view":"ready"}"#)
            try await hammock.next("good") { $0.origin == "load" }

            // Control lines hammock refuses, each with an error line, with its id when it has one.
            var mark = hammock.lineCount
            for line in Self.malformedControlLines { try hammock.send(controlLine: line) }
            try send(#"{"op":"load","source":"nope"}"#)  // the right shape, an unknown source
            let refusals = Self.malformedControlLines.count + 1
            try await hammock.waitUntil("\(refusals) error lines") { lines in
                lines.dropFirst(mark).filter { $0.type == "error" }.count >= refusals
            }
            let refusedIDs = hammock.lines(since: mark).filter { $0.type == "error" }.compactMap { $0["id"] }
            #expect(
                refusedIDs == Self.malformedControlLines.compactMap(Self.controlID), "each malformed line is refused with its id")

            // A refused reload, then one that drops a source and a view.
            mark = hammock.lineCount
            _ = try HammockProcess.writeConfig(Self.config(folder: folder, stage: .refused), in: folder)
            try send(#"{"op":"reload"}"#)
            try await hammock.waitUntil("the refused reload's error line") { lines in
                lines.dropFirst(mark).contains { $0.type == "error" && message($0).contains("config.yaml:") }
            }
            _ = try HammockProcess.writeConfig(Self.config(folder: folder, stage: .reduced), in: folder)
            try send(#"{"op":"reload"}"#)
            try await hammock.waitFor(type: "reloaded")
            try await hammock.waitUntil("removed lines for the dropped source and view") { lines in
                lines.contains { $0.type == "removed" && $0.id == "dropped" && $0["what"] == "source" }
                    && lines.contains { $0.type == "removed" && $0.id == "gone" && $0["what"] == "view" }
            }

            // Every op and target, acknowledged; then an id on a line that cannot be carried out.
            mark = hammock.lineCount
            for line in Self.acknowledgedControlLines { try send(line) }
            let ids = Self.acknowledgedControlLines.compactMap(Self.controlID)
            try await hammock.waitUntil("an answer to each of \(ids)") { lines in
                lines.dropFirst(mark).filter { ["ack", "error"].contains($0.type) }.count >= ids.count
            }
            let answered = hammock.lines(since: mark).filter { ["ack", "error"].contains($0.type) }
            #expect(
                answered.map(\.type) == ids.map { _ in "ack" }, "every well-formed line of a known target is acknowledged")
            #expect(answered.compactMap { $0["id"] } == ids, "acknowledged in the order sent, each id echoed")
            try send(#"{"op":"load","source":"nope","id":"bad-1"}"#)
            try await hammock.waitFor(type: "error") { $0["id"] == "bad-1" }
            // An id of another type: an error line without id.
            try hammock.send(controlLine: Self.wrongIdControlLine)
            try await hammock.waitFor(type: "error") {
                $0.json.objectValue?["id"] == Optional<JSONValue>.none
                    && message($0).contains(#""id" must be a string or a number"#)
            }

            hammock.signal(SIGTERM)
            #expect(try await hammock.waitForExit() == .exited(0))
            try await hammock.waitUntilStdoutEnds()
            return hammock.lines
        }
        #expect(lines.last?.type == "bye", "bye is the last line")
        written += lines.map(\.text)

        let expected: Set<String> = [
            "type:hello", "type:source", "type:view", "type:reloaded", "type:removed", "type:error", "type:bye",
            "event:requested", "event:requestCancelled", "event:newData", "event:notModified", "event:error", "event:null",
            "origin:load", "origin:push", "origin:cache", "origin:override", "origin:wipe",
            "latestError:httpStatus", "latestError:exitStatus", "latestError:code", "latestError:messageOnly",
            "timestamp:null", "timestamp:set", "content:null", "content:set",
            "status:loading", "status:error", "status:data", "status:idle", "canTryAgain:true", "canTryAgain:false",
            "removed:source", "removed:view", "bye:signal", "bye:once", "bye:failed",
            "type:ack", "ack.id:string", "ack.id:number", "error.id:string",
        ]
        let seen = Set(written.flatMap(Self.variants))
        #expect(
            expected.subtracting(seen).isEmpty,
            """
            the run no longer shows \(expected.subtracting(seen).sorted()): change its configuration so that the schema \
            test still sees them
            """)

        let output = try await Self.validate(written)
        #expect(output.status == 0, "hammock's lines that do not match docs/schema/output-line.schema.json:\n\(output.text)")
        let control = try await Self.validate(sentControlLines, arguments: ["--control"])
        #expect(control.status == 0, "well-formed control lines that do not match the control schema:\n\(control.text)")
        let refused = try await Self.validate(
            Self.malformedControlLines + [Self.wrongIdControlLine], arguments: ["--control", "--expect-invalid"])
        #expect(refused.status == 0, "control lines hammock refuses that the control schema accepts:\n\(refused.text)")
    }

    @Test("the output schema is not vacuous: wrong lines are rejected, each for its fault")
    func wrongLinesAreRejected() async throws {
        try await Self.requireValidator()
        let result = try await Self.validate(Self.wrongOutputLines.map(\.line))
        #expect(result.status == 1, "validate.py exits 1 when a line is invalid:\n\(result.text)")
        let faults = Self.faultsByLine(result.text)
        for (index, wrong) in Self.wrongOutputLines.enumerated() {
            let found = faults[index + 1] ?? []
            #expect(
                found.contains { $0.hasPrefix(wrong.fault) },
                "\(wrong.line) must be rejected with \"\(wrong.fault)…\"; validate.py said \(found)")
        }
    }

    /// validate.py's report, by line number: `line N: TEXT` followed by indented reasons.
    static func faultsByLine(_ report: String) -> [Int: [String]] {
        var faults: [Int: [String]] = [:]
        var current: Int?
        for row in report.split(separator: "\n") {
            if row.hasPrefix("line "), let number = Int(row.dropFirst(5).prefix { $0.isNumber }) {
                current = number
            } else if let current, row.hasPrefix("    ") {
                faults[current, default: []].append(String(row.dropFirst(4)))
            }
        }
        return faults
    }

    // MARK: - Variants

    /// The variants one output line shows: its type, and for each type the fields that vary.
    static func variants(of text: String) -> [String] {
        guard let line = try? JSONValue(parsing: Array(text.utf8)), let type = line["type"]?.stringValue else { return [] }
        var found = ["type:" + type]
        switch type {
        case "source":
            found.append("event:" + (line["event"]?.stringValue ?? "null"))
            if let origin = line["origin"]?.stringValue { found.append("origin:" + origin) }
            let state = line["state"]
            found.append(state?["timestamp"] == .null ? "timestamp:null" : "timestamp:set")
            found.append(state?["content"] == .null ? "content:null" : "content:set")
            if let error = state?["latestError"]?.objectValue {
                let extra = ["httpStatus", "exitStatus", "code"].filter { error[$0] != nil }
                found += extra.isEmpty ? ["latestError:messageOnly"] : extra.map { "latestError:" + $0 }
            }
        case "view":
            found.append("status:" + (line["status"]?.stringValue ?? "?"))
            found.append("canTryAgain:" + (line["canTryAgain"] == true ? "true" : "false"))
        case "removed":
            found.append("removed:" + (line["what"]?.stringValue ?? "?"))
        case "bye":
            found.append("bye:" + (line["reason"]?.stringValue ?? "?"))
            if line["failed"] != nil { found.append("bye:failed") }
        case "error":
            if let id = line["id"] { found.append(id.stringValue != nil ? "error.id:string" : "error.id:other") }
        case "ack":
            if let id = line["id"] { found.append(id.stringValue != nil ? "ack.id:string" : "ack.id:number") }
        default:
            break
        }
        return found
    }

    // MARK: - Running the validator

    struct ValidatorResult {
        var status: Int32
        var text: String
    }

    /// Fails the test, with what to install, unless `python3` and its `jsonschema` module are there: CI
    /// installs them (`.ci/run`), and a schema check that is skipped would let the schema drift unseen.
    /// `python3` on PATH when it has `jsonschema`, else Debian's `/usr/bin/python3` (where apt puts
    /// `python3-jsonschema`, and which pyenv's shims first on PATH would hide); nil and what each said if
    /// neither has it.
    static func validatorPython() async throws -> (python: String?, said: String) {
        var said: [String] = []
        for python in ["python3", "/usr/bin/python3"] {
            let probe = try await run(["-c", "import jsonschema"], input: [], python: python)
            if probe.status == 0 { return (python, "") }
            said.append("`\(python) -c 'import jsonschema'` said (status \(probe.status)): \(probe.text)")
        }
        return (nil, said.joined(separator: "; "))
    }

    static func requireValidator(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let found = try await validatorPython()
        guard found.python == nil else { return }
        throw HammockHarnessError(
            message: """
                the protocol schema test needs python3 with the jsonschema module (apt install python3-jsonschema, \
                or pip install jsonschema); \(found.said)
                """,
            sourceLocation: sourceLocation)
    }

    /// `docs/schema/validate.py ARGUMENTS` over `lines`, one per line.
    static func validate(_ lines: [String], arguments: [String] = []) async throws -> ValidatorResult {
        let python = try await validatorPython().python ?? "python3"
        return try await run([schemaFolder + "/validate.py"] + arguments, input: lines, python: python)
    }

    /// Runs `PYTHON ARGUMENTS` with `input` on stdin, stdout and stderr together in `text`. Files, not pipes,
    /// so that neither side can block on a full pipe however much the other writes.
    static func run(_ arguments: [String], input: [String], python: String) async throws -> ValidatorResult {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let inputPath = folder + "/input.jsonl"
        let outputPath = folder + "/output.txt"
        try Data(input.map { $0 + "\n" }.joined().utf8).write(to: URL(fileURLWithPath: inputPath))
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        let inputFile = try FileHandle(forReadingFrom: URL(fileURLWithPath: inputPath))
        let outputFile = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        defer {
            try? inputFile.close()
            try? outputFile.close()
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [python] + arguments
        process.standardInput = inputFile
        process.standardOutput = outputFile
        process.standardError = outputFile
        try process.run()
        // Polled rather than `waitUntilExit()`, which would hold a thread of the shared pool the whole time;
        // with a deadline, so a validator that hangs (a `$ref` loop) fails the test instead of holding it.
        let deadline = ContinuousClock.now + .seconds(60)
        while process.isRunning {
            if ContinuousClock.now >= deadline {
                kill(process.processIdentifier, SIGKILL)
                Issue.record("the schema validator was still running after 60 s (killed): \(arguments)")
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        return ValidatorResult(status: process.terminationStatus, text: text)
    }
}
