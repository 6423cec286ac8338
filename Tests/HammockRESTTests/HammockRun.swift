import Foundation
import HammockJSON
import Synchronization
import Testing

// A minimal copy of what Tests/HammockEndToEndTests/HammockProcess.swift does (a test target cannot import
// another): run the real `hammock` executable from the build folder on a configuration, read its JSON lines,
// write control lines, and always kill it and remove its folder at the end.

struct HarnessError: Error, CustomStringConvertible {
    var description: String
}

/// One line of hammock's stdout.
struct Line: Sendable, CustomStringConvertible {
    let text: String
    let json: JSONValue

    var type: String? { json["type"]?.stringValue }
    var id: String? { json["id"]?.stringValue }
    var event: String? { json["event"]?.stringValue }
    var content: JSONValue? { json["state"]?["content"] }
    var error: JSONValue? { json["state"]?["latestError"] }
    var errorCode: String? { error?["code"]?.stringValue }
    var errorMessage: String? { error?["message"]?.stringValue }
    var description: String { text }
}

final class HammockRun: Sendable {
    static let defaultTimeout: Duration = .seconds(10)

    private let process: Process
    private let stdin: FileHandle
    let directory: String
    private let output = OutputBox()

    /// The folder holding the built products: the test executable's, where `hammock` and its plugins are.
    static var productsDirectory: String {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        return (executable as NSString).deletingLastPathComponent
    }

    static var executable: String {
        get throws {
            let path = productsDirectory + "/hammock"
            guard FileManager.default.isExecutableFile(atPath: path),
                FileManager.default.isExecutableFile(atPath: productsDirectory + "/hammock-plugin-rest")
            else {
                throw HarnessError(description: "hammock and hammock-plugin-rest are not built in \(productsDirectory); run swift build --build-tests")
            }
            return path
        }
    }

    static func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/hammock-rest-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func environment(_ extra: [String: String]) -> [String: String] {
        var environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "LANG": "C.UTF-8"]
        environment.merge(extra) { _, new in new }
        return environment
    }

    private init(arguments: [String], environment: [String: String], directory: String) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.executable)
        process.arguments = arguments
        process.environment = Self.environment(environment)
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let input = Pipe()
        let out = Pipe()
        let err = Pipe()
        process.standardInput = input
        process.standardOutput = out
        process.standardError = err
        stdin = input.fileHandleForWriting
        self.directory = directory
        out.fileHandleForReading.readabilityHandler = { [output] handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                return
            }
            output.withLock { state in
                state.stdout += data
                while let newline = state.stdout.firstIndex(of: UInt8(ascii: "\n")) {
                    let bytes = Array(state.stdout[..<newline])
                    state.stdout.removeSubrange(...newline)
                    let text = String(decoding: bytes, as: UTF8.self)
                    let json = (try? JSONValue(parsing: bytes)) ?? .string("NOT JSON: " + text)
                    state.lines.append(Line(text: text, json: json))
                }
            }
        }
        err.fileHandleForReading.readabilityHandler = { [output] handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                return
            }
            output.withLock { $0.stderr += data }
        }
        try process.run()
    }

    /// Writes `config` to a fresh folder, runs `hammock run` on it for `body`, then kills it.
    static func with<R>(
        config: String, environment: [String: String] = [:], _ body: (HammockRun) async throws -> R
    ) async throws -> R {
        let directory = try temporaryDirectory()
        let path = directory + "/config.yaml"
        try Data(config.utf8).write(to: URL(fileURLWithPath: path))
        let run = try HammockRun(arguments: ["run", path], environment: environment, directory: directory)
        defer { run.stop() }
        return try await body(run)
    }

    /// Runs `hammock check` on `config`; returns its exit status and everything it printed.
    static func check(config: String, environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/config.yaml"
        try Data(config.utf8).write(to: URL(fileURLWithPath: path))
        let run = try HammockRun(arguments: ["check", path], environment: environment, directory: directory)
        try? run.stdin.close()
        let deadline = ContinuousClock.now + defaultTimeout
        while run.process.isRunning {
            if ContinuousClock.now > deadline {
                run.stop()
                throw HarnessError(description: "hammock check did not finish within \(defaultTimeout)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        try await Task.sleep(for: .milliseconds(100))  // the pipes' last bytes
        let text = run.stdoutText + "\n" + run.stderrText
        return (run.process.terminationStatus, text)
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? stdin.close()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var lines: [Line] { output.withLock { $0.lines } }
    var stdoutText: String { output.withLock { $0.lines.map(\.text).joined(separator: "\n") } }
    var stderrText: String { output.withLock { String(decoding: $0.stderr, as: UTF8.self) } }

    func send(_ controlLine: String) throws {
        try stdin.write(contentsOf: Data((controlLine + "\n").utf8))
    }

    /// The next line of `source` (after the last one returned for it) that satisfies `predicate`.
    @discardableResult
    func next(
        _ source: String, timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: (Line) -> Bool = { _ in true }
    ) async throws -> Line {
        let deadline = ContinuousClock.now + timeout
        while true {
            let found = output.withLock { state -> Line? in
                // Each source has its own place: waiting for one never skips another's lines.
                var cursor = state.cursors[source] ?? 0
                defer { state.cursors[source] = cursor }
                while cursor < state.lines.count {
                    let line = state.lines[cursor]
                    cursor += 1
                    if line.type == "source" && line.id == source && predicate(line) { return line }
                }
                return nil
            }
            if let found { return found }
            if ContinuousClock.now > deadline || !process.isRunning {
                throw HarnessError(
                    description: """
                        no matching line for "\(source)" within \(timeout) (at \(sourceLocation))
                        stdout:
                        \(stdoutText)
                        stderr:
                        \(stderrText)
                        """)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The next answer (newData, notModified or error) for `source`.
    @discardableResult
    func nextAnswer(_ source: String, timeout: Duration = defaultTimeout, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Line {
        try await next(source, timeout: timeout, sourceLocation: sourceLocation) {
            ["newData", "notModified", "error"].contains($0.event ?? "")
        }
    }
}

/// What the process wrote so far; a class so the pipes' handlers can share it.
private final class OutputBox: Sendable {
    let state = Mutex<(lines: [Line], stdout: [UInt8], stderr: [UInt8], cursors: [String: Int])>(([], [], [], [:]))

    func withLock<R>(_ body: (inout (lines: [Line], stdout: [UInt8], stderr: [UInt8], cursors: [String: Int])) -> R) -> R {
        state.withLock { body(&$0) }
    }
}

extension JSONValue {
    /// Parses test text that must be JSON.
    static func parse(_ text: String) -> JSONValue {
        (try? JSONValue(parsing: Array(text.utf8))) ?? .string("NOT JSON: " + text)
    }
}
