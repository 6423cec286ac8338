#ifndef HAMMOCK_SYSTEM_H
#define HAMMOCK_SYSTEM_H

#include <stdint.h>
#include <sys/types.h>

/// Makes the calling process a child subreaper (prctl PR_SET_CHILD_SUBREAPER): orphaned descendants are
/// re-parented to it instead of init. prctl is variadic, which Swift cannot call directly. Returns 0 on success.
int hammock_become_child_subreaper(void);

/// Fixes glibc's mmap threshold at `bytes` (mallopt M_MMAP_THRESHOLD, from <malloc.h>, which Swift's Glibc
/// module does not bring in): blocks that large are mapped on their own and given back when freed. Returns
/// mallopt's answer: 1 on success.
int hammock_fix_mmap_threshold(int bytes);

/// Caps how many malloc arenas glibc makes (mallopt M_ARENA_MAX; glibc's own cap is 8 per core). Returns
/// mallopt's answer: 1 on success.
int hammock_limit_malloc_arenas(int count);

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

/// Starts `path` with `argv` and `envp`, the one way hammock starts a process (a plugin's guard, a command of
/// the shell plugin, the client's engine: `ChildProcess`; the `serve` that `hammock attach` starts:
/// `DetachedProcess`, both in HammockSystem). In a process group of its own, or with `new_session` in a session
/// of its own (POSIX_SPAWN_SETSID: no terminal's or caller's process-group signal reaches it). stdin is
/// `stdin_fd`, stdout `stdout_fd`, each /dev/null when negative; stderr is `stderr_fd`; every other descriptor
/// is closed, every signal has its default action and none is blocked, and the working directory is
/// `directory` when it is not NULL. posix_spawn, which glibc runs as a vfork: the parent's memory is not
/// copied, which a fork of a process holding the Swift runtime costs (about a third of a short command's CPU).
/// Returns 0 and sets `pid` and, when `pidfd` is not NULL, `*pidfd` (a descriptor that becomes readable when
/// the process ends, see `hammock_reap`), or an errno value: the exec's or the chdir's, which glibc brings back
/// from the child.
int hammock_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int stdin_fd,
                  int stdout_fd, int stderr_fd, int new_session, pid_t *pid, int *pidfd);

/// A pipe for a command's stdout or stderr: both ends close-on-exec, the read end (`fds[0]`, the plugin's)
/// non-blocking, the write end blocking, as a program expects of its output. 0, or -1 with errno set.
int hammock_command_pipe(int fds[2]);

/// A pipe with both ends close-on-exec and both blocking (pipe2(O_CLOEXEC), which Swift's Glibc module leaves
/// out): made in one call, so that a process spawned meanwhile by another thread cannot inherit an end. 0, or -1
/// with errno set.
int hammock_pipe(int fds[2]);

/// How many bytes wait to be read in the pipe `fd` (ioctl FIONREAD, which Swift cannot call: ioctl is
/// variadic), or -1 with errno set.
int hammock_pipe_buffered(int fd);

/// epoll, which Swift's Glibc module leaves out. `hammock_epoll_watch` registers `fd` edge-triggered for input
/// and hang-up with `token` as its data; `hammock_epoll_wait` blocks until some are ready or `timeout_ms` has
/// passed (-1: no limit) and writes their tokens (at most `capacity`; 0 when the time ran out), retrying on
/// EINTR. Each returns -1 with errno set on failure.
int hammock_epoll_create(void);
int hammock_epoll_watch(int epoll, int fd, uint64_t token);
int hammock_epoll_forget(int epoll, int fd);
int hammock_epoll_wait(int epoll, uint64_t *tokens, int capacity, int timeout_ms);

/// An eventfd (close-on-exec, non-blocking) for waking a thread blocked in `hammock_epoll_wait`: `hammock_event_post`
/// makes it readable, `hammock_event_clear` reads it empty again. -1 with errno set on failure.
int hammock_event_create(void);
void hammock_event_post(int fd);
void hammock_event_clear(int fd);

/// Reaps the child behind `pidfd` if it has ended. Returns 1 and sets `signaled` (0: it exited with `code`;
/// 1: signal `code` ended it), 0 while it runs, or -1 with errno set.
int hammock_reap(int pidfd, int *signaled, int *code);

/// The peer of the connected Unix socket `fd`, as the kernel recorded it at connect (getsockopt SO_PEERCRED,
/// whose `struct ucred` Swift's Glibc leaves out: it is behind _GNU_SOURCE). 0, or -1 with errno set.
int hammock_peer_credentials(int fd, int32_t *pid, uint32_t *uid, uint32_t *gid);

/// Accepts a connection on the listening socket `fd` (accept4 with SOCK_CLOEXEC, which Swift's Glibc leaves
/// out): the new descriptor is close-on-exec from its first moment, so that a process another thread spawns
/// meanwhile cannot inherit it, and blocking whatever `fd` is. The descriptor, or -1 with errno set.
int hammock_accept(int fd);

/// How many bytes the socket `fd` has sent that its peer has not read (ioctl SIOCOUTQ, which Swift cannot call:
/// ioctl is variadic; for AF_UNIX the kernel counts the queued buffers' memory), or -1 with errno set.
int hammock_socket_unsent(int fd);

#endif
