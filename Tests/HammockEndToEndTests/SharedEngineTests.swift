import Foundation
import HammockJSON
import HammockSystem
import HammockTestSupport
import Testing

/// `hammock attach`, `ctl` and `get` against real `hammock serve` processes (issue 27). Each test has a
/// runtime folder of its own (`XDG_RUNTIME_DIR`, 0700), so its engines never meet another test's, and kills
/// every `serve` left in it at the end.
@Suite("The shared engine: attach, ctl, get")
struct SharedEngineTests {
    /// A fake source and a view over it, for the bar formats.
    static let config = """
        version: 1
        sources:
          greeting: { kind: fake, content: { text: "hello", count: 3 } }
        views:
          v:
            sources: [greeting]
            render: { text: "{{ greeting.text }} x{{ greeting.count }}" }
        """

    /// One REST source over the test's counting server: each load is one request, and its answer says which.
    static func counterConfig(port: Int) -> String {
        """
        version: 1
        sources:
          counter: { kind: rest, url: "http://127.0.0.1:\(port)/n", retry: off }
        """
    }

    @Test("two attaches of one configuration share one engine; a ctl load is one request, seen by both")
    func twoAttachesShareOneEngine() async throws {
        let server = try await CountingHTTPServer.start()
        defer { Task { await server.process.stop() } }
        try await SharedFixture.with(config: Self.counterConfig(port: server.port)) { fixture in
            let first = try fixture.attach()
            defer { Task { await first.stop() } }
            try await first.waitFor(type: "hello")
            try await first.next("counter") { $0.content == ["n": 1] }
            let second = try fixture.attach()
            defer { Task { await second.stop() } }
            try await second.waitFor(type: "hello")
            // The snapshot: the state the first consumer's load brought, without a load of its own.
            try await second.next("counter") { $0.content == ["n": 1] }
            #expect(fixture.serves.count == 1, "\(fixture.serves)")

            let ctl = try await fixture.run(["ctl", fixture.configPath, #"{"op":"load","source":"counter"}"#])
            #expect(ctl.termination == .exited(0), "\(ctl.stderr)")
            try await first.next("counter") { $0.content == ["n": 2] }
            try await second.next("counter") { $0.content == ["n": 2] }
            try await Task.sleep(for: .milliseconds(300))
            #expect(server.requests == 2, "one request per load, not one per consumer")
            #expect(fixture.serves.count == 1, "\(fixture.serves)")
        }
    }

    @Test("ten attaches started at once share one engine: one request per load, every consumer sees it")
    func tenAttachesShareOneEngine() async throws {
        let server = try await CountingHTTPServer.start()
        defer { Task { await server.process.stop() } }
        try await SharedFixture.with(config: Self.counterConfig(port: server.port)) { fixture in
            // All at once: nine of them race the first to start the engine, and find it.
            let consumers = try (0..<10).map { _ in try fixture.attach() }
            defer { for consumer in consumers { Task { await consumer.stop() } } }
            for consumer in consumers { try await consumer.next("counter") { $0.content == ["n": 1] } }
            // A serve that lost the race found the lock taken and exits 3; give it the time to.
            #expect(try await ProcessTable.eventually(within: .seconds(5)) { fixture.serves.count == 1 }, "\(fixture.serves)")
            #expect(fixture.engineLog.components(separatedBy: "notice: serving ").count == 2, "one engine served")
            #expect(server.requests == 1, "one engine asked once for ten consumers")

            let ctl = try await fixture.run(["ctl", fixture.configPath, #"{"op":"load","source":"counter"}"#])
            #expect(ctl.termination == .exited(0), "\(ctl.stderr)")
            for consumer in consumers { try await consumer.next("counter") { $0.content == ["n": 2] } }
            try await Task.sleep(for: .milliseconds(300))
            #expect(server.requests == 2, "one request per load, not one per consumer")
            #expect(fixture.serves.count == 1, "\(fixture.serves)")
        }
    }

    @Test("attach starts an engine when none runs; two racing attaches leave exactly one serve")
    func racingAttachesStartOneEngine() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            #expect(fixture.serves.isEmpty)
            let attaches = try (0..<2).map { _ in try fixture.attach() }
            defer { for attach in attaches { Task { await attach.stop() } } }
            for attach in attaches {
                try await attach.waitFor(type: "hello")
                try await attach.next("greeting") { $0.content?["text"] == "hello" }
            }
            // The loser's serve found the lock taken and exited 3; give it the time to.
            #expect(try await ProcessTable.eventually(within: .seconds(5)) { fixture.serves.count == 1 })
            try await Task.sleep(for: .milliseconds(500))
            #expect(fixture.serves.count == 1, "\(fixture.serves)")
            #expect(attaches.allSatisfy { $0.isRunning })
            // Each serve started logs beside the socket: one served, any other found the lock taken.
            let log = fixture.engineLog
            #expect(log.components(separatedBy: "notice: serving ").count == 2, "one engine served: \(log)")
        }
    }

    @Test("attach --no-start with no engine exits 2 and says how to start one")
    func noStartWithoutEngine() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let run = try await fixture.run(["attach", "--no-start", fixture.configPath])
            #expect(run.termination == .exited(2))
            #expect(run.stderr.contains("no engine serves \(fixture.configPath)"), "\(run.stderr)")
            #expect(run.stderr.contains("hammock serve"), "\(run.stderr)")
            #expect(fixture.serves.isEmpty)
        }
    }

