import Foundation
import HammockJSON
import HammockSystem
import HammockTestSupport
import Synchronization
import Testing

// What ServeTests drive `hammock serve` with: the engine as a real process on its own socket, and raw Unix
// socket clients that speak the protocol by hand (no `hammock attach`: the attacks need a client that
// misbehaves on purpose). Every blocking socket call runs on a thread of its own (`OwnThread.run`), never on the
// cooperative pool, which has as few threads as the machine has cores.

// MARK: - Raw sockets

enum RawSocket {
    /// A connected Unix stream socket (close-on-exec), or the `errno` of the failed connect.
    static func connect(_ path: String) -> Result<Int32, POSIXError> {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .failure(POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes.prefix($0.count - 1)) }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(descriptor)
            return .failure(POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO))
        }
        return .success(descriptor)
    }

    /// Sends everything (no SIGPIPE); false once the peer is gone.
    @discardableResult
    static func send(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                Glibc.send(descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                offset += sent
            } else if sent < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }

    /// Reads until the first newline, the end of the connection or `timeout`: the line (without its
    /// newline), or nil. Reads byte by byte: for the few lines a refused client gets.
    static func readLine(_ descriptor: Int32, timeout: Duration) -> String? {
        let deadline = ContinuousClock.now + timeout
        var line: [UInt8] = []
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&watched, 1, Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var byte: UInt8 = 0
            let count = recv(descriptor, &byte, 1, 0)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// Reads and discards until the peer closes (true) or `timeout` passes (false).
    static func waitForEnd(_ descriptor: Int32, timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while ContinuousClock.now < deadline {
            var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&watched, 1, 50)
            if ready <= 0 { continue }
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count == 0 || (count < 0 && errno != EINTR && errno != EAGAIN) { return true }
        }
        return false
    }
}

// MARK: - A client that reads

/// One line a client read, parsed.
struct ClientLine: Sendable, CustomStringConvertible {
    let text: String
    let json: JSONValue
    let receivedAt: ContinuousClock.Instant

    var type: String? { json["type"]?.stringValue }
    var id: String? { json["id"]?.stringValue }
    var description: String { text }
    subscript(key: String) -> JSONValue? { json[key] }
    subscript(pointer pointer: String) -> JSONValue? { JSONPointer(pointer).flatMap { json[$0] } }
}

/// A well-behaved client of the socket: reads every line on a thread of its own (polling, so that the test
/// can end it and the thread closes the descriptor itself), sends what it is told.
final class SocketClient: Sendable {
    struct State {
        var lines: [ClientLine] = []
        var malformed: [String] = []
        var cursor = 0
        var closeRequested = false
        /// The engine closed the connection (or the descriptor failed).
        var ended = false
        /// The reader has closed the descriptor.
        var finished = false
    }

    let descriptor: Int32
    let name: String
    private let state = Mutex(State())

    /// Connects to `path`, sends `subscribe` (a whole line) if given, and starts reading.
    init(_ path: String, subscribe: String? = nil, name: String = "client") throws {
        switch RawSocket.connect(path) {
        case .success(let descriptor): self.descriptor = descriptor
        case .failure(let error): throw error
        }
        self.name = name
        if let subscribe { RawSocket.send(Array((subscribe + "\n").utf8), to: descriptor) }
        let thread = Thread { [self] in read() }
        thread.name = "serve-test.\(name)"
        thread.start()
    }

    deinit { close() }

    var lines: [ClientLine] { state.withLock { $0.lines } }
    var lineCount: Int { state.withLock { $0.lines.count } }
    var hasEnded: Bool { state.withLock { $0.ended } }
    var malformed: [String] { state.withLock { $0.malformed } }

    /// Sends one line (the newline is added); false once the engine is gone.
    @discardableResult
    func send(_ line: String) -> Bool { RawSocket.send(Array((line + "\n").utf8), to: descriptor) }

