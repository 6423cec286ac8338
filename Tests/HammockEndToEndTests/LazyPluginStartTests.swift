import Foundation
import HammockJSON
import HammockTestSupport
import Testing

/// Under `hammock serve`, a plugin starts when a client first watches a source of its kind (issue 30: "a
/// rest source that is not used starts no rest plugin"). The real engine, its real plugins and a real HTTP
/// server on 127.0.0.1; the plugins are found in the process table below the engine.
@Suite("a kind's plugin starts at its first watcher (serve, and run with a bar format)")
struct LazyPluginStartTests {
    /// The plugin executables running below `engine` (by argv, as the guard runs them).
    static func plugins(of engine: ServeEngine) -> Set<String> { plugins(below: engine.pid) }

    /// The plugins (`rest` for `hammock-plugin-rest`) running below the process `root`.
    static func plugins(below root: Int32) -> Set<String> {
        var names: Set<String> = []
        for process in ProcessTable.descendants(of: root) {
            for argument in process.arguments {
                let name = argument.split(separator: "/").last.map(String.init) ?? argument
                if name.hasPrefix("hammock-plugin-") { names.insert(String(name.dropFirst("hammock-plugin-".count))) }
            }
        }
        return names
    }

    @Test("no plugin for a kind nobody watches: the shell plugin starts with its watcher, the rest plugin with its own")
    func aKindNobodyWatchesStartsNoPlugin() async throws {
        let server = try await CountingHTTPServer.start()
        defer { Task { await server.process.stop() } }
        let config = """
            version: 1
            sources:
              api: { kind: rest, url: "http://127.0.0.1:\(server.port)/n", refresh: 200ms }
              load: { kind: shell, command: [echo, '{"x": 1}'], parse: json, refresh: 200ms }
              kept: { kind: fake, content: 1, keep: true }
            """
        try await ServeEngine.with(config) { engine in
            // Served, and the kept fake source loaded (inside hammock): still no plugin process.
            try await Task.sleep(for: .milliseconds(500))
            #expect(Self.plugins(of: engine).isEmpty, "\(ProcessTable.descendants(of: engine.pid))")

            let shell = try engine.client(#"{"op":"subscribe","id":"s","sources":["load"]}"#, name: "shell")
            try await shell.next(type: "source", id: "load") { $0[pointer: "/state/content/x"] == 1 }
            // Several polls of the shell source later, still no rest plugin and no request.
            try await Task.sleep(for: .milliseconds(600))
            #expect(Self.plugins(of: engine) == ["shell"], "\(ProcessTable.descendants(of: engine.pid))")
            #expect(server.requests == 0)

            let rest = try engine.client(#"{"op":"subscribe","id":"r","sources":["api"]}"#, name: "rest")
            try await rest.next(type: "source", id: "api") { $0[pointer: "/state/content/n"] != nil }
            #expect(Self.plugins(of: engine) == ["shell", "rest"], "\(ProcessTable.descendants(of: engine.pid))")
            #expect(server.requests >= 1)
        }
    }

    @Test("a templated source watched later starts its plugin and loads, with no error on the way")
    func aTemplatedSourceStartsItsPluginWithoutAnError() async throws {
        let server = try await CountingHTTPServer.start()
        defer { Task { await server.process.stop() } }
        let config = """
            version: 1
            sources:
              path: { kind: shell, command: [echo, '{"name": "n"}'], parse: json }
              api: { kind: rest, url: "http://127.0.0.1:\(server.port)/{{ path.name }}" }
            """
        try await ServeEngine.with(config) { engine in
            #expect(Self.plugins(of: engine).isEmpty, "\(ProcessTable.descendants(of: engine.pid))")
            let client = try engine.client(#"{"op":"subscribe","id":"a","sources":["api"]}"#)
            let loaded = try await client.next(type: "source", id: "api") { $0[pointer: "/state/content/n"] != nil }
            let states = client.lines.filter { $0.type == "source" && $0.id == "api" }
            let errors = states.filter { $0[pointer: "/state/latestError"] != .null }
            #expect(errors.isEmpty, "\(errors)")
            #expect(loaded[pointer: "/state/latestError"] == .null)
            #expect(Self.plugins(of: engine) == ["shell", "rest"])
        }
    }

    @Test("a bad option of a kind nobody watched is the source's error and a log line at its place, once watched")
    func aBadOptionFoundLateIsReportedAtItsPlace() async throws {
        let config = """
            version: 1
            sources:
              ok: { kind: fake, content: 1 }
              api:
                kind: rest
                url: "http://127.0.0.1:9/x"
                method: FETCH
            """
        try await ServeEngine.with(config) { engine in
            #expect(Self.plugins(of: engine).isEmpty)
            let client = try engine.client(#"{"op":"subscribe","id":"a","sources":["api"]}"#)
            let failed = try await client.next(type: "source", id: "api") { $0[pointer: "/state/latestError"] != .null }
            #expect(failed[pointer: "/state/latestError/code"] == "invalidOptions", "\(failed)")
            let log = try await eventually(within: .seconds(5)) { engine.process.stderrText.contains("method") }
            #expect(log, "\(engine.process.stderrText)")
            #expect(engine.process.stderrText.contains(":7:5: source \"api\""), "\(engine.process.stderrText)")
        }
    }

    @Test("a newcomer's snapshot shows the load its watching starts (a view loading, not idle), and nothing twice")
    func theSnapshotShowsWhatTheJoinStarts() async throws {
        let config = """
            version: 1
            sources:
              slow: { kind: shell, command: [sh, -c, "sleep 0.5; echo done"] }
            views:
              v: { sources: [slow] }
            """
        try await ServeEngine.with(config) { engine in
            let client = try engine.client(#"{"op":"subscribe","id":"s","views":["v"],"sources":["slow"]}"#)
            try await client.next(type: "view", id: "v") { $0["status"] == "data" }
            // Up to the ack, the snapshot: the source loading and its view too (`attach --once` took an idle
            // view there for settled, and printed an empty bar); after it nothing is said twice.
            let said = client.lines.map { "\($0.type ?? "")/\($0["event"]?.stringValue ?? $0["status"]?.stringValue ?? "")" }
            #expect(said == ["hello/", "source/requested", "view/loading", "ack/", "source/newData", "view/data"], "\(said)")
        }
    }

    @Test("run with a bar format loads its views' sources only: a rest source no view shows starts no rest plugin")
    func aBarLoadsItsViewsSourcesOnly() async throws {
        let server = try await CountingHTTPServer.start()
        defer { Task { await server.process.stop() } }
        let config = """
            version: 1
            sources:
              api: { kind: rest, url: "http://127.0.0.1:\(server.port)/n", refresh: 200ms }
              load: { kind: shell, command: [echo, up], refresh: 200ms }
            views:
              bar: { sources: [load], render: { text: "{{ load }}" } }
            """
        try await HammockProcess.withRunning(
            config: config, arguments: ["--format", "text", "--view", "bar"], stdoutIsJSON: false
        ) { hammock in
            let shown = try await ProcessTable.eventually(within: .seconds(10)) { hammock.stdoutLines.contains("up") }
            #expect(shown, "\(hammock.stdoutLines)")
            try await Task.sleep(for: .milliseconds(600))
            #expect(Self.plugins(below: hammock.pid) == ["shell"], "\(ProcessTable.descendants(of: hammock.pid))")
            #expect(server.requests == 0)
        }
    }

    /// Polls `condition` until it holds or `timeout` passes.
    private func eventually(within timeout: Duration, _ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }
}
