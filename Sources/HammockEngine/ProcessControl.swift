import CHammockSystem
import Glibc

// The engine's one place for signalling processes and waiting for their end: the plugin host's kill and
// the orphan sweep both come here. (The shell plugin keeps its own copy in plugins/shell/ProcessGroup.swift,
// which could use `ProcessStat` and `reapChild` once they sit in a target both can import.)

/// Ends a plugin started by `ProcessTransport` now: its guard kills it and everything below it, then exits
/// as killed by SIGKILL. `guardID` is the guard's pid.
func endGuardedPlugin(_ guardID: pid_t) {
    guard guardID > 0 else { return }
    kill(guardID, SIGUSR1)
}

/// SIGKILL to the guard's process group (the guard, its plugin and what stayed in their group): for a guard
/// that did not end in time, which leaves any orphans to hammock's sweep.
func killGuardGroup(_ guardID: pid_t) {
    guard guardID > 0 else { return }
    killProcessGroup(guardID)
    kill(guardID, SIGKILL)
}

/// SIGKILL to every process of group `groupID`; never to hammock's own group, nor to a group of 0 or 1.
func killProcessGroup(_ groupID: pid_t) {
    guard groupID > 1, groupID != getpgrp() else { return }
    kill(-groupID, SIGKILL)
}

/// Waits at most `timeout` for the child `pid` to end, and reaps it; true when it was reaped. The kernel
/// says when it ends (a pidfd): nothing polls. Never a blanket wait, which would steal a guard's status.
@discardableResult
func reapChild(_ pid: pid_t, within timeout: Duration) -> Bool {
    let (seconds, attoseconds) = timeout.components
    let milliseconds = max(0, Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    return hammock_reap_child_within(pid, milliseconds) == 1
}

/// The fields of `/proc/PID/stat` that hammock reads.
struct ProcessStat: Equatable {
    /// R, S, D, Z, ...
    var state: Character
    var parent: pid_t
    var group: pid_t
    /// When it started, in clock ticks since boot.
    var startTime: UInt64

    init?(pid: pid_t) {
        let descriptor = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        self.init(Array(buffer[..<count]))
    }

    /// Parses the text of `/proc/PID/stat`.
    init?(_ bytes: [UInt8]) {
        // The command name (field 2) may hold spaces and parentheses; the fields after the last `)` do not.
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After it: state (3), ppid (4), pgrp (5), ..., starttime (22).
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
        guard fields.count > 19, let state = fields[0].first, let parent = pid_t(fields[1]), let group = pid_t(fields[2]),
            let startTime = UInt64(fields[19])
        else { return nil }
        (self.state, self.parent, self.group, self.startTime) = (state, parent, group, startTime)
    }
}