    /// The next line after the previous match that satisfies `predicate`.
    @discardableResult
    func next(
        _ what: String, timeout: Duration = .seconds(8), sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: (ClientLine) -> Bool
    ) async throws -> ClientLine {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (found, ended) = state.withLock { state -> (ClientLine?, Bool) in
                while state.cursor < state.lines.count {
                    let line = state.lines[state.cursor]
                    state.cursor += 1
                    if predicate(line) { return (line, state.ended) }
                }
                return (nil, state.ended)
            }
            if let found { return found }
            if ended || ContinuousClock.now >= deadline {
                let seen = lines.suffix(20).map { "  " + $0.text }.joined(separator: "\n")
                throw HammockHarnessError(
                    message: "\(name): \(ended ? "the connection ended" : "timed out after \(timeout)") before \(what); last lines:\n\(seen)",
                    sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// `next` for a line of `type`.
    @discardableResult
    func next(
        type: String, id: String? = nil, timeout: Duration = .seconds(8), sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: (ClientLine) -> Bool = { _ in true }
    ) async throws -> ClientLine {
        try await next("a \(type) line\(id.map { " for \($0)" } ?? "")", timeout: timeout, sourceLocation: sourceLocation) {
            $0.type == type && (id == nil || $0.id == id) && predicate($0)
        }
    }

    /// Waits until the engine closes the connection; false if it is still open after `timeout`.
    func waitForEnd(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !hasEnded {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// Ends the reader, which closes the descriptor.
    func close() {
        state.withLock { $0.closeRequested = true }
    }

    /// `close`, and waits until the descriptor is closed.
    func closeAndWait() async {
        close()
        while !state.withLock({ $0.finished }) { try? await Task.sleep(for: .milliseconds(2)) }
    }

    private func read() {
        var partial: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        defer {
            Glibc.close(descriptor)
            state.withLock { $0.finished = true }
        }
        while !state.withLock({ $0.closeRequested }) {
            var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&watched, 1, 20)
            if ready <= 0 { continue }
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            if count <= 0 {
                state.withLock { $0.ended = true }
                while !state.withLock({ $0.closeRequested }) { usleep(5_000) }
                return
            }
            let now = ContinuousClock.now
            var parsed: [ClientLine] = []
            var bad: [String] = []
            var start = 0
            while let newline = chunk[start..<count].firstIndex(of: UInt8(ascii: "\n")) {
                partial.append(contentsOf: chunk[start..<newline])
                let text = String(decoding: partial, as: UTF8.self)
                if let value = try? JSONValue(parsing: partial), case .object = value {
                    parsed.append(ClientLine(text: text, json: value, receivedAt: now))
                } else {
                    bad.append(text)
                }
                partial.removeAll(keepingCapacity: true)
                start = newline + 1
            }
            partial.append(contentsOf: chunk[start..<count])
            state.withLock {
                $0.lines += parsed
                $0.malformed += bad
            }
        }
    }
}

// MARK: - The engine

/// `hammock serve` on a configuration of its own, in a temporary folder with a private runtime folder
/// (`XDG_RUNTIME_DIR`, mode 0700).
final class ServeEngine: Sendable {
    let process: HammockProcess
    let folder: String
    let runtime: String
    let configPath: String
    /// `--socket`'s path, or "" for the engine's own choice.
    private let explicitSocket: String
    /// The socket it listens on (`--socket`'s, or the default one under `runtime`, once it is bound).
    var socketPath: String { explicitSocket.isEmpty ? Self.defaultSocket(in: runtime) ?? "" : explicitSocket }

    var pid: Int32 { process.pid }

    /// Makes the folders and writes `config` (unless `configPath` names one already written).
    static func prepare(_ config: String) throws -> (folder: String, runtime: String, configPath: String) {
        let folder = try HammockProcess.makeTemporaryDirectory()
        let runtime = folder + "/run"
        try FileManager.default.createDirectory(
            atPath: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let configPath = try HammockProcess.writeConfig(config, in: folder)
        return (folder, runtime, configPath)
    }

    /// Starts `hammock serve CONFIG ARGUMENTS...` and waits until it accepts a connection. `defaultSocket`:
    /// no `--socket`, the engine's own choice under `XDG_RUNTIME_DIR`.
    static func start(
        _ config: String, arguments: [String] = [], defaultSocket: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ServeEngine {
        let (folder, runtime, configPath) = try prepare(config)
        return try await start(
            folder: folder, runtime: runtime, configPath: configPath, arguments: arguments, defaultSocket: defaultSocket,
            sourceLocation: sourceLocation)
    }

    /// Starts another engine on the files of `prepare` (a second `serve` of one configuration).
    static func start(
        folder: String, runtime: String, configPath: String, arguments: [String] = [], defaultSocket: Bool = false,
        waitUntilServing: Bool = true, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ServeEngine {
        let hammock = try HammockProcess.executablePath(sourceLocation: sourceLocation)
        let explicit = runtime + "/engine.sock"
        let socketArguments = defaultSocket ? [] : ["--socket", explicit]
        let process = try HammockProcess.launch(
            program: hammock, arguments: ["serve", configPath] + socketArguments + arguments,
            environment: ["XDG_RUNTIME_DIR": runtime], sourceLocation: sourceLocation)
        let engine = ServeEngine(
            process: process, folder: folder, runtime: runtime, configPath: configPath,
            socketPath: defaultSocket ? "" : explicit)
        if waitUntilServing {
            do {
                try await engine.waitUntilServing(sourceLocation: sourceLocation)
            } catch {
                await process.stop()
                throw error
            }
        }
        return engine
    }

    private init(process: HammockProcess, folder: String, runtime: String, configPath: String, socketPath: String) {
        self.process = process
        self.folder = folder
        self.runtime = runtime
        self.configPath = configPath
        self.explicitSocket = socketPath
    }

    /// The one socket under `runtime/hammock/`, once there is one.
    static func defaultSocket(in runtime: String) -> String? {
        let folder = runtime + "/hammock"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return nil }
        return names.first { $0.hasSuffix(".sock") }.map { folder + "/" + $0 }
    }

    /// Waits until the socket accepts a connection (which is closed at once).
    func waitUntilServing(timeout: Duration = .seconds(20), sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            if !process.isRunning {
                throw HammockHarnessError(
                    message: "hammock serve ended before it served: \(process.stderrText)", sourceLocation: sourceLocation)
            }
            if let path = socketPath.isEmpty ? Self.defaultSocket(in: runtime) : socketPath,
                process.stderrText.contains("serving"), case .success(let descriptor) = RawSocket.connect(path)
            {
                Glibc.close(descriptor)
                return
            }
            if ContinuousClock.now >= deadline {
                throw HammockHarnessError(
                    message: "hammock serve did not serve within \(timeout): \(process.stderrText)", sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A reading client of this engine.
    func client(_ subscribe: String? = nil, name: String = "client") throws -> SocketClient {
        try SocketClient(socketPath, subscribe: subscribe, name: name)
    }

    /// How many descriptors the engine has open.
    var openDescriptors: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// The engine's threads (`/proc/PID/task`).
    var threadCount: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? -1
    }

    /// Waits until the engine's count of open descriptors has not changed for `still` (at most `timeout`):
    /// what it opens as it starts, and the connections it is letting go, are done with.
    func waitForSteadyDescriptors(
        still: Duration = .milliseconds(300), timeout: Duration = .seconds(10),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        var count = openDescriptors
        var since = ContinuousClock.now
        while ContinuousClock.now - since < still {
            guard ContinuousClock.now < deadline else {
                throw HammockHarnessError(
                    message: "the engine's descriptors did not hold still within \(timeout) (now \(count))",
                    sourceLocation: sourceLocation)
            }
            try await Task.sleep(for: .milliseconds(20))
            let now = openDescriptors
            if now != count { (count, since) = (now, ContinuousClock.now) }
        }
    }

    /// Kills the engine if it runs and removes its folder.
    func stop() async {
        await process.stop()
        HammockProcess.removeTemporaryDirectory(folder)
    }

    /// Runs `body` with an engine, stopping it however `body` ends.
    static func with<Result: Sendable>(
        _ config: String, arguments: [String] = [], defaultSocket: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation, _ body: (ServeEngine) async throws -> Result
    ) async throws -> Result {
        try await RunSlots.withSlot {
            let engine = try await start(
                config, arguments: arguments, defaultSocket: defaultSocket, sourceLocation: sourceLocation)
            do {
                let result = try await body(engine)
                await engine.stop()
                return result
            } catch {
                await engine.stop()
                throw error
            }
        }
    }
}

/// A control line that sets `source`'s content to `value` (a JSON text).
func overrideLine(_ source: String, _ value: String, id: String? = nil) -> String {
    #"{"op":"override","source":"\#(source)","content":\#(value)\#(id.map { #","id":"\#($0)""# } ?? "")}"#
}
