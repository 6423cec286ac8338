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

/// Names the calling thread (prctl PR_SET_NAME: the kernel keeps the first 15 bytes), as ps and /proc show
/// it. prctl is variadic, and Swift's Glibc does not declare pthread_setname_np. Returns 0 on success.
int hammock_name_thread(const char *name);

/// The size of the terminal on `fd` (ioctl TIOCGWINSZ, which Swift cannot call: ioctl is variadic). Returns 0
/// and sets `columns` and `rows`, or -1 when `fd` is not a terminal or the size is unknown (zero).
int hammock_terminal_size(int fd, int *columns, int *rows);

#endif
