import CHammockSystem
import Foundation

/// Ends the commands that a plugin left behind when it died.
///
/// Plugins run their commands in process groups of their own (so a timeout can end a command with all it
/// spawned). A plugin that exits cleanly ends them itself, but one killed from outside cannot: its commands
/// would be re-parented to init and outlive hammock. So hammock makes itself a *child subreaper*: orphans of
/// its descendants are re-parented to hammock instead, and after a plugin dies hammock ends every child that
/// is not one of its plugins, and reaps it.
enum OrphanReaper {
    /// Call once, early.
    static func becomeSubreaper() {
        _ = hammock_become_child_subreaper()
    }

    /// Kills (with their process groups) and reaps hammock's children that are not live plugins.
    ///
    /// Also reaps the orphans that died by themselves (a command's background child killed with its group
    /// after the command had exited): as their subreaper, hammock must, or they stay zombies. The engine
    /// calls it when a plugin dies, every few seconds, and at exit.
    static func sweep() {
        let me = getpid()
        let myGroup = getpgrp()
        let plugins = LivePlugins.shared.snapshot()
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return }
        var orphans: [pid_t] = []
        for entry in entries {
            guard let pid = pid_t(entry), pid != me, !plugins.pids.contains(pid),
                let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let closing = stat.lastIndex(of: ")")
            else { continue }
            // Fields after the command name: state, ppid, pgrp, ...
            let fields = stat[stat.index(after: closing)...].split(separator: " ")
            guard fields.count > 2, pid_t(fields[1]) == me else { continue }
            if fields[0] == "Z" {
                var status: Int32 = 0
                _ = waitpid(pid, &status, WNOHANG)
                continue
            }
            // A plugin started a moment ago may not have registered its pid yet: know it by its argv.
            if let argv = commandLine(of: pid), plugins.commands.contains(where: { sameCommand($0, argv) }) { continue }
            if let group = pid_t(fields[2]), group != myGroup, group > 1 { kill(-group, SIGKILL) }
            kill(pid, SIGKILL)
            orphans.append(pid)
        }
        // Reap exactly these pids: a blanket wait would steal the exit status of a plugin process.
        for pid in orphans {
            var status: Int32 = 0
            for _ in 0..<100 where waitpid(pid, &status, WNOHANG) == 0 { usleep(10_000) }
        }
    }

    private static func commandLine(of pid: pid_t) -> [String]? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"), !data.isEmpty else { return nil }
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The same program (by file name, as PATH lookup may have made it absolute) with the same arguments.
    private static func sameCommand(_ command: [String], _ argv: [String]) -> Bool {
        guard let program = command.first, let running = argv.first else { return false }
        return (running as NSString).lastPathComponent == (program as NSString).lastPathComponent
            && Array(argv.dropFirst()) == Array(command.dropFirst())
    }
}

/// The plugin processes running now, across all kinds: the one thing the orphan sweep must never touch.
final class LivePlugins: @unchecked Sendable {
    static let shared = LivePlugins()
    private let lock = NSLock()
    private var pids: Set<pid_t> = []
    private var commands: [[String]] = []

    func started(_ pid: pid_t) { lock.withLock { _ = pids.insert(pid) } }
    func ended(_ pid: pid_t) { lock.withLock { _ = pids.remove(pid) } }
    func launching(_ command: [String]) { lock.withLock { commands.append(command) } }

    func snapshot() -> (pids: Set<pid_t>, commands: [[String]]) { lock.withLock { (pids, commands) } }
}
