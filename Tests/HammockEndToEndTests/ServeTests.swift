import Foundation
import HammockJSON
import HammockSystem
import HammockTestSupport
import Testing

/// `hammock serve` under attack: real engines on real sockets, clients that misbehave on purpose (garbage,
/// half lines, a 100 MiB line, floods, thousands of connections, clients that never read, another user),
/// and the engine's own life (SIGKILL's stale socket, a second serve, SIGTERM, idle exit, SIGHUP, socket
/// activation). Each attack is measured by a well-behaved client beside it: it must go on getting its lines
/// promptly, and the engine must go on running.
@Suite("hammock serve under attack", .serialized)
struct ServeTests {
    static let twoSources = """
        sources:
          a: { kind: fake, content: 1 }
          b: { kind: fake, content: 2 }
        """

    /// Sets `a` to `value` through `watcher`'s own connection and returns how long the change took to come
    /// back to it: the engine's loop and its writer to this client are both alive.
    @discardableResult
    static func roundTrip(
        _ watcher: SocketClient, value: Int, source: String = "a", within: Duration = .seconds(3),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Duration {
        let sent = ContinuousClock.now
        #expect(watcher.send(overrideLine(source, "\(value)")), "the watcher could not send", sourceLocation: sourceLocation)
        let line = try await watcher.next(
            type: "source", id: source, timeout: within, sourceLocation: sourceLocation
        ) { $0[pointer: "/state/content"]?.numberValue?.intValue == value }
        return line.receivedAt - sent
    }

    /// A watcher subscribed to everything, past its hello and snapshot, and past the loads its subscription
    /// started: an override sent while a load is in flight is replaced by the load's answer when it comes
    /// (rightly: it is newer), and with the clients' 25 ms write interval the override's own line may never
    /// be written. (Seen once in CI: "SIGKILL leaves a stale socket…" waited 3 s for an override of `a`.)
    static func watcher(_ engine: ServeEngine, name: String = "watcher") async throws -> SocketClient {
        let watcher = try engine.client(#"{"op":"subscribe","id":"w"}"#, name: name)
        let hello = try await watcher.next(type: "hello")
        try await watcher.next(type: "ack") { $0.id == "w" }
        try await waitForLoads(watcher, hello: hello, name: name)
        return watcher
    }

    /// Waits until `watcher` has read every source of its `hello` loaded: the loads its subscription started
    /// are over, and no answer of theirs can replace what the test sets next.
    static func waitForLoads(_ watcher: SocketClient, hello: ClientLine, name: String) async throws {
        let sources = hello["sources"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let deadline = ContinuousClock.now + .seconds(8)
        while !sources.allSatisfy({ id in
            watcher.lines.last { $0.type == "source" && $0.id == id }
                .map { $0[pointer: "/state/content"] != .null && $0[pointer: "/state/isLoading"] == false } ?? false
        }) {
            guard ContinuousClock.now < deadline else {
                throw HammockHarnessError(message: "\(name): the sources did not load: \(watcher.lines.suffix(10))", sourceLocation: #_sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    // MARK: - Bad input from one client

    @Test("garbage gets its sender an error; another client goes on, promptly")
    func garbage() async throws {
        try await ServeEngine.with(Self.twoSources) { engine in
            let watcher = try await Self.watcher(engine)
            let attacker = try engine.client(name: "attacker")
            try await attacker.next(type: "hello")
            attacker.send("\u{0}\u{1}garbage{{{ not json at all")
            RawSocket.send([0xff, 0xfe, 0x80, 0x0a], to: attacker.descriptor)  // not UTF-8
            attacker.send(#"{"op":"explode","id":"g5"}"#)
            try await attacker.next(type: "error")
            try await attacker.next(type: "error") { $0.id == "g5" }
            for value in 10..<20 {
                let took = try await Self.roundTrip(watcher, value: value)
                #expect(took < .seconds(1), "the watcher waited \(took)")
            }
            #expect(!watcher.lines.contains { $0.type == "error" }, "the attacker's errors reached the watcher")
            #expect(engine.process.isRunning)
        }
    }

    @Test("half lines then a close, and connections that say half a subscribe line, stall nothing")
    func halfLines() async throws {
        try await ServeEngine.with(Self.twoSources) { engine in
            let watcher = try await Self.watcher(engine)
            let socket = engine.socketPath
            // Half a control line, then gone: it must not be carried out.
            for _ in 0..<20 {
                guard case .success(let descriptor) = RawSocket.connect(socket) else { Issue.record("connect failed"); return }
                RawSocket.send(Array(#"{"op":"subscribe","sources":["a"]}"#.utf8) + [0x0a], to: descriptor)
                RawSocket.send(Array(#"{"op":"override","source":"a","content":666"#.utf8), to: descriptor)
                close(descriptor)
            }
            // Sixty connections that each send half a subscribe line and hold it: the engine waits for their
            // first lines on threads of its own, never on the pool its loop runs on.
            let holders: [Int32] = (0..<60).compactMap { _ in
                guard case .success(let descriptor) = RawSocket.connect(socket) else { return nil }
                RawSocket.send(Array(#"{"op":"subscribe","sour"#.utf8), to: descriptor)
                return descriptor
            }
            #expect(holders.count == 60)
            var slowest = Duration.zero
            for value in 100..<120 {
                slowest = max(slowest, try await Self.roundTrip(watcher, value: value))
            }
            print("half lines: slowest round trip \(slowest) with 60 half-subscribed connections")
            #expect(slowest < .milliseconds(1500), "the watcher waited \(slowest) while connections held half lines")
            holders.forEach { close($0) }
            #expect(!watcher.lines.contains { $0[pointer: "/state/content"]?.numberValue?.intValue == 666 })
            try await Self.roundTrip(watcher, value: 7)
            #expect(engine.process.isRunning)
        }
    }

    @Test("a 100 MiB line without a newline: its sender is told or dropped, memory stays flat, others go on")
    func hugeLine() async throws {
        try await ServeEngine.with(Self.twoSources) { engine in
            let watcher = try await Self.watcher(engine)
            let attacker = try engine.client(#"{"op":"subscribe","sources":["b"]}"#, name: "attacker")
            try await attacker.next(type: "hello")
            let before = engine.process.residentKiB() ?? 0
            let descriptor = attacker.descriptor
            let flood = Task {
                await OwnThread.run(named: "test.blocking") { () -> Int in
                    let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
                    // No newline ever: the engine must not wait for one.
                    for sent in 0..<100 where !RawSocket.send(chunk, to: descriptor) { return sent }
                    return 100
                }
            }
            var slowest = Duration.zero
            var peak = before
            for value in 200..<220 {
                slowest = max(slowest, try await Self.roundTrip(watcher, value: value))
                peak = max(peak, engine.process.residentKiB() ?? 0)
            }
            let sentMiB = await flood.value
            peak = max(peak, engine.process.residentKiB() ?? 0)
            print("100 MiB line: \(sentMiB) MiB sent; engine RSS \(before) KiB before, \(peak) KiB at most; slowest round trip \(slowest)")
            #expect(slowest < .seconds(1))
            #expect(peak - before < 32 * 1024, "the engine grew by \((peak - before) / 1024) MiB")
            // Told (an error line about the line's length), then dropped (the connection ends), with no newline.
            try await attacker.next(type: "error", timeout: .seconds(5)) { $0.text.contains("longer") }
            #expect(await attacker.waitForEnd(timeout: .seconds(5)), "the attacker was not dropped")
            try await engine.process.waitForStderr(containing: "dropped client")
            try await Self.roundTrip(watcher, value: 1)
            #expect(engine.process.isRunning)
        }
    }

    @Test("a flood of control lines from one client: it gets its errors, the others their lines")
    func controlFlood() async throws {
        try await ServeEngine.with(Self.twoSources) { engine in
            let watcher = try await Self.watcher(engine)
            let attacker = try engine.client(#"{"op":"subscribe","sources":["b"]}"#, name: "attacker")
            try await attacker.next(type: "hello")
            let descriptor = attacker.descriptor
            // Overrides of b (coalesced while they wait), and bad ops with an id each (answered one by one).
            let flood = Task {
                await OwnThread.run(named: "test.blocking") { () -> Bool in
                    var batch: [UInt8] = []
                    for number in 0..<100_000 {
                        let line = number % 2 == 0 ? overrideLine("b", "\(number)") : #"{"op":"nope","id":"n\#(number)"}"#
                        batch += Array((line + "\n").utf8)
                        if batch.count > 1 << 16 {
                            guard RawSocket.send(batch, to: descriptor) else { return false }
                            batch.removeAll(keepingCapacity: true)
                        }
                    }
                    return RawSocket.send(batch, to: descriptor)
                }
            }
            var slowest = Duration.zero
            for value in 300..<330 {
                slowest = max(slowest, try await Self.roundTrip(watcher, value: value))
            }
            _ = await flood.value
            print("control flood: slowest round trip \(slowest)")
            #expect(slowest < .seconds(1), "the watcher waited \(slowest) during the flood")
            try await attacker.next(type: "error", timeout: .seconds(10)) { $0.id != nil && $0.text.contains("nope") }
            #expect(engine.process.isRunning)
        }
    }

    // MARK: - Many connections

    @Test("--max-clients 50: the 51st (and a thousand more) are told and closed; once clients leave, new ones are served")
    func maximumClients() async throws {
        try await ServeEngine.with(Self.twoSources, arguments: ["--max-clients", "50"]) { engine in
            // The connection that found the engine serving (`waitUntilServing`) is counted until the engine
            // has seen it go, and the engine may still be opening its own descriptors (CI saw 11, then 16):
            // wait until its descriptors have held still for 300 ms before taking the 50 places.
            try await engine.waitForSteadyDescriptors()
            var held: [SocketClient] = []
            for number in 0..<50 {
                let client = try engine.client(#"{"op":"subscribe","sources":["a"]}"#, name: "held-\(number)")
                held.append(client)
            }
            for client in held { try await client.next(type: "hello") }
            let socket = engine.socketPath
            let refusals = await OwnThread.run(named: "test.blocking") { () -> [String] in
                var problems: [String] = []
                for _ in 0..<1000 {
                    guard case .success(let descriptor) = RawSocket.connect(socket) else {
                        problems.append("connect failed")
                        continue
                    }
                    defer { close(descriptor) }
                    let line = RawSocket.readLine(descriptor, timeout: .seconds(5)) ?? "(nothing)"
                    if !(line.contains(#""type":"error""#) && line.contains("50") && line.contains("--max-clients")) {
                        problems.append(line)
                    } else if !RawSocket.waitForEnd(descriptor, timeout: .seconds(5)) {
                        problems.append("not closed after: \(line)")
                    }
                }
                return problems
            }
            #expect(refusals.isEmpty, "\(refusals.count) of 1000 were not refused well: \(refusals.prefix(3))")
            let descriptors = engine.openDescriptors
            print("max clients: engine has \(descriptors) descriptors open with 50 clients after 1000 refusals")
            for client in held.prefix(10) { await client.closeAndWait() }
            // The leaving clients are counted out once their connections are over.
            var served: SocketClient?
            let deadline = ContinuousClock.now + .seconds(10)
            while served == nil && ContinuousClock.now < deadline {
                let candidate = try engine.client(#"{"op":"subscribe","sources":["a"]}"#, name: "newcomer")
                if let first = try? await candidate.next("a first line", timeout: .seconds(3), where: { _ in true }),
                    first.type == "hello"
                {
                    served = candidate
                } else {
                    await candidate.closeAndWait()
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            let newcomer = try #require(served, "no new client was served after 10 left")
            try await newcomer.next(type: "source", id: "a")
            for client in held.dropFirst(10) { #expect(!client.hasEnded) }
            #expect(engine.process.isRunning)
        }
    }

    /// One thread writes to every client (`SocketWriter`); each client's own is its reader. With a writer
    /// thread and a hang-up watch per client, as before, 60 clients took 180 threads and this failed.
    @Test("60 clients cost the engine one thread each (their reader), and no more once they leave")
    func threadsPerClient() async throws {
        try await ServeEngine.with(Self.twoSources) { engine in
            try await engine.waitForSteadyDescriptors()
            let idle = engine.threadCount
            var clients: [SocketClient] = []
            for number in 0..<60 {
                clients.append(try engine.client(#"{"op":"subscribe","sources":["a"]}"#, name: "c\(number)"))
            }
            for client in clients { try await client.next(type: "source", id: "a") }
            try await engine.waitForSteadyDescriptors()
            let busy = engine.threadCount
            print("threads per client: \(idle) idle, \(busy) with 60 clients")
            #expect(busy - idle <= 60 + 4, "\(busy - idle) more threads for 60 clients")
            for client in clients { await client.closeAndWait() }
            try await engine.waitForSteadyDescriptors()
            let deadline = ContinuousClock.now + .seconds(10)
            while engine.threadCount > idle + 2 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(engine.threadCount <= idle + 2, "\(engine.threadCount) threads after the clients left, \(idle) before")
        }
    }

    @Test("10,000 connect/disconnect cycles leak no descriptor and no memory")
    func connectCycles() async throws {
        let big = String(repeating: "z", count: 400_000)
        let config = """
            sources:
              a: { kind: fake, content: 1 }
              big: { kind: fake, content: "\(big)" }
            """
        try await ServeEngine.with(config, arguments: ["--max-clients", "1000", "--client-timeout", "5s"]) { engine in
            let socket = engine.socketPath
            let pid = engine.pid
            @Sendable func descriptors() -> Int {
                (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
            }
            // Once the connection that found it serving (`waitUntilServing`) is gone, and the engine has
            // opened what it opens as it starts.
            try await engine.waitForSteadyDescriptors()
            let baseline = descriptors()
            /// Runs cycles `range` on a thread; keeps up to 20 clients that asked for `big` and read nothing
            /// open at once (their writers blocked on a full socket), closing the oldest as new ones come.
            func cycles(_ range: Range<Int>) async -> [String] {
                await OwnThread.run(named: "test.blocking") { () -> [String] in
                    var problems: [String] = []
                    var stalled: [Int32] = []
                    for cycle in range {
                        if cycle % 200 == 0 {
                            // Pace: let the engine catch up (20 stalled clients hold 5 descriptors each).
                            let deadline = ContinuousClock.now + .seconds(10)
                            while descriptors() > baseline + 200 && ContinuousClock.now < deadline { usleep(2_000) }
                            if descriptors() > baseline + 200 {
                                problems.append("cycle \(cycle): the engine still holds \(descriptors()) descriptors (\(baseline) at the start)")
                                break
                            }
                        }
                        guard case .success(let descriptor) = RawSocket.connect(socket) else {
                            problems.append("cycle \(cycle): connect failed")
                            continue
                        }
                        switch cycle % 10 {
                        case 0 where cycle % 50 == 0:
                            break  // gone at once, before any first line: reads everything
                        case 0, 1, 2:
                            RawSocket.send(Array(#"{"op":"subscribe","sources":["a"]}"#.utf8) + [0x0a], to: descriptor)
                        case 3, 4:
                            // Killed mid-line: half a subscribe line, then gone.
                            RawSocket.send(Array(#"{"op":"subscribe","sources":["#.utf8), to: descriptor)
                        case 5, 6:
                            let lines = #"{"op":"subscribe","sources":["a"],"id":1}"# + "\n" + #"{"op":"snapshot","id":2}"# + "\n"
                            RawSocket.send(Array(lines.utf8), to: descriptor)
                        case 7:
                            // A full queue that is never read.
                            RawSocket.send(Array(#"{"op":"subscribe","sources":["big","a"]}"#.utf8) + [0x0a], to: descriptor)
                            stalled.append(descriptor)
                            if stalled.count > 20 { close(stalled.removeFirst()) }
                            continue
                        case 8:
                            // Reads its hello, then goes in the middle of the big line.
                            RawSocket.send(Array(#"{"op":"subscribe","sources":["big"]}"#.utf8) + [0x0a], to: descriptor)
                            if RawSocket.readLine(descriptor, timeout: .seconds(5)) == nil { problems.append("cycle \(cycle): no hello") }
                            var some = [UInt8](repeating: 0, count: 1000)
                            _ = recv(descriptor, &some, some.count, 0)
                        default:
                            RawSocket.send(Array("garbage\n".utf8), to: descriptor)
                        }
                        close(descriptor)
                    }
                    stalled.forEach { close($0) }
                    return problems
                }
            }
            /// Waits until the engine is back to its idle descriptors, then samples them and its memory.
            func settle(_ label: String) async -> (descriptors: Int, residentKiB: Int) {
                let deadline = ContinuousClock.now + .seconds(15)
                while descriptors() > baseline && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
                try? await Task.sleep(for: .milliseconds(500))
                let sample = (descriptors(), engine.process.residentKiB() ?? 0)
                print("connect cycles: after \(label): \(sample.0) descriptors (\(baseline) at the start), RSS \(sample.1) KiB")
                return sample
            }
            let started = ContinuousClock.now
            var problems = await cycles(0..<1000)
            let first = await settle("1,000 cycles")
            problems += await cycles(1000..<10_000)
            let last = await settle("10,000 cycles")
            print("connect cycles: 10,000 cycles took \(ContinuousClock.now - started)")
            #expect(problems.isEmpty, "\(problems.count) problems: \(problems.prefix(5))")
            #expect(first.descriptors <= baseline && last.descriptors <= first.descriptors)
            // Flat: what 9,000 more connections left behind. With glibc's mmap threshold left to rise
            // (`ProcessMemory.returnLargeBlocks` not called), the stalled clients' 400 KB lines came from the
            // heap and stayed: 3 to 11 MiB more here; with it, flat within 0.3 MiB.
            #expect(last.residentKiB - first.residentKiB < 2 * 1024, "RSS grew from \(first.residentKiB) to \(last.residentKiB) KiB")
            let watcher = try await Self.watcher(engine)
            try await Self.roundTrip(watcher, value: 3)
        }
    }

    // MARK: - A client that reads nothing

    @Test("a client that reads nothing slows no other, does not grow the engine, and is dropped after --client-timeout")
    func stalledClient() async throws {
        try await ServeEngine.with(Self.twoSources, arguments: ["--client-timeout", "2s"]) { engine in
            let socket = engine.socketPath
            guard case .success(let stalled) = RawSocket.connect(socket) else { Issue.record("connect failed"); return }
            defer { close(stalled) }
            RawSocket.send(Array(#"{"op":"subscribe"}"#.utf8) + [0x0a], to: stalled)
            let watcher = try await Self.watcher(engine)
            let padding = String(repeating: "p", count: 16_000)
            let before = engine.process.residentKiB() ?? 0
            var peak = before
            var slowest = Duration.zero
            var changes = 0
            let started = ContinuousClock.now
            // Fast changes, each 16 kB: the stalled client's socket is full after a dozen.
            while ContinuousClock.now - started < .seconds(4) {
                changes += 1
                let sent = ContinuousClock.now
                watcher.send(overrideLine("a", #"{"n":\#(changes),"p":"\#(padding)"}"#))
                let line = try await watcher.next(type: "source", id: "a", timeout: .seconds(3)) {
                    $0[pointer: "/state/content/n"]?.numberValue?.intValue == changes
                }
                slowest = max(slowest, line.receivedAt - sent)
                peak = max(peak, engine.process.residentKiB() ?? 0)
            }
            print("stalled client: \(changes) changes in 4 s, slowest \(slowest); engine RSS \(before) KiB, at most \(peak) KiB")
            #expect(slowest < .milliseconds(750), "the watcher waited \(slowest) for a change")
            #expect(peak - before < 16 * 1024, "the engine grew by \((peak - before) / 1024) MiB")
            // Dropped: the connection ends (what the socket held is read first), and the engine says so.
            let ended = await OwnThread.run(named: "test.blocking") { RawSocket.waitForEnd(stalled, timeout: .seconds(5)) }
            #expect(ended, "the stalled client was not dropped")
            #expect(
                engine.process.stderrText.contains("read nothing") && engine.process.stderrText.contains("--client-timeout"),
                "the engine did not log the drop: \(engine.process.stderrText)")
            try await Self.roundTrip(watcher, value: 9)
        }
    }

    @Test("a SIGSTOPped client slows no other")
    func stoppedProcessClient() async throws {
        try await ServeEngine.with(Self.twoSources, arguments: ["--client-timeout", "2s"]) { engine in
            let script = """
                import socket, sys
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                s.sendall(b'{"op":"subscribe"}\\n'); print("connected", flush=True)
                while True: s.recv(1); __import__("time").sleep(3600)
                """
            let python = try HammockProcess.launch(program: "/usr/bin/python3", arguments: ["-c", script, engine.socketPath])
            defer { kill(python.pid, SIGKILL) }
            try await python.waitForStdoutLines("connected") { $0.contains("connected") }
            python.signal(SIGSTOP)
            let watcher = try await Self.watcher(engine)
            let padding = String(repeating: "q", count: 16_000)
            var slowest = Duration.zero
            for value in 0..<150 {
                let sent = ContinuousClock.now
                watcher.send(overrideLine("a", #"{"n":\#(value),"p":"\#(padding)"}"#))
                let line = try await watcher.next(type: "source", id: "a", timeout: .seconds(3)) {
                    $0[pointer: "/state/content/n"]?.numberValue?.intValue == value
                }
                slowest = max(slowest, line.receivedAt - sent)
            }
            print("SIGSTOPped client: slowest \(slowest)")
            #expect(slowest < .milliseconds(750))
            python.signal(SIGCONT)
            await python.stop()
        }
    }

    // MARK: - Another user

    /// Runs python3 as `nobody` (setpriv): connects to `path` and prints the first line it reads, or the
    /// error of the connect.
    static func connectAsNobody(_ path: String) async throws -> CompletedRun {
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(sys.argv[1])
            except OSError as e:
                print("refused:", e.errno, e.strerror); sys.exit(1)
            s.settimeout(5); data = b""
            while not data.endswith(b"\\n"):
                chunk = s.recv(4096)
                if not chunk: break
                data += chunk
            print("read:", data.decode().strip()); rest = s.recv(4096)
            print("then:", "closed" if not rest else rest.decode().strip())
            """
        return try await BoundedRun.run(
            "/usr/bin/setpriv",
            ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", script, path],
            environment: ["PATH": "/usr/bin:/bin"], timeout: .seconds(20))
    }

    @Test("another user cannot reach the default socket: folder 0700, socket 0600", .enabled(if: geteuid() == 0, "needs root to run a client as nobody (setpriv)"))
    func otherUserCannotConnect() async throws {
        try await ServeEngine.with(Self.twoSources, defaultSocket: true) { engine in
            let path = engine.socketPath
            var status = stat()
            #expect(stat(path, &status) == 0 && status.st_mode & 0o777 == 0o600, "socket mode \(String(status.st_mode & 0o777, radix: 8))")
            #expect(stat(engine.runtime + "/hammock", &status) == 0 && status.st_mode & 0o777 == 0o700)
            let run = try await Self.connectAsNobody(path)
            #expect(run.termination == .exited(1), "\(run.stdout) \(run.stderr)")
            #expect(run.stdout.contains("refused: 13"), "\(run.stdout) \(run.stderr)")
            let watcher = try await Self.watcher(engine)
            try await Self.roundTrip(watcher, value: 4)
        }
    }

    @Test(
        "another user who reaches the socket anyway (its modes opened by mistake) is refused by SO_PEERCRED",
        .enabled(if: geteuid() == 0, "needs root to run a client as nobody (setpriv)"))
    func otherUserRefusedByPeerCheck() async throws {
        try await ServeEngine.with(Self.twoSources, defaultSocket: true) { engine in
            let path = engine.socketPath
            // The folders and the socket opened, as a careless user might: the engine's own check remains.
            for folder in [engine.folder, engine.runtime, engine.runtime + "/hammock"] { chmod(folder, 0o755) }
            chmod(path, 0o777)
            let run = try await Self.connectAsNobody(path)
            #expect(run.stdout.contains("read: {"), "\(run.stdout) \(run.stderr)")
            #expect(run.stdout.contains(#""type":"error""#) && run.stdout.contains("serves user 0 only"), "\(run.stdout)")
            #expect(!run.stdout.contains("hello"), "another user was served: \(run.stdout)")
            #expect(run.stdout.contains("then: closed"), "\(run.stdout)")
            try await engine.process.waitForStderr(containing: "refused a connection from user 65534")
        }
    }

    // MARK: - The engine's life

    @Test("SIGKILL leaves a stale socket that the next serve replaces; a second serve while one runs exits 3")
    func staleSocketAndSecondServe() async throws {
        try await RunSlots.withSlot {
            let (folder, runtime, configPath) = try ServeEngine.prepare(Self.twoSources)
            defer { HammockProcess.removeTemporaryDirectory(folder) }
            let first = try await ServeEngine.start(folder: folder, runtime: runtime, configPath: configPath, defaultSocket: true)
            let path = first.socketPath
            first.process.signal(SIGKILL)
            _ = try await first.process.waitForExit()
            await first.process.stop()
            var status = stat()
            #expect(lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK, "no stale socket left at \(path)")
            if case .success(let descriptor) = RawSocket.connect(path) {
                close(descriptor)
                Issue.record("a dead engine's socket accepted a connection")
            }

            let second = try await ServeEngine.start(folder: folder, runtime: runtime, configPath: configPath, defaultSocket: true)
            defer { Task { await second.process.stop() } }
            #expect(second.socketPath == path)
            let watcher = try await Self.watcher(second)
            try await Self.roundTrip(watcher, value: 5)

            let third = try await ServeEngine.start(
                folder: folder, runtime: runtime, configPath: configPath, defaultSocket: true, waitUntilServing: false)
            let ended = try await third.process.waitForExit(timeout: .seconds(20))
            try await third.process.waitUntilStderrEnds()
            #expect(ended == .exited(3), "\(third.process.stderrText)")
            #expect(third.process.stderrText.contains(path), "the message does not name the socket: \(third.process.stderrText)")
            await third.process.stop()
            try await Self.roundTrip(watcher, value: 6)
            #expect(second.process.isRunning)
            await second.process.stop()
        }
    }

    @Test("SIGTERM: every client reads bye (signal), the socket file is removed, exit 0")
    func terminate() async throws {
        try await ServeEngine.with(Self.twoSources) { engine in
            let one = try await Self.watcher(engine, name: "one")
            let two = try engine.client(#"{"op":"subscribe","sources":["b"]}"#, name: "two")
            try await two.next(type: "hello")
            engine.process.signal(SIGTERM)
            for client in [one, two] {
                let bye = try await client.next(type: "bye")
                #expect(bye["reason"]?.stringValue == "signal")
                #expect(await client.waitForEnd(timeout: .seconds(5)))
            }
            #expect(try await engine.process.waitForExit(timeout: .seconds(15)) == .exited(0))
            #expect(!FileManager.default.fileExists(atPath: engine.socketPath), "the socket file is still there")
        }
    }

    @Test("--idle-exit 1s: not while a client is connected; about a second after the last one leaves")
    func idleExit() async throws {
        try await ServeEngine.with(Self.twoSources, arguments: ["--idle-exit", "1s"]) { engine in
            let client = try await Self.watcher(engine)
            try await Task.sleep(for: .milliseconds(2500))
            #expect(engine.process.isRunning, "the engine left while a client was connected")
            try await Self.roundTrip(client, value: 8)
            await client.closeAndWait()
            let left = ContinuousClock.now
            #expect(try await engine.process.waitForExit(timeout: .seconds(10)) == .exited(0))
            let after = ContinuousClock.now - left
            print("idle exit: exited \(after) after the last client left")
            #expect(after >= .milliseconds(800) && after < .seconds(4), "exited \(after) after the last client left")
            #expect(!FileManager.default.fileExists(atPath: engine.socketPath))
        }
    }

    @Test("--idle-exit 0 (as 0s): the engine stays when its last client has left")
    func idleExitNever() async throws {
        try await ServeEngine.with(Self.twoSources, arguments: ["--idle-exit", "0"]) { engine in
            let client = try await Self.watcher(engine)
            await client.closeAndWait()
            try await Task.sleep(for: .milliseconds(1500))
            #expect(engine.process.isRunning, "the engine left with --idle-exit 0: \(engine.process.stderrText)")
            let next = try await Self.watcher(engine, name: "next")
            try await Self.roundTrip(next, value: 3)
        }
    }

    @Test("SIGHUP: every client reads reloaded; a subscription to a removed source ends cleanly")
    func reload() async throws {
        try await ServeEngine.with(Self.twoSources) { engine in
            let everything = try await Self.watcher(engine, name: "everything")
            let onlyB = try engine.client(#"{"op":"subscribe","sources":["b"],"id":1}"#, name: "onlyB")
            try await onlyB.next(type: "ack")
            let onlyA = try engine.client(#"{"op":"subscribe","sources":["a"],"id":1}"#, name: "onlyA")
            try await onlyA.next(type: "ack")
            try TestFiles.replaceAtomically("sources:\n  a: { kind: fake, content: 1 }\n", at: engine.configPath)
            engine.process.signal(SIGHUP)
            for client in [everything, onlyB] {
                try await client.next(type: "removed") { $0.id == "b" }
            }
            for client in [everything, onlyB, onlyA] {
                let reloaded = try await client.next(type: "reloaded")
                #expect(reloaded[pointer: "/sources"]?.arrayValue?.contains(.string("b")) != true, "\(reloaded)")
            }
            #expect(!onlyA.lines.contains { $0.type == "removed" }, "a client of a alone heard of b")
            // Clean: b's subscriber stays connected, hears nothing more of b, and is still served.
            let mark = onlyB.lineCount
            try await Self.roundTrip(everything, value: 11)
            try await Self.roundTrip(onlyA, value: 12)
            onlyB.send(#"{"op":"snapshot","id":"s"}"#)
            try await onlyB.next(type: "ack") { $0.id == "s" }
            #expect(!onlyB.lines.dropFirst(mark).contains { $0.type == "source" }, "\(onlyB.lines.dropFirst(mark))")
            #expect(!onlyB.hasEnded && engine.process.isRunning)
            onlyB.send(overrideLine("b", "1", id: "3"))
            try await onlyB.next(type: "error") { $0.id == "3" }
        }
    }

    @Test("a subscribe line naming an unknown source, or malformed, gets an error with its id and a close")
    func badSubscribe() async throws {
        try await ServeEngine.with(Self.twoSources) { engine in
            let lines = [
                (#"{"op":"subscribe","sources":["nope"],"id":"u1"}"#, "u1", "nope"),
                (#"{"op":"subscribe","views":["nothere"],"id":"u2"}"#, "u2", "nothere"),
                (#"{"op":"subscribe","format":"bogus","id":"u3"}"#, "u3", "format"),
                (#"{"op":"subscribe","sourcez":["a"],"id":"u4"}"#, "u4", "sourcez"),
                (#"{"op":"subscribe","sources":"a","id":"u5"}"#, "u5", "sources"),
            ]
            for (line, id, named) in lines {
                let client = try engine.client(line, name: id)
                let error = try await client.next("the first line", where: { _ in true })
                #expect(error.type == "error" && error.id == id, "\(line) → \(error)")
                #expect(error["message"]?.stringValue?.contains(named) == true, "\(line) → \(error)")
                #expect(await client.waitForEnd(timeout: .seconds(5)), "\(line): not closed")
                #expect(!client.lines.contains { $0.type == "hello" })
            }
            let watcher = try await Self.watcher(engine)
            try await Self.roundTrip(watcher, value: 2)
        }
    }

    // MARK: - Socket activation

    @Test("socket activation without systemd: systemd-socket-activate binds, hammock serve serves through it")
    func socketActivation() async throws {
        let activate = "/usr/bin/systemd-socket-activate"
        try #require(
            FileManager.default.isExecutableFile(atPath: activate),
            "systemd-socket-activate is missing: apt-get install systemd (.ci/run does)")
        try await RunSlots.withSlot {
            let (folder, runtime, configPath) = try ServeEngine.prepare(Self.twoSources)
            defer { HammockProcess.removeTemporaryDirectory(folder) }
            let socket = runtime + "/activated.sock"
            let hammock = try HammockProcess.executablePath()
            let process = try HammockProcess.launch(
                program: activate, arguments: ["-l", socket, hammock, "serve", configPath],
                environment: ["XDG_RUNTIME_DIR": runtime])
            defer { Task { await process.stop() } }
            // systemd-socket-activate binds at once and starts hammock on the first connection.
            let deadline = ContinuousClock.now + .seconds(10)
            while !FileManager.default.fileExists(atPath: socket) && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let client = try SocketClient(socket, subscribe: #"{"op":"subscribe","id":"x"}"#, name: "activated")
            let hello = try await client.next(type: "hello", timeout: .seconds(20))
            #expect(hello["configuration"]?.stringValue?.hasSuffix("/config.yaml") == true, "\(hello)")
            try await client.next(type: "ack") { $0.id == "x" }
            try await Self.waitForLoads(client, hello: hello, name: "activated")
            try await Self.roundTrip(client, value: 13)
            try await process.waitForStderr(containing: "serving")
            #expect(process.stderrText.contains(socket), "\(process.stderrText)")
            // The engine took the passed socket (no socket of its own under XDG_RUNTIME_DIR/hammock).
            #expect(ServeEngine.defaultSocket(in: runtime) == nil)
            process.signal(SIGTERM)
            try await client.next(type: "bye")
            _ = try await process.waitForExit(timeout: .seconds(15))
            // systemd's socket, not the engine's: its file stays for the next activation.
            #expect(FileManager.default.fileExists(atPath: socket))
            await process.stop()
        }
    }
}
