import Foundation
import HammockJSON
import HammockProtocol
import HammockTestSupport
import Synchronization
import Testing

/// A plugin executable from the build folder, driven directly over its protocol: the test plays the engine.
/// The process, its pipes and its JSON lines are `HammockProcess`'s (a stdout line that is not a JSON object
/// fails the test); this adds the protocol's messages.
final class PluginProcess: Sendable {
    /// Killed by its `deinit` when the test lets go of it.
    let process: HammockProcess
    /// How many of `process.malformedLines` have failed the test already.
    private let malformedReported = Mutex(0)

    init(executable name: String, arguments: [String] = [], environment: [String: String] = [:]) throws {
        process = try HammockProcess.launch(product: name, arguments: arguments, environment: environment)
    }

    var pid: Int32 { process.pid }

    /// The plugin's HOME: a fresh folder of its own.
    var home: String { process.directory }

    func send(_ message: EngineMessage) {
        _ = process.send(bytes: message.line)
    }

    /// Closes the plugin's stdin, as the engine does when it exits.
    func closeInput() { process.closeStdin() }

    /// Waits for the first not-yet-taken message that matches, and takes it (and everything before it); nil,
    /// with the test failed, when none comes within `timeout`. A line that is JSON but not a protocol message
    /// fails the test too. A `meta` (what a plugin says of an answer, before it) is passed over unless the
    /// predicate asks for it.
    func next(
        timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: (PluginMessage) -> Bool = { $0.type != "meta" }
    ) async -> PluginMessage? {
        defer { reportMalformedLines(sourceLocation: sourceLocation) }
        do {
            let line = try await process.nextLine(
                where: { line in
                    guard let message = Self.message(line, sourceLocation: sourceLocation) else { return false }
                    return predicate(message)
                }, timeout: timeout, "a matching plugin message", sourceLocation: sourceLocation)
            return Self.message(line, sourceLocation: sourceLocation)
        } catch {
            Issue.record(error, sourceLocation: sourceLocation)
            return nil
        }
    }

    /// Fails the test for stdout lines that are not JSON objects, each once (tests rarely `stop()` a plugin).
    private func reportMalformedLines(sourceLocation: SourceLocation) {
        let malformed = process.malformedLines
        let new = malformedReported.withLock { reported in
            defer { reported = malformed.count }
            return malformed.dropFirst(reported)
        }
        if !new.isEmpty { Issue.record("stdout lines that are not JSON objects: \(Array(new))", sourceLocation: sourceLocation) }
    }

    private static func message(_ line: HammockLine, sourceLocation: SourceLocation) -> PluginMessage? {
        do {
            return try PluginMessage(line: Array(line.text.utf8))
        } catch {
            Issue.record("not a protocol message: \(line.text) (\(error))", sourceLocation: sourceLocation)
            return nil
        }
    }

    /// Configures a source; returns the plugin's answer to that `configure`.
    func configure(_ source: String, _ options: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) async -> PluginMessage? {
        send(.configure(source: source, options: options))
        return await next(sourceLocation: sourceLocation) {
            switch $0 {
            case .configured(let id), .invalid(let id, _): id == source
            default: false
            }
        }
    }

    func hello(sourceLocation: SourceLocation = #_sourceLocation) async -> PluginMessage? {
        send(.hello(protocol: 1))
        return await next(sourceLocation: sourceLocation) { if case .hello = $0 { true } else { false } }
    }

    /// Loads and waits for the answer to that load.
    func load(
        _ source: String, id: Int, timeout: Double? = nil, wait: Duration = .seconds(10),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> PluginMessage? {
        send(.load(source: source, id: id, etag: nil, lastModified: nil, timeout: timeout))
        return await next(timeout: wait, sourceLocation: sourceLocation) { $0.loadID == id }
    }

    var standardError: String { process.stderrText }

    /// The exit status once the plugin has exited by itself within `timeout`; nil if it still runs or was
    /// killed by a signal.
    func waitForExit(timeout: Duration) async -> Int32? {
        guard let termination = try? await process.waitForExit(timeout: timeout) else { return nil }
        if case .exited(let status) = termination { return status }
        return nil
    }

    /// Kills the plugin, waits for it, and fails the test if it wrote anything but JSON lines.
    func stop() async { await process.stop() }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fresh temporary folder for one test.
func makeTemporaryDirectory() throws -> URL {
    URL(fileURLWithPath: try HammockProcess.makeTemporaryDirectory())
}

/// Whether a process with this id is still alive (and not a zombie).
func isAlive(_ pid: Int32) -> Bool { ProcessTable.isAlive(pid: pid) }
