import Foundation
import HammockJSON
import HammockSystem
import Testing

// Helpers for the tests that start processes: reading /proc, finding a fixture, writing files.

/// One process as `/proc/PID/stat` describes it.
public struct ProcessEntry: Sendable, Hashable, CustomStringConvertible {
    public let pid: Int32
    public let parent: Int32
    /// `R`, `S`, `D`, `Z` (zombie), `X` (dead), ...
    public let state: Character
    /// The kernel's short name (at most 15 bytes: `hammock-plugin-shell` reads `hammock-plugin-`).
    public let command: String
    /// Start time in clock ticks since boot: with the pid, names one process even if the pid is reused.
    public let startTime: UInt64

    /// The process's argv, read now (empty once it has ended or for a zombie).
    public var arguments: [String] { ProcessTable.arguments(of: pid) }

    public var description: String {
        let argv = arguments
        return "\(pid) [\(state)] ppid \(parent) \(argv.isEmpty ? "(\(command))" : argv.joined(separator: " "))"
    }
}

public enum ProcessTable {
    /// The process `pid`, or nil when there is none.
    public static func entry(_ pid: Int32) -> ProcessEntry? {
        // The fields by the system layer's one parser of /proc/PID/stat; the name from /proc/PID/comm, which
        // holds the same 15 bytes.
        guard let stat = ProcessStat(pid: pid),
            let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)
        else { return nil }
        let command = comm.hasSuffix("\n") ? String(comm.dropLast()) : comm
        return ProcessEntry(pid: pid, parent: stat.parent, state: stat.state, command: command, startTime: stat.startTime)
    }

    /// Every process now.
    public static func all() -> [ProcessEntry] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return names.compactMap { Int32($0) }.compactMap(entry)
    }

    /// The processes below `root` (not `root` itself), found by walking parent links: commands run in
    /// process groups of their own, so the group would miss them.
    public static func descendants(of root: Int32) -> [ProcessEntry] {
        let processes = all()
        var children: [Int32: [ProcessEntry]] = [:]
        for process in processes { children[process.parent, default: []].append(process) }
        var found: [ProcessEntry] = []
        var frontier = [root]
        while let pid = frontier.popLast() {
            for child in children[pid] ?? [] where !found.contains(where: { $0.pid == child.pid }) {
                found.append(child)
                frontier.append(child.pid)
            }
        }
        return found
    }

    /// The direct children of `parent` whose argv mentions `name` (e.g. `hammock-plugin-shell`).
    public static func children(of parent: Int32, named name: String) -> [ProcessEntry] {
        all().filter { $0.parent == parent && isAlive($0) && $0.arguments.contains { $0.contains(name) } }
    }

    /// The plugin processes of `engine` whose argv mentions `name`: each is the one child of a guard that is
    /// `engine`'s child (`children(of:named:)` finds those guards, whose argv names the plugin too). A test of
    /// a killed plugin kills these, not the guard, which would end the plugin by another path.
    public static func plugins(of engine: Int32, named name: String) -> [ProcessEntry] {
        let guards = Set(children(of: engine, named: name).filter { $0.command == "hammock-guard" }.map(\.pid))
        return all().filter { guards.contains($0.parent) && isAlive($0) && $0.arguments.contains { $0.contains(name) } }
    }

    /// Whether this very process (same pid, same start time) still runs: a zombie or a reused pid does not.
    public static func isAlive(_ process: ProcessEntry) -> Bool {
        guard let now = entry(process.pid), now.startTime == process.startTime else { return false }
        return now.state != "Z" && now.state != "X"
    }

    /// Whether a process with this pid runs (not a zombie); for pids known only by number.
    public static func isAlive(pid: Int32) -> Bool {
        guard let now = entry(pid) else { return false }
        return now.state != "Z" && now.state != "X"
    }

    /// The live processes whose environment (as they started) holds `entry` (`NAME=value`): whatever a
    /// process started with that variable set started in turn, however it detached (setsid, double fork),
    /// unless it cleared its environment.
    public static func processes(withEnvironment entry: String) -> [ProcessEntry] {
        let wanted = Array(entry.utf8)
        return all().filter { process in
            guard process.state != "Z", process.state != "X",
                let data = FileManager.default.contents(atPath: "/proc/\(process.pid)/environ")
            else { return false }
            return data.split(separator: 0).contains { $0.elementsEqual(wanted) }
        }
    }

    public static func arguments(of pid: Int32) -> [String] {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return [] }
        return data.split(separator: 0, omittingEmptySubsequences: false).dropLast().map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// Polls until `condition` holds or `timeout` passes; returns whether it held.
    public static func eventually(
        within timeout: Duration, every interval: Duration = .milliseconds(25), _ condition: () -> Bool
    ) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if condition() { return true }
            if ContinuousClock.now >= deadline { return false }
            try await Task.sleep(for: interval)
        }
    }
}

/// Files and folders the tests of plugins need besides the configuration.
public enum TestFiles {
    /// `Tests/Fixtures/NAME`, found from this source file.
    public static func fixture(_ name: String, filePath: String = #filePath) -> String {
        let testsFolder = URL(fileURLWithPath: filePath).deletingLastPathComponent().deletingLastPathComponent()
        return testsFolder.appendingPathComponent("Fixtures").appendingPathComponent(name).path
    }

    /// A fresh folder for a test's files; the caller removes it (`defer`).
    public static func makeDirectory() throws -> String {
        try HammockProcess.makeTemporaryDirectory()
    }

    /// Writes `text` in place (open with truncation, write): the same inode, as `echo > file` does. No `fsync`
    /// (Foundation's writes sync every file: a wait for the disk, in a test's task on the cooperative pool).
    public static func writeInPlace(_ text: String, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, bytes.count - offset) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            offset += written
        }
    }

    /// Writes `text` to a temporary file beside `path`, then renames it over `path`: an editor's atomic save.
    public static func replaceAtomically(_ text: String, at path: String) throws {
        let temporary = (path as NSString).deletingLastPathComponent + "/." + UUID().uuidString + ".tmp"
        try writeInPlace(text, to: temporary)
        guard rename(temporary, path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// A YAML double-quoted string holding `text`.
    public static func yamlQuoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
