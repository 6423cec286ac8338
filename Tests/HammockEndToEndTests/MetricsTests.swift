import Foundation
import HammockTestSupport
import Testing

/// `--metrics HOST:PORT` on the real binary, scraped over HTTP as Prometheus would. promtool's own check of
/// the format runs in tests/consumers/prometheus (it installs Debian's prometheus package).
@Suite("Metrics")
struct MetricsTests {
    /// `GET url` over a plain socket, `Connection: close`: the status and the body.
    static func get(_ url: URL) async throws -> (status: Int, body: String) {
        let host = url.host ?? "127.0.0.1"
        let path = url.path.isEmpty ? "/" : url.path
        let response = try await Task.detached { () throws -> String in
            let descriptor = try connect(to: url)
            defer { close(descriptor) }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                received += buffer[..<count]
            }
            return String(decoding: received, as: UTF8.self)
        }.value
        guard let split = response.range(of: "\r\n\r\n"),
            let status = Int(response.split(separator: " ", maxSplits: 2).dropFirst().first ?? "")
        else { throw HammockHarnessError(message: "not an HTTP response: \(response)", sourceLocation: #_sourceLocation) }
        return (status, String(response[split.upperBound...]))
    }

    /// A TCP connection to `url`'s host and port; the caller closes it.
    static func connect(to url: URL) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(url.host ?? "127.0.0.1")
        address.sin_port = UInt16(url.port ?? 80).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let error = errno
            close(descriptor)
            throw HammockHarnessError(message: "connect \(url): errno \(error)", sourceLocation: #_sourceLocation)
        }
        return descriptor
    }

    /// How many file descriptors process `pid` has open.
    static func descriptorCount(_ pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count
    }

    /// `name{labels} value` lines of a scrape, by their name and labels as written.
    static func samples(_ scrape: String) -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in scrape.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    /// The address hammock says it serves its metrics at.
    static func metricsURL(_ hammock: HammockProcess) async throws -> URL {
        try await hammock.waitForStderr(containing: "/metrics")
        let match = try #require(hammock.stderrText.firstMatch(of: /http:\/\/[0-9.]+:[0-9]+\/metrics/))
        return try #require(URL(string: String(match.0)))
    }