    @Test("attach to the engine of another configuration exits 2 saying so")
    func otherConfiguration() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let socket = fixture.runtime + "/shared.sock"
            let first = try fixture.attach(["--socket", socket])
            defer { Task { await first.stop() } }
            try await first.waitFor(type: "hello")
            let other = try HammockProcess.writeConfig(Self.config, in: fixture.directory, name: "other.yaml")
            let run = try await fixture.run(["attach", "--socket", socket, other])
            #expect(run.termination == .exited(2))
            #expect(run.stderr.contains("serves \(fixture.canonicalConfig), not \(other)"), "\(run.stderr)")
        }
    }

    @Test("attach to an engine of another protocol exits 2 saying so")
    func otherProtocol() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            // A stand-in for an engine of a newer hammock: right configuration, protocol 99.
            let socket = fixture.runtime + "/newer.sock"
            let hello = #"{"type":"hello","seq":1,"protocol":99,"version":"9.0.0","configuration":"\#(fixture.canonicalConfig)","sources":[],"views":[]}"#
            let script = """
                import socket, sys
                server = socket.socket(socket.AF_UNIX)
                server.bind(sys.argv[1])
                server.listen()
                print("listening", flush=True)
                while True:
                    connection, _ = server.accept()
                    connection.sendall(sys.argv[2].encode() + b"\\n")
                """
            let engine = try HammockProcess.launch(program: "/usr/bin/python3", arguments: ["-c", script, socket, hello])
            defer { Task { await engine.stop() } }
            _ = try await engine.waitForStdoutLines("the stand-in listening") { $0.contains("listening") }
            let run = try await fixture.run(["attach", "--socket", socket, fixture.configPath])
            #expect(run.termination == .exited(2))
            #expect(run.stderr.contains("speaks protocol 99, this hammock protocol 1"), "\(run.stderr)")
        }
    }

    @Test("ctl exits 0 on the ack, 1 with the engine's message on an error, 2 for a line that is not JSON or no engine")
    func ctlAnswers() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let none = try await fixture.run(["ctl", fixture.configPath, #"{"op":"snapshot"}"#])
            #expect(none.termination == .exited(2))
            #expect(none.stderr.contains("no engine serves"), "\(none.stderr)")
            #expect(fixture.serves.isEmpty, "ctl never starts an engine")

            let attach = try fixture.attach()
            defer { Task { await attach.stop() } }
            try await attach.waitFor(type: "hello")
            let acked = try await fixture.run(["ctl", fixture.configPath, #"{"op":"load","source":"greeting"}"#])
            #expect(acked.termination == .exited(0), "\(acked.stderr)")
            let refused = try await fixture.run(["ctl", fixture.configPath, #"{"op":"load","source":"nope"}"#])
            #expect(refused.termination == .exited(1))
            #expect(refused.stderr.contains("nope"), "the engine's message: \(refused.stderr)")
            let garbage = try await fixture.run(["ctl", fixture.configPath, "load greeting"])
            #expect(garbage.termination == .exited(2))
            #expect(garbage.stderr.contains("JSON object"), "\(garbage.stderr)")
        }
    }

    @Test("get prints one line per id and exits; with a bar format, the rendered line")
    func getPrintsState() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            // The first get starts the engine; its state may still be loading then.
            let started = try await fixture.run(["get", "--idle-exit", "1m", fixture.configPath, "--source", "greeting"])
            #expect(started.termination == .exited(0), "\(started.stderr)")
            #expect(fixture.serves.count == 1)
            var loaded = false
            for _ in 0..<40 where !loaded {
                let run = try await fixture.run(["get", "--no-start", fixture.configPath, "--source", "greeting"])
                loaded = run.stdout.contains(#""text":"hello""#)
                if !loaded { try await Task.sleep(for: .milliseconds(250)) }
            }
            #expect(loaded, "the engine get started loads, and a later get prints it")
            let json = try await fixture.run(["get", "--no-start", fixture.configPath])
            #expect(json.termination == .exited(0), "\(json.stderr)")
            let lines = try json.stdout.split(separator: "\n").map { try JSONValue(parsing: Array($0.utf8)) }
            #expect(lines.map { "\($0["type"]?.stringValue ?? "")/\($0["id"]?.stringValue ?? "")" } == ["source/greeting", "view/v"], "\(json.stdout)")
            let text = try await fixture.run(["get", "--no-start", fixture.configPath, "--format", "text", "--view", "v"])
            #expect(text.termination == .exited(0), "\(text.stderr)")
            #expect(text.stdout == "hello x3\n")
        }
    }

    @Test("attach --format waybar --view V prints waybar lines rendered by the shared engine")
    func attachWaybar() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let bar = try fixture.attach(["--format", "waybar", "--view", "v"], json: false)
            defer { Task { await bar.stop() } }
            let lines = try await bar.waitForStdoutLines("a waybar line", timeout: .seconds(20)) { lines in
                lines.contains { $0.contains("hello x3") }
            }
            let line = try JSONValue(parsing: Array(lines.first { $0.contains("hello x3") }!.utf8))
            #expect(line["text"] == "hello x3", "\(lines)")
            let wrong = try await fixture.run(["attach", "--no-start", "--format", "waybar", fixture.configPath])
            #expect(wrong.termination == .exited(2))
            #expect(wrong.stderr.contains("exactly one --view"), "the selection is checked as `run` checks it: \(wrong.stderr)")
        }
    }

    @Test("attach copies stdin's control lines to the engine: the ack to the sender, the state to every attach")
    func attachControlLines() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let sender = try fixture.attach()
            defer { Task { await sender.stop() } }
            let other = try fixture.attach()
            defer { Task { await other.stop() } }
            try await sender.next("greeting") { $0.content?["text"] == "hello" }
            try await other.next("greeting") { $0.content?["text"] == "hello" }
            try sender.send(controlLine: #"{"op":"override","source":"greeting","content":{"text":"bye","count":0},"id":7}"#)
            try await sender.waitFor(type: "ack") { line in line["id"]?.numberValue?.intValue == 7 }
            try await sender.next("greeting") { $0.content?["text"] == "bye" }
            try await other.next("greeting") { $0.content?["text"] == "bye" }
            let otherAcks = other.lines.filter { $0.type == "ack" }
            #expect(otherAcks.isEmpty, "the ack is the sender's alone")
        }
    }

    @Test("SIGUSR2 to attach (a bar's click) goes on to the engine, which loads every source; attach runs on")
    func loadSignalGoesToTheEngine() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let attach = try fixture.attach()
            defer { Task { await attach.stop() } }
            let loaded = try await attach.next("greeting") { $0.event == "newData" }
            attach.signal(SIGUSR2)
            try await attach.next("greeting") { $0.event == "newData" && $0.seq ?? 0 > loaded.seq ?? 0 }
            #expect(attach.isRunning)
        }
    }

    /// What a bar keeps running is the C relay, not a Swift process (the shared engine's memory row in
    /// benchmarks/README.md): after its handshake, attach replaces itself with hammock-relay, and goes on
    /// copying both ways. Broken on purpose (the relay not exec'd), the first expectation fails.
    @Test("after its handshake attach goes on as hammock-relay, in JSON lines and in a bar format, and still copies both ways")
    func attachBecomesTheRelay() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let json = try fixture.attach()
            defer { Task { await json.stop() } }
            try await json.next("greeting") { $0.event == "newData" }
            let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(json.pid)/exe")
            #expect(exe.hasSuffix("/hammock-relay"), "\(exe)")
            try json.send(controlLine: #"{"op":"override","source":"greeting","content":{"text":"relayed","count":1},"id":"o"}"#)
            try await json.waitFor(type: "ack") { $0["id"] == "o" }

            let bar = try fixture.attach(["--format", "text", "--view", "v"], json: false)
            defer { Task { await bar.stop() } }
            try await bar.waitForStdoutLines("the overridden text") { $0.contains("relayed x1") }
            let barExe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(bar.pid)/exe")
            #expect(barExe.hasSuffix("/hammock-relay"), "\(barExe)")
        }
    }

    /// The relay reads stdin only once the engine has taken what it read before: a consumer that floods
    /// control lines is slowed (its writes block), and the relay holds at most one read's worth.
    @Test("a flood of 20 MiB of control lines into attach: the relay's memory stays flat, the engine answers the last one and serves others")
    func relayFloodIsBounded() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let attach = try fixture.attach()
            defer { Task { await attach.stop() } }
            try await attach.next("greeting") { $0.event == "newData" }
            let line = Array(#"{"op":"loadIfNeeded","source":"greeting"}"#.utf8) + [UInt8(ascii: "\n")]
            let chunk = Array([[UInt8]](repeating: line, count: 16_384).joined())
            // The writes block while the relay holds back: on a thread of their own, not on one of the
            // cooperative pool's.
            let taken = try await onOwnThread("the 20 MiB flood into attach's stdin", timeout: .seconds(60)) { () -> Bool in
                var sent = 0
                while sent < 20 << 20 {
                    guard attach.send(bytes: chunk) else { return false }
                    sent += chunk.count
                }
                return true
            }
            #expect(taken, "attach stopped taking its stdin")
            try attach.send(controlLine: #"{"op":"snapshot","id":"last"}"#)
            try await attach.waitFor(type: "ack", timeout: .seconds(60)) { $0["id"] == "last" }
            let status = try String(contentsOfFile: "/proc/\(attach.pid)/status", encoding: .utf8)
            let anonymous = status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") }
                .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") } ?? .max
            #expect(anonymous < 2048, "the relay's anonymous memory after the flood: \(anonymous) KiB")
            let other = try await fixture.run(["get", fixture.configPath, "--source", "greeting"])
            #expect(other.termination == .exited(0), "\(other.stderr)")
        }
    }

    /// A bar's stdout may be a pipe someone made non-blocking: a full pipe is waited for, not taken for a
    /// closed one. (Broken on purpose, EAGAIN taken as the end, the relay exits 0 with the line unwritten.)
    @Test("attach's stdout made non-blocking and left unread until full: the relay waits, then writes the whole line")
    func nonBlockingStdout() async throws {
        let big = String(repeating: "z", count: 300_000)
        try await SharedFixture.with(config: "version: 1\nsources:\n  big: { kind: fake, content: \"\(big)\" }\n") { fixture in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try HammockProcess.executablePath())
            process.arguments = ["attach", "--idle-exit", "1s", fixture.configPath]
            process.environment = HammockProcess.environment(fixture.environment, home: fixture.directory)
            var ends: [Int32] = [-1, -1]
            #expect(pipe(&ends) == 0)
            let (readEnd, writeEnd) = (ends[0], ends[1])
            _ = fcntl(writeEnd, F_SETFL, fcntl(writeEnd, F_GETFL) | O_NONBLOCK)
            process.standardOutput = FileHandle(fileDescriptor: writeEnd, closeOnDealloc: false)
            process.standardInput = Pipe()
            process.standardError = FileHandle.nullDevice
            try process.run()
            close(writeEnd)
            defer {
                if process.isRunning { process.terminate() }
                close(readEnd)
            }
            // The snapshot's 300 KB line does not fit the 64 KiB pipe: the relay meets EAGAIN.
            try await Task.sleep(for: .seconds(1))
            #expect(process.isRunning, "attach ended on a full non-blocking stdout")
            // Whole lines only, and a search for the 300 KB content itself would cost seconds a pass.
            @Sendable func hasTheWholeLine(_ read: [UInt8]) -> Bool {
                read.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).dropLast(read.last == UInt8(ascii: "\n") ? 0 : 1)
                    .contains { $0.count > big.utf8.count && String(decoding: $0.prefix(120), as: UTF8.self).contains(#""id":"big","event":"newData""#) }
            }
            // The reads wait in `poll`: on a thread of their own, not on one of the cooperative pool's.
            let read = await OwnThread.run(named: "test.blocking") { () -> [UInt8] in
                var read: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 1 << 16)
                let deadline = ContinuousClock.now + .seconds(20)
                while !hasTheWholeLine(read), ContinuousClock.now < deadline {
                    var ready = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
                    guard poll(&ready, 1, 100) > 0 else { continue }
                    let count = Glibc.read(readEnd, &chunk, chunk.count)
                    if count <= 0 { break }  // the end: attach is gone
                    read += chunk[..<count]
                }
                return read
            }
            #expect(hasTheWholeLine(read), "read \(read.count) bytes, ending \(String(decoding: read.suffix(200), as: UTF8.self).debugDescription)")
            #expect(process.isRunning, "attach runs on")
        }
    }

    @Test("attach --once with a bar format prints the bar's line once the views have settled")
    func attachOnceBar() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let run = try await fixture.run(["attach", "--idle-exit", "1s", "--once", "--format", "text", "--view", "v", fixture.configPath])
            #expect(run.termination == .exited(0), "\(run.stderr)")
            #expect(run.stdout == "hello x3\n")
        }
    }

    @Test("attach --once waits for the subscribed states, writes them and a bye, and exits 0")
    func attachOnce() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let run = try await fixture.run(["attach", "--idle-exit", "1s", "--once", fixture.configPath, "--source", "greeting"])
            #expect(run.termination == .exited(0), "\(run.stderr)")
            let lines = try run.stdout.split(separator: "\n").map { try JSONValue(parsing: Array($0.utf8)) }
            #expect(lines.first?["type"] == "hello")
            #expect(lines.last?["type"] == "bye" && lines.last?["reason"] == "once", "\(run.stdout)")
            #expect(lines.contains { $0["id"] == "greeting" && $0["state"]?["content"]?["text"] == "hello" }, "\(run.stdout)")
            #expect(!lines.contains { $0["type"] == "view" }, "only what was subscribed: \(run.stdout)")
        }
    }

    @Test("attach exits 0 when stdout closes, 0 after the engine's bye, 1 when the engine vanishes without one")
    func attachEnds() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let closing = try fixture.attach()
            try await closing.waitFor(type: "hello")
            await closing.closeStdout()
            #expect(try await closing.waitForExit(timeout: .seconds(5)) == .exited(0), "a closed stdout ends attach")
            await closing.stop()

            let told = try fixture.attach()
            try await told.waitFor(type: "hello")
            for serve in fixture.serves { kill(serve.pid, SIGTERM) }
            try await told.waitFor(type: "bye")
            #expect(try await told.waitForExit() == .exited(0))
            await told.stop()
            #expect(try await ProcessTable.eventually(within: .seconds(10)) { fixture.serves.isEmpty })

            let dropped = try fixture.attach()
            try await dropped.waitFor(type: "hello")
            for serve in fixture.serves { kill(serve.pid, SIGKILL) }
            #expect(try await dropped.waitForExit() == .exited(1), "the connection dropped without a bye")
            await dropped.stop()

            // The SIGKILLed engine left its socket behind: the next attach starts an engine that replaces it.
            let next = try fixture.attach()
            defer { Task { await next.stop() } }
            try await next.waitFor(type: "hello")
            try await next.next("greeting") { $0.content?["text"] == "hello" }
        }
    }

    @Test("the engine attach started exits after its idle time once the last attach leaves")
    func idleExit() async throws {
        try await SharedFixture.with(config: Self.config) { fixture in
            let attach = try fixture.attach(["--idle-exit", "1s"])
            try await attach.waitFor(type: "hello")
            try await Task.sleep(for: .seconds(2))
            #expect(fixture.serves.count == 1, "a client is connected: the engine stays")
            attach.signal(SIGTERM)
            #expect(try await attach.waitForExit() == .exited(0))
            await attach.stop()
            #expect(try await ProcessTable.eventually(within: .seconds(10)) { fixture.serves.isEmpty }, "the idle engine exits")
        }
    }
}

