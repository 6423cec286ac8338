import CHammockSystem
import Glibc

// The engine's one place for signalling processes and waiting for their end: the plugin host's kill and
// the orphan sweep both come here. What a process is (`ProcessStat`) is read by HammockSystem's one parser.

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
