#define _GNU_SOURCE
#include <malloc.h>
#include "hammock_system.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <unistd.h>

int hammock_release_free_memory(void) { return malloc_trim(0); }

int hammock_become_child_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

int hammock_reap_child_within(pid_t pid, int timeout_ms) {
    int status;
    pid_t reaped = waitpid(pid, &status, WNOHANG);
    if (reaped != 0) return reaped == pid ? 1 : -1;
    // syscall, not glibc's pidfd_open: that one is only in glibc 2.36 and later.
    int descriptor = (int)syscall(SYS_pidfd_open, pid, 0);
    if (descriptor >= 0) {
        struct pollfd exit_event = {.fd = descriptor, .events = POLLIN};
        while (poll(&exit_event, 1, timeout_ms) < 0 && errno == EINTR) {
        }
        close(descriptor);
    }
    reaped = waitpid(pid, &status, WNOHANG);
    return reaped == pid ? 1 : (reaped == 0 ? 0 : -1);
}

// MARK: - The parent's death

static volatile sig_atomic_t watched_parent;
static volatile sig_atomic_t death_notice = -1;

static void parent_death_signalled(int signal) {
    (void)signal;
    int saved = errno;
    // Only async-signal-safe calls here. The same parent means one of its threads ended: nothing to report.
    if (getppid() != (pid_t)watched_parent && death_notice >= 0) {
        ssize_t written = write(death_notice, "x", 1);
        (void)written;  // a full pipe already holds the news
    }
    errno = saved;
}

struct arming {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int finished;
    int result;
    int error;
};

static void *hold_parent_death_signal(void *context) {
    struct arming *arming = context;
    // The kernel sends the parent-death signal to the thread that asked for it when that thread does not
    // block it, so this thread takes it whatever the others block; it takes no other signal.
    sigset_t others;
    sigfillset(&others);
    sigdelset(&others, SIGRTMIN);
    pthread_sigmask(SIG_SETMASK, &others, NULL);
    int result = prctl(PR_SET_PDEATHSIG, SIGRTMIN, 0, 0, 0);
    pthread_mutex_lock(&arming->lock);
    arming->result = result;
    arming->error = errno;
    arming->finished = 1;
    pthread_cond_signal(&arming->done);
    pthread_mutex_unlock(&arming->lock);
    // The request lives as long as this thread: wait forever, waking only for that signal.
    for (;;) pause();
    return NULL;
}

/// Starts the thread that asks for the parent-death signal and waits until it has. 0, or -1 with errno.
static int arm_parent_death_signal(void) {
    struct arming arming = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, 64 * 1024);  // it only waits
    pthread_t thread;
    int created = pthread_create(&thread, &attributes, hold_parent_death_signal, &arming);
    pthread_attr_destroy(&attributes);
    if (created != 0) {
        errno = created;
        return -1;
    }
    pthread_mutex_lock(&arming.lock);
    while (!arming.finished) pthread_cond_wait(&arming.done, &arming.lock);
    pthread_mutex_unlock(&arming.lock);
    if (arming.result != 0) {
        errno = arming.error;
        return -1;  // the thread waits on, harmless: no signal will come
    }
    return 0;
}

int hammock_watch_parent(pid_t parent) {
    int notice[2];
    if (pipe2(notice, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    watched_parent = parent;
    death_notice = notice[1];
    struct sigaction action, previous;
    memset(&action, 0, sizeof action);
    action.sa_handler = parent_death_signalled;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    int installed = sigaction(SIGRTMIN, &action, &previous) == 0;
    if (installed && arm_parent_death_signal() == 0) return notice[0];
    int error = errno;
    if (installed) sigaction(SIGRTMIN, &previous, NULL);
    death_notice = -1;
    close(notice[0]);
    close(notice[1]);
    errno = error;
    return -1;
}

int hammock_name_thread(const char *name) { return prctl(PR_SET_NAME, name, 0, 0, 0); }

int hammock_terminal_size(int fd, int *columns, int *rows) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0 || size.ws_row == 0) return -1;
    *columns = size.ws_col;
    *rows = size.ws_row;
    return 0;
}

// MARK: - Commands

