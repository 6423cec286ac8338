import Foundation
import HammockJSON
import HammockProtocol
import Testing

/// A plugin executable from the build folder, driven directly over its protocol: the test plays the engine.
final class PluginProcess: @unchecked Sendable {
    let process = Process()
    private let stdin = Pipe()
    private let stdout = Pipe()
    private let stderr = Pipe()
    private let lock = NSCondition()
    private var messages: [PluginMessage] = []
    private var rawLines: [String] = []
    private var stderrText = ""
    private var ended = false

    /// The folder holding the built products (the test bundle lives beside them).
    static var productsDirectory: URL {
        var buffer = [CChar](repeating: 0, count: 4097)
        let length = readlink("/proc/self/exe", &buffer, 4096)
        let path = String(decoding: buffer[0..<max(length, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return URL(fileURLWithPath: path).deletingLastPathComponent()
    }

    init(executable name: String, arguments: [String] = [], environment: [String: String]? = nil) throws {
        let url = Self.productsDirectory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw HarnessError("\(url.path) is not built; run `swift build` first")
        }
        process.executableURL = url
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        stdout.fileHandleForReading.readabilityHandler = { [weak self] handle in self?.receive(handle.availableData) }
        stderr.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self else { return }
            self.lock.lock()
            self.stderrText += String(decoding: data, as: UTF8.self)
            self.lock.unlock()
        }
        try process.run()
    }

    deinit { stop() }

    private var partial: [UInt8] = []
    private func receive(_ data: Data) {
        lock.lock()
        defer { lock.broadcast(); lock.unlock() }
        if data.isEmpty {
            ended = true
            return
        }
        partial += data
        while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
            let line = Array(partial[..<newline])
            partial.removeSubrange(...newline)
            rawLines.append(String(decoding: line, as: UTF8.self))
            if let message = try? PluginMessage(line: line) { messages.append(message) }
        }
    }

    func send(_ message: EngineMessage) {
        stdin.fileHandleForWriting.write(Data(message.line))
    }

    /// Closes the plugin's stdin, as the engine does when it exits.
    func closeInput() { try? stdin.fileHandleForWriting.close() }

    /// Waits for the first not-yet-taken message that matches, and takes it (and everything before it).
    func next(
        timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: (PluginMessage) -> Bool = { _ in true }
    ) -> PluginMessage? {
        let deadline = Date().addingTimeInterval(Double(timeout.components.seconds))
        lock.lock()
        defer { lock.unlock() }
        while true {
            if let index = messages.firstIndex(where: predicate) {
                let message = messages[index]
                messages.removeSubrange(...index)
                return message
            }
            if ended || !lock.wait(until: deadline) {
                Issue.record(
                    "no matching plugin message within \(timeout); stdout: \(rawLines.suffix(20)); stderr: \(stderrText.suffix(2000))",
                    sourceLocation: sourceLocation)
                return nil
            }
        }
    }

    /// Handshake and configure in one step; returns the plugin's answer to `configure`.
    func configure(_ source: String, _ options: JSONValue) -> PluginMessage? {
        send(.configure(source: source, options: options))
        return next {
            switch $0 {
            case .configured(let id), .invalid(let id, _): id == source
            default: false
            }
        }
    }

    func hello() -> PluginMessage? {
        send(.hello(protocol: 1))
        return next { if case .hello = $0 { true } else { false } }
    }

    /// Loads and waits for the answer to that load.
    func load(_ source: String, id: Int, timeout: Double? = nil, wait: Duration = .seconds(10)) -> PluginMessage? {
        send(.load(source: source, id: id, etag: nil, lastModified: nil, timeout: timeout))
        return next(timeout: wait) { $0.loadID == id }
    }

    var standardError: String {
        lock.lock()
        defer { lock.unlock() }
        return stderrText
    }

    func waitForExit(timeout: Duration) -> Int32? {
        let deadline = Date().addingTimeInterval(Double(timeout.components.seconds))
        while process.isRunning && Date() < deadline { usleep(20_000) }
        return process.isRunning ? nil : process.terminationStatus
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fresh temporary folder for one test.
func makeTemporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("hammock-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Whether a process with this id is still alive (and not a zombie).
func isAlive(_ pid: Int32) -> Bool {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return false }
    return !status.contains("State:\tZ")
}
