import Foundation
import HammockJSON
import HammockTestSupport
import Testing

// What the DocumentedBehaviourTests files share: a folder per test, a small Python plugin written into it,
// and a way to run hammock on a configuration file the test rewrites (for reloads and restarts).
// Only HammockProcess's public surface is used, so these tests do not depend on where it lives.

/// The namespace of what the DocumentedBehaviourTests share, so no name clashes with other test files.
enum Documented {}

extension Documented {
    /// A fresh folder for one test's files (configuration, fixture plugins, watched files); `remove()` deletes it.
    struct Folder: Sendable {
        let path: String

        init() throws {
            path = try HammockProcess.makeTemporaryDirectory()
        }

        func remove() { try? FileManager.default.removeItem(atPath: path) }

        /// `path/name`, with its parent folders created.
        func file(_ name: String) throws -> String {
            let full = path + "/" + name
            try FileManager.default.createDirectory(
                atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            return full
        }

        @discardableResult
        func write(_ text: String, to name: String, executable: Bool = false) throws -> String {
            let full = try file(name)
            try Data(text.utf8).write(to: URL(fileURLWithPath: full))
            if executable { chmod(full, 0o755) }
            return full
        }

        /// Writes the fixture plugin (see `Plugin.source`) and returns its path.
        func fixturePlugin() throws -> String {
            try write(Plugin.source, to: "fixture-plugin.py", executable: true)
        }

        /// Runs `body` with a folder that is removed however it ends.
        static func with<Result>(_ body: (Folder) async throws -> Result) async throws -> Result {
            let folder = try Folder()
            do {
                let result = try await body(folder)
                folder.remove()
                return result
            } catch {
                folder.remove()
                throw error
            }
        }
    }

    /// A plugin for a kind of the test's choosing, in Python's standard library only, that does exactly what a
    /// test needs to see: it can log every line it receives, tag its answers, refuse an option, say hello a
    /// second time, or write a push and an answer together.
    enum Plugin {
        /// `plugins:` YAML starting the fixture for `kind` with these fixture arguments.
        static func pluginsSection(kind: String = "test", path: String, arguments: [String] = []) -> String {
            let argv = ["python3", path, "--kind", kind] + arguments
            return "plugins:\n  \(kind): { command: [\(argv.map(Documented.yamlQuoted).joined(separator: ", "))] }\n"
        }

        static let source = #"""
            #!/usr/bin/env python3
            # A fixture plugin for hammock's DocumentedBehaviourTests.
            #   --kind K      the kind it serves (default test)
            #   --tag T       put T in every answer: tells which command served a load
            #   --log FILE    append every line received from hammock to FILE
            #   --mode M      good (default): answer each load with {"n", "pid", "tag"}
            #                 second-hello: answer the first load, then say hello again instead of answering
            #                 push-order: load k is answered {"round": k, "by": "answer"} and pushed
            #                   {"round": k, "by": "push"} in one write: answer first for odd k, push first for even
            #                 ticker: after a source's first load, push {"tick": i, "pid", "tag"} every 200 ms
            # A source whose options hold "bad": true is refused with an error at /bad.
            import json, os, sys, threading, time

            args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
            kind = args.get("--kind", "test")
            tag = args.get("--tag", "")
            log = args.get("--log")
            mode = args.get("--mode", "good")
            lock = threading.Lock()
            loads = 0
            ticking = set()

            def write(messages):
                text = "".join(json.dumps(m) + "\n" for m in messages)
                with lock:
                    try:
                        sys.stdout.write(text)
                        sys.stdout.flush()
                    except BrokenPipeError:
                        os._exit(0)

            def tick(source):
                i = 0
                while True:
                    time.sleep(0.2)
                    i += 1
                    write([{"type": "newData", "source": source, "content": {"tick": i, "pid": os.getpid(), "tag": tag}}])

            for line in sys.stdin:
                if log:
                    with open(log, "a") as f:
                        f.write(line)
                message = json.loads(line)
                op = message.get("op")
                if op == "hello":
                    write([{"type": "hello", "protocol": 1, "kinds": [kind], "version": "0.0.1"}])
                elif op == "configure":
                    if message.get("options", {}).get("bad") is True:
                        write([{"type": "invalid", "source": message["source"],
                                "errors": [{"path": "/bad", "message": "bad must not be true"}]}])
                    else:
                        write([{"type": "configured", "source": message["source"]}])
                elif op == "load":
                    loads += 1
                    source, load_id = message["source"], message["id"]
                    answer = {"type": "newData", "source": source, "id": load_id,
                              "content": {"n": loads, "pid": os.getpid(), "tag": tag}}
                    if mode == "second-hello" and loads >= 2:
                        write([{"type": "hello", "protocol": 1, "kinds": [kind], "version": "0.0.1"}])
                    elif mode == "push-order":
                        answer["content"] = {"round": loads, "by": "answer"}
                        push = {"type": "newData", "source": source, "content": {"round": loads, "by": "push"}}
                        write([answer, push] if loads % 2 == 1 else [push, answer])
                    else:
                        write([answer])
                        if mode == "ticker" and source not in ticking:
                            ticking.add(source)
                            threading.Thread(target=tick, args=(source,), daemon=True).start()
                elif op == "shutdown":
                    break
            """#
    }

    /// A YAML double-quoted string holding `text`.
    static func yamlQuoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// Starts `hammock run CONFIGPATH` (a file the test rewrites), runs `body`, and stops hammock however `body`
    /// ends: before the test returns, not in a task that may outlive it.
    static func run<Result: Sendable>(
        configPath: String, environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation,
        _ body: (HammockProcess) async throws -> Result
    ) async throws -> Result {
        try await HammockProcess.withRunning(
            configPath: configPath, environment: environment, sourceLocation: sourceLocation, body)
    }

    /// Whether process `pid` still exists (a zombie counts as gone).
    static func processIsAlive(_ pid: Int32) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return false }
        return !status.contains("State:\tZ")
    }

    /// Polls `condition` until it holds or `timeout` passes; returns whether it held.
    static func eventually(within timeout: Duration, _ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// The text of `path`, or "" when it cannot be read (yet).
    static func fileText(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }
}

/// Small helpers over a stdout line, named apart from other files' so that none clashes.
extension HammockLine {
    var documentedContent: JSONValue? { self[pointer: "/state/content"] }
    var documentedErrorMessage: String { self[pointer: "/state/latestError/message"]?.stringValue ?? "" }
}