int hammock_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int stdin_fd,
                  int stdout_fd, int stderr_fd, int new_session, pid_t *pid, int *pidfd) {
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_t actions;
    int error = posix_spawnattr_init(&attributes);
    if (error != 0) return error;
    error = posix_spawn_file_actions_init(&actions);
    if (error != 0) {
        posix_spawnattr_destroy(&attributes);
        return error;
    }
    // The parent ignores SIGPIPE and SIGINT, which a child would otherwise inherit; exec resets only caught ones.
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    short grouping = new_session ? POSIX_SPAWN_SETSID : POSIX_SPAWN_SETPGROUP;
    error = posix_spawnattr_setflags(&attributes, grouping | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    if (error == 0 && !new_session) error = posix_spawnattr_setpgroup(&attributes, 0);
    if (error == 0) error = posix_spawnattr_setsigdefault(&attributes, &all);
    if (error == 0) error = posix_spawnattr_setsigmask(&attributes, &none);
    if (error == 0) {
        error = stdin_fd < 0 ? posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
                             : posix_spawn_file_actions_adddup2(&actions, stdin_fd, STDIN_FILENO);
    }
    if (error == 0) {
        error = stdout_fd < 0 ? posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
                              : posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
    }
    if (error == 0) error = posix_spawn_file_actions_adddup2(&actions, stderr_fd, STDERR_FILENO);
    if (error == 0 && directory != NULL) error = posix_spawn_file_actions_addchdir_np(&actions, directory);
    // hammock opens its own descriptors close-on-exec, but a library it links may not.
    if (error == 0) error = posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
    if (error == 0) error = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (error != 0 || pidfd == NULL) return error;
    // syscall, not glibc's pidfd_open (2.36 and later). Only the caller reaps its children (the engine's orphan
    // sweep spares a spawn in flight), so the child is still there to be opened even if it has already ended.
    *pidfd = (int)syscall(SYS_pidfd_open, *pid, 0);
    if (*pidfd < 0) {
        error = errno;
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        return error;
    }
    return 0;
}

int hammock_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int hammock_pipe_buffered(int fd) {
    int count = 0;
    return ioctl(fd, FIONREAD, &count) == 0 ? count : -1;
}

int hammock_command_pipe(int fds[2]) {
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    // O_NONBLOCK belongs to each end's open file description: the command's end stays blocking.
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
        int error = errno;
        close(fds[0]);
        close(fds[1]);
        errno = error;
        return -1;
    }
    return 0;
}

int hammock_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int hammock_epoll_watch(int epoll, int fd, uint64_t token) {
    struct epoll_event event = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u64 = token};
    return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
}

int hammock_epoll_forget(int epoll, int fd) { return epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL); }

int hammock_epoll_wait(int epoll, uint64_t *tokens, int capacity, int timeout_ms) {
    struct epoll_event events[64];
    if (capacity > 64) capacity = 64;
    int count;
    while ((count = epoll_wait(epoll, events, capacity, timeout_ms)) < 0 && errno == EINTR) {
    }
    for (int index = 0; index < count; index++) tokens[index] = events[index].data.u64;
    return count;
}

int hammock_event_create(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

void hammock_event_post(int fd) {
    uint64_t one = 1;
    ssize_t written = write(fd, &one, sizeof one);
    (void)written;  // only a counter at its maximum refuses, and it is readable then anyway
}

void hammock_event_clear(int fd) {
    uint64_t count;
    ssize_t got = read(fd, &count, sizeof count);
    (void)got;  // EAGAIN: already clear
}

int hammock_reap(int pidfd, int *signaled, int *code) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    // P_PIDFD by number (Linux 5.4): glibc names it only from 2.36.
    if (waitid((idtype_t)3, (id_t)pidfd, &info, WEXITED | WNOHANG) != 0) return -1;
    if (info.si_pid == 0) return 0;
    *signaled = info.si_code == CLD_EXITED ? 0 : 1;
    *code = info.si_status;
    return 1;
}

// MARK: - Unix sockets

int hammock_peer_credentials(int fd, int32_t *pid, uint32_t *uid, uint32_t *gid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

int hammock_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC); }

int hammock_socket_unsent(int fd) {
    int count = 0;
    return ioctl(fd, SIOCOUTQ, &count) == 0 ? count : -1;
}

int hammock_fix_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

int hammock_limit_malloc_arenas(int count) {
    return mallopt(M_ARENA_MAX, count);
}