/// A test's runtime folder, configuration and the engines started in it.
struct SharedFixture: Sendable {
    /// The test's folder (removed at the end).
    let directory: String
    /// `XDG_RUNTIME_DIR` for every process of the test: 0700, under `directory`.
    let runtime: String
    let configPath: String

    var environment: [String: String] { ["XDG_RUNTIME_DIR": runtime] }

    var canonicalConfig: String { URL(fileURLWithPath: configPath).resolvingSymlinksInPath().path }

    /// The log of the engines attach started at the configuration's default socket (`SOCKET.log`, under
    /// the runtime folder's `hammock/`), or "" when there is none.
    var engineLog: String {
        let folder = runtime + "/hammock"
        guard let name = (try? FileManager.default.contentsOfDirectory(atPath: folder))?.first(where: { $0.hasSuffix(".sock.log") })
        else { return "" }
        return (try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)) ?? ""
    }

    /// The `hammock serve` processes of this test (their `--socket` is under `runtime`), alive.
    var serves: [ProcessEntry] {
        ProcessTable.all().filter { entry in
            let arguments = entry.arguments
            return entry.state != "Z" && arguments.dropFirst().first == "serve" && arguments.contains { $0.hasPrefix(runtime) }
        }
    }

    static func with(config: String, _ body: (SharedFixture) async throws -> Void) async throws {
        try await RunSlots.withSlot {
            let directory = try HammockProcess.makeTemporaryDirectory()
            let runtime = directory + "/run"
            try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            let fixture = SharedFixture(
                directory: directory, runtime: runtime,
                configPath: try HammockProcess.writeConfig(config, in: directory))
            defer {
                for serve in fixture.serves { kill(serve.pid, SIGKILL) }
                HammockProcess.removeTemporaryDirectory(directory)
            }
            try await body(fixture)
        }
    }

    /// `hammock attach ARGUMENTS... CONFIG` (an engine it starts exits 1 s after its last client), running;
    /// its stdout read as JSON lines unless `json` is false.
    func attach(_ arguments: [String] = [], json: Bool = true) throws -> HammockProcess {
        let command = ["attach", "--idle-exit", "1s"] + arguments + [configPath]
        return json
            ? try HammockProcess.launch(product: "hammock", arguments: command, environment: environment)
            : try HammockProcess.launch(program: try HammockProcess.executablePath(), arguments: command, environment: environment)
    }

    /// `hammock ARGUMENTS...` to its end.
    func run(_ arguments: [String]) async throws -> CompletedRun {
        try await HammockProcess.execute(arguments, environment: environment, timeout: .seconds(30))
    }
}