    @Test("a scrape shows loads by outcome, durations, failures, the last success, restarts, reloads and stdout lines, and they move")
    func scrapeMoves() async throws {
        let config = """
            sources:
              good: { kind: fake, content: 1, delay: 50ms }
              bad: { kind: fake, state: error, error: boom, retry: off }
              pid: { kind: shell, command: [sh, -c, "echo $PPID"], retry: { initial: 200ms } }
            """
        try await HammockProcess.withRunning(config: config, arguments: ["--metrics", "127.0.0.1:0"]) { hammock in
            let url = try await Self.metricsURL(hammock)
            try await hammock.waitUntil("every source answered") { lines in
                [("pid", "newData"), ("bad", "error"), ("good", "newData")].allSatisfy { id, event in
                    lines.contains { $0.id == id && $0.event == event }
                }
            }
            let first = try await Self.get(url)
            #expect(first.status == 200)
            let before = Self.samples(first.body)
            #expect(before[#"hammock_source_loads_total{source="good",outcome="newData"}"#] == 1, "\(first.body)")
            #expect(before[#"hammock_source_loads_total{source="bad",outcome="error"}"#] == 1)
            #expect(before[#"hammock_source_consecutive_failures{source="bad"}"#] == 1)
            #expect((before[#"hammock_source_last_success_timestamp_seconds{source="good"}"#] ?? 0) > 1_700_000_000)
            #expect(before[#"hammock_source_load_duration_seconds_count{source="good"}"#] == 1)
            #expect(before[#"hammock_source_load_duration_seconds_bucket{source="good",le="0.01"}"#] == 0, "the fake's delay is 50 ms")
            #expect((before["hammock_stdout_lines_written_total"] ?? 0) >= 4)
            #expect(before[#"hammock_reloads_total{outcome="success"}"#] == 0)

            // A failing source's counters grow with each load.
            for count in 2...4 {
                try hammock.send(controlLine: #"{"op":"load","source":"bad"}"#)
                try await hammock.waitUntil("error \(count)") { lines in lines.filter { $0.id == "bad" && $0.event == "error" }.count >= count }
            }
            // A killed plugin is restarted; a reload is counted.
            let pluginPID = try #require(hammock.lines.last { $0.id == "pid" && $0.event == "newData" }?.content?.stringValue.flatMap { Int32($0) })
            kill(pluginPID, SIGKILL)
            hammock.signal(SIGHUP)
            try await hammock.waitFor(type: "reloaded")
            let deadline = ContinuousClock.now + .seconds(10)
            var after: [String: Double] = [:]
            repeat {
                try await Task.sleep(for: .milliseconds(100))
                after = Self.samples(try await Self.get(url).body)
            } while after[#"hammock_plugin_restarts_total{kind="shell"}"#] != 1 && ContinuousClock.now < deadline
            #expect(after[#"hammock_plugin_restarts_total{kind="shell"}"#] == 1)
            #expect(after[#"hammock_source_loads_total{source="bad",outcome="error"}"#] == 4)
            #expect(after[#"hammock_source_consecutive_failures{source="bad"}"#] == 4)
            #expect(after[#"hammock_reloads_total{outcome="success"}"#] == 1)
            #expect((after["hammock_stdout_lines_written_total"] ?? 0) > (before["hammock_stdout_lines_written_total"] ?? 0))

            let missing = try await Self.get(url.deletingLastPathComponent().appendingPathComponent("nothing"))
            #expect(missing.status == 404)
        }
    }

    @Test("--metrics on a port in use, or not HOST:PORT: a clear error, exit 2")
    func badAddress() async throws {
        // Hold a port, then ask hammock for it.
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                try #require(bind(holder, $0, length) == 0 && listen(holder, 1) == 0 && getsockname(holder, $0, &length) == 0)
            }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let config = try HammockProcess.writeConfig("sources:\n  a: { kind: fake, content: 1 }\n", in: folder)
        let inUse = try await HammockProcess.execute(["run", config, "--metrics", "127.0.0.1:\(port)"])
        #expect(inUse.termination == .exited(2))
        #expect(inUse.stderr.contains("--metrics 127.0.0.1:\(port): cannot listen there"), "\(inUse.stderr)")
        #expect(inUse.stdout.isEmpty, "nothing started: \(inUse.stdout)")
        let malformed = try await HammockProcess.execute(["run", config, "--metrics", "9464"])
        #expect(malformed.termination == .exited(2))
        #expect(malformed.stderr.contains("is not HOST:PORT"), "\(malformed.stderr)")
    }

    /// A hostile client opens connection after connection and sends nothing. Each would hold one of hammock's
    /// descriptors, which its plugins, pipes and files need too: the server keeps at most 32, closing the
    /// oldest for a new one, so a scrape still gets through and the engine goes on.
    @Test("300 connections that send nothing hold at most 32 of hammock's descriptors; a scrape gets through; the engine goes on")
    func connectionFlood() async throws {
        let config = "sources:\n  a: { kind: fake, content: 1 }\n"
        try await HammockProcess.withRunning(config: config, arguments: ["--metrics", "127.0.0.1:0"]) { hammock in
            let url = try await Self.metricsURL(hammock)
            try await hammock.waitUntil("a answered") { lines in lines.contains { $0.id == "a" && $0.event == "newData" } }
            let before = Self.descriptorCount(hammock.pid)
            var idle: [Int32] = []
            defer { for descriptor in idle { close(descriptor) } }
            for _ in 0..<300 { idle.append(try Self.connect(to: url)) }
            // This scrape's connection is accepted after all 300: by then each of them was taken or closed.
            let scrape = try await Self.get(url)
            #expect(scrape.status == 200)
            #expect(Self.samples(scrape.body)[#"hammock_source_loads_total{source="a",outcome="newData"}"#] == 1, "\(scrape.body)")
            let during = Self.descriptorCount(hammock.pid)
            #expect(during <= before + 33, "hammock had \(before) descriptors before the flood and \(during) during it")
            try hammock.send(controlLine: #"{"op":"load","source":"a","id":7}"#)
            try await hammock.waitUntil("the load's ack") { lines in lines.contains { $0.type == "ack" } }
        }
    }
}
