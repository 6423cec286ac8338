#ifndef HAMMOCK_SYSTEM_H
#define HAMMOCK_SYSTEM_H

#include <sys/types.h>

/// Makes the calling process a child subreaper (prctl PR_SET_CHILD_SUBREAPER): orphaned descendants are
/// re-parented to it instead of init. prctl is variadic, which Swift cannot call directly. Returns 0 on success.
int hammock_become_child_subreaper(void);

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

#endif
