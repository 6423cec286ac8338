import Foundation
import HammockTestSupport
import Synchronization
import Testing

/// systemd's side of `Type=notify`, played by the test: a datagram socket of its own named by NOTIFY_SOCKET,
/// whose messages are kept with the time each arrived.
final class NotifyListener: Sendable {
    struct Message: Sendable {
        var text: String
        var at: ContinuousClock.Instant
        var fields: [String] { text.split(separator: "\n").map(String.init) }
    }

    /// What arrived so far; a class of its own, so that the reading thread holds it and not the listener.
    private final class Received: Sendable {
        let messages = Mutex<[Message]>([])
    }

    let path: String
    private let descriptor: Int32
    private let received = Received()

    init(in folder: String) throws {
        path = folder + "/notify.sock"
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        self.descriptor = descriptor
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard descriptor >= 0, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw HammockHarnessError(message: "no notify socket at \(path)", sourceLocation: #_sourceLocation)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            throw HammockHarnessError(message: "bind \(path): errno \(errno)", sourceLocation: #_sourceLocation)
        }
        let received = received
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return }  // closed by deinit (hammock sends no empty datagram)
                let message = Message(text: String(decoding: buffer[..<count], as: UTF8.self), at: .now)
                received.messages.withLock { $0.append(message) }
            }
        }
        reader.start()
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
    }

    var messages: [Message] { received.messages.withLock { $0 } }

    /// Waits for a message with `field`, after the first `skipping` messages; returns its index.
    @discardableResult
    func waitFor(_ field: String, after skipping: Int = 0, timeout: Duration = .seconds(20)) async throws -> Int {
        let deadline = ContinuousClock.now + timeout
        while true {
            let all = messages
            if let index = all.indices.dropFirst(skipping).first(where: { all[$0].fields.contains(field) }) { return index }
            if ContinuousClock.now >= deadline {
                throw HammockHarnessError(
                    message: "no \(field) within \(timeout); received: \(all.map(\.text))", sourceLocation: #_sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
}

@Suite("systemd notify")
struct ServiceNotifyTests {
    @Test("READY after the slow source, RELOADING with MONOTONIC_USEC then READY on SIGHUP, STOPPING on SIGTERM, watchdog pings")
    func notifySequence() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let listener = try NotifyListener(in: folder)
        let config = """
            sources:
              fast: { kind: fake, content: 1 }
              slow: { kind: fake, content: 2, delay: 1500ms }
            """
        let configPath = try HammockProcess.writeConfig(config, in: folder)
        // The watchdog wants a ping every 300 ms (half of WATCHDOG_USEC).
        let environment = ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "600000"]
        try await HammockProcess.withRunning(configPath: configPath, environment: environment) { hammock in
            let ready = try await listener.waitFor("READY=1")
            // Not before the slow source answered: its delay is a lower bound whatever the machine's load.
            #expect(listener.messages[ready].at - hammock.launchedAt >= .milliseconds(1400))
            #expect(listener.messages[ready].fields.contains("STATUS=2 sources, 0 failing"))
            try await hammock.waitFor(type: "source", id: "slow") { $0.event == "newData" }

            let before = monotonicMicroseconds()
            hammock.signal(SIGHUP)
            let reloading = try await listener.waitFor("RELOADING=1", after: ready + 1)
            let after = monotonicMicroseconds()
            let stamp = listener.messages[reloading].fields.first { $0.hasPrefix("MONOTONIC_USEC=") }
            let microseconds = stamp.flatMap { UInt64($0.dropFirst("MONOTONIC_USEC=".count)) }
            #expect(microseconds.map { before <= $0 && $0 <= after } == true, "MONOTONIC_USEC \(stamp ?? "missing") is not between \(before) and \(after)")
            try await listener.waitFor("READY=1", after: reloading + 1)

            // Watchdog pings come at about twice WATCHDOG_USEC's rate: count them over two seconds.
            let start = listener.messages.count
            try await Task.sleep(for: .seconds(2))
            let pings = listener.messages.dropFirst(start).filter { $0.fields.contains("WATCHDOG=1") }.count
            #expect((3...12).contains(pings), "\(pings) pings in 2 s, expected about 6")

            hammock.signal(SIGTERM)
            _ = try await hammock.waitForExit()
            try await listener.waitFor("STOPPING=1")
        }
        let states = listener.messages.flatMap(\.fields).filter { ["READY=1", "RELOADING=1", "STOPPING=1"].contains($0) }
        #expect(states == ["READY=1", "RELOADING=1", "READY=1", "STOPPING=1"])
    }

    @Test("a NOTIFY_SOCKET nobody listens on costs one warning; hammock runs on")
    func refusingSocket() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let config = """
            sources:
              a: { kind: fake, content: 1 }
            """
        let configPath = try HammockProcess.writeConfig(config, in: folder)
        let environment = ["NOTIFY_SOCKET": folder + "/nobody.sock", "WATCHDOG_USEC": "200000"]
        try await HammockProcess.withRunning(configPath: configPath, environment: environment) { hammock in
            try await hammock.waitFor(type: "source", id: "a") { $0.event == "newData" }
            try await hammock.waitForStderr(containing: "NOTIFY_SOCKET")
            try await Task.sleep(for: .milliseconds(600))  // a few watchdog pings, each refused
            try hammock.send(controlLine: #"{"op":"load","source":"a"}"#)
            try await hammock.waitFor(type: "source", id: "a") { $0.event == "newData" && $0[pointer: "/state/content"] == 1 }
            #expect(hammock.stderrText.components(separatedBy: "NOTIFY_SOCKET").count == 2, "one warning: \(hammock.stderrText)")
        }
    }

    /// `WATCHDOG_USEC=1` asked for a ping every half microsecond, and the engine spun at 130% of a core
    /// (issue 25). The interval is clamped to 50 ms, with a warning.
    @Test("WATCHDOG_USEC=1: at most one ping every 50 ms (about 20 a second, not thousands), and a warning on stderr")
    func watchdogIntervalClamped() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let listener = try NotifyListener(in: folder)
        let configPath = try HammockProcess.writeConfig("sources:\n  a: { kind: fake, content: 1 }\n", in: folder)
        let environment = ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "1"]
        try await HammockProcess.withRunning(configPath: configPath, environment: environment) { hammock in
            try await listener.waitFor("READY=1")
            try await hammock.waitForStderr(containing: "WATCHDOG_USEC=1")
            #expect(hammock.stderrText.contains("at most every 50 ms"), "\(hammock.stderrText)")
            let start = ContinuousClock.now
            let first = listener.messages.count
            try await Task.sleep(for: .seconds(1))
            let elapsed = ContinuousClock.now - start
            let pings = listener.messages.dropFirst(first).filter { $0.fields.contains("WATCHDOG=1") }.count
            // 20 a second at 50 ms; a loaded machine may send fewer, never more than one per 50 ms (+1 for
            // the edges of the window).
            let most = Int(elapsed / .milliseconds(50)) + 1
            #expect((3...most).contains(pings), "\(pings) pings in \(elapsed), at most \(most) wanted")
        }
    }

    /// docs/service.md: "a loop that is stuck stops the pings". A debug build's HAMMOCK_TEST_LOOP_STALL_MS has
    /// the loop stop taking inputs for that long when it takes a control line; the timer goes on asking, and
    /// no ping may come until the loop turns again.
    @Test("a stuck loop stops the watchdog pings: none while the loop is stalled for 1.5 s, and they come back after")
    func stuckLoopStopsPings() async throws {
        let folder = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let listener = try NotifyListener(in: folder)
        let configPath = try HammockProcess.writeConfig("sources:\n  a: { kind: fake, content: 1 }\n", in: folder)
        // A ping every 100 ms while the loop turns.
        let environment = ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "200000", "HAMMOCK_TEST_LOOP_STALL_MS": "1500"]
        try await HammockProcess.withRunning(configPath: configPath, environment: environment) { hammock in
            try await listener.waitFor("READY=1")
            let ready = listener.messages.count
            try await listener.waitFor("WATCHDOG=1", after: ready)
            let stalled = ContinuousClock.now
            try hammock.send(controlLine: #"{"op":"load","source":"a","id":1}"#)
            // The loop stalls on taking this line and answers it only after the stall.
            let ack = try await hammock.waitFor(type: "ack", timeout: .seconds(20))
            #expect(ack.receivedAt - stalled >= .milliseconds(1400), "the ack came \(ack.receivedAt - stalled) after the line: no stall")
            // Pings on either side of the stall, none inside it (a margin of 300 ms at each end for the line
            // to reach the loop and for the loop to turn again).
            let window = (stalled + .milliseconds(300))...(stalled + .milliseconds(1200))
            let during = listener.messages.filter { $0.fields.contains("WATCHDOG=1") && window.contains($0.at) }
            #expect(during.isEmpty, "\(during.count) pings while the loop was stalled")
            let after = listener.messages.count
            try await listener.waitFor("WATCHDOG=1", after: after, timeout: .seconds(5))
            // The timer's asks wait as one: the loop pings once when it turns again, not once for each of the
            // 15 intervals it missed (a burst that could outrun WatchdogSec's own count).
            let turned = (ack.receivedAt - .milliseconds(150))...(ack.receivedAt + .milliseconds(150))
            let burst = listener.messages.filter { $0.fields.contains("WATCHDOG=1") && turned.contains($0.at) }
            #expect(burst.count <= 3, "\(burst.count) pings within 150 ms of the loop turning again")
        }
    }
}