/// An HTTP server on 127.0.0.1 that answers every GET with `{"n": N}`, N counting the requests: Python's
/// standard library, in a process of its own.
struct CountingHTTPServer: Sendable {
    let process: HammockProcess
    let port: Int

    var requests: Int { process.stdoutLines.filter { $0.hasPrefix("request") }.count }

    static let script = """
        import http.server, sys
        count = 0
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                global count
                count += 1
                body = ('{"n":%d}' % count).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                print("request", count, flush=True)
            def log_message(self, *arguments):
                pass
        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        print("port", server.server_port, flush=True)
        server.serve_forever()
        """

    static func start() async throws -> CountingHTTPServer {
        let process = try HammockProcess.launch(program: "/usr/bin/python3", arguments: ["-c", script])
        // A task's sleep between looks, not `usleep`: python3 takes a while to start, and the wait must not
        // hold one of the cooperative pool's threads.
        // Looked for once more after the deadline: a sleep may end long after it when the pool is busy.
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            if let line = process.stdoutLines.first(where: { $0.hasPrefix("port ") }), let port = Int(line.dropFirst(5)) {
                return CountingHTTPServer(process: process, port: port)
            }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        await process.stop()
        throw HammockHarnessError(message: "the test HTTP server said no port: \(process.stderrText)", sourceLocation: #_sourceLocation)
    }
}
