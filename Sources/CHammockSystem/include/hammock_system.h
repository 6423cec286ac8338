#ifndef HAMMOCK_SYSTEM_H
#define HAMMOCK_SYSTEM_H

#include <sys/types.h>

/// Makes the calling process a child subreaper (prctl PR_SET_CHILD_SUBREAPER): orphaned descendants are
/// re-parented to it instead of init. prctl is variadic, which Swift cannot call directly. Returns 0 on success.
int hammock_become_child_subreaper(void);

/// Waits at most `timeout_ms` for the child `pid` to end, and reaps it. Returns 1 when it was reaped, 0 when
/// it still runs at the timeout, -1 with errno set (ECHILD: not a child of this process). The wait is on a
/// pidfd (Linux 5.3 and later), which the kernel makes readable at the exit: nothing polls. A kernel
/// without pidfd gets one look, no wait.
int hammock_reap_child_within(pid_t pid, int timeout_ms);

/// Asks the kernel to say when `parent` stops being this process's parent (it died, and this process was
/// re-parented), with nothing polling. Returns a descriptor that becomes readable then, or -1 with errno set.
/// Call it once.
///
/// The kernel's parent-death signal (prctl PR_SET_PDEATHSIG) has two traps, both about threads:
/// - the request belongs to the thread that makes it and is forgotten when that thread ends; so a thread made
///   here, which never ends, makes it (not a thread of a pool that may end when idle).
/// - the signal comes when the parent's *thread* that forked this process ends, though the parent lives on
///   (as when it spawns from a pool thread). So the signal is SIGRTMIN, not SIGTERM, and its handler reports
///   only a real change of parent (getppid() is no longer `parent`).
///
/// A parent that died before this call sends no signal: compare getppid() with `parent` after it. SIGRTMIN is
/// this call's from then on: nothing else in the process may use it.
int hammock_watch_parent(pid_t parent);

/// Hands the memory glibc keeps from freed allocations back to the system (malloc_trim(0), which Swift's Glibc
/// module does not declare). Returns 1 when some was given back.
int hammock_release_free_memory(void);

/// The argument that turns an executable linking this library into a plugin's *guard*:
/// `EXE --hammock-plugin-guard PATH ARGV0 ARGS...` runs PATH with ARGV0 ARGS... as its only child, and the
/// guard ends everything below it when the plugin exits, when the engine that started the guard dies (even
/// by SIGKILL), or on SIGUSR1 (at once, by SIGKILL). hammock starts every plugin this way, through its own
/// executable (/proc/self/exe), so that no process it started can outlive it:
/// - the guard is a child subreaper, so whatever the plugin starts stays below the guard however it
///   detaches (setsid, a double fork): an orphan comes to the guard, not to init;
/// - it asks for a parent-death signal from a thread that lives as long as it does (it has one), and checks
///   that its parent is still the engine (HAMMOCK_ENGINE_PID) after asking, so an engine that died before
///   it asked is noticed too;
/// - the plugin gets SIGKILL as its own parent-death signal, so it never outlives its guard; and it finds
///   the guard's pid in HAMMOCK_ENGINE_PID, its parent, which it must stay the child of.
/// On the engine's death the plugin gets SIGTERM, then SIGKILL after 2 s; every other process below the
/// guard gets SIGKILL, with its process group. While the plugin runs, orphans that reach the guard are
/// ended every 2 s, as hammock's own sweep ends those that reach hammock. The guard exits as its plugin
/// did (same status, or killed by the same signal). SIGTERM, SIGINT, SIGHUP and SIGQUIT are passed on to
/// the plugin.
///
/// The guard runs from a constructor, before the program's own main: the program needs no code for it.
#define HAMMOCK_GUARD_FLAG "--hammock-plugin-guard"

/// The size of the terminal on `fd` (ioctl TIOCGWINSZ, which Swift cannot call: ioctl is variadic). Returns 0
/// and sets `columns` and `rows`, or -1 when `fd` is not a terminal or the size is unknown (zero).
int hammock_terminal_size(int fd, int *columns, int *rows);

#endif
