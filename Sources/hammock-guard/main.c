// hammock-guard: the process every plugin runs below.
//
// `hammock-guard PATH ARGV0 ARGS...` runs PATH with ARGV0 ARGS... as its only child, and ends everything
// below it when the plugin exits, when the engine that started the guard dies (even by SIGKILL), or on
// SIGUSR1 (at once, by SIGKILL). hammock starts every plugin this way (it finds this program beside its own
// executable), so that no process it started can outlive it:
// - the guard is a child subreaper, so whatever the plugin starts stays below the guard however it
//   detaches (setsid, a double fork): an orphan comes to the guard, not to init;
// - it asks for a parent-death signal (it has one thread, which lives as long as it does), and checks that
//   its parent is still the engine (HAMMOCK_ENGINE_PID) after asking, so an engine that died before it
//   asked is noticed too;
// - the plugin gets SIGKILL as its own parent-death signal, so it never outlives its guard; and it finds
//   the guard's pid in HAMMOCK_ENGINE_PID, its parent, which it must stay the child of.
// On the engine's death the plugin gets SIGTERM, then SIGKILL after 2 s; every other process below the
// guard gets SIGKILL, with its process group. While the plugin runs, orphans that reach the guard are ended
// every 2 s, as hammock's own sweep ends those that reach hammock. The guard exits as its plugin did (same
// status, or killed by the same signal). SIGTERM, SIGINT, SIGHUP and SIGQUIT are passed on to the plugin.
//
// It is C with libc alone, not Swift: one runs per plugin, and loading the Swift runtime and Foundation
// cost each guard about 3.5 MiB and milliseconds of start.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/// The plugin: the guard's one child that is not an orphan.
static pid_t guard_plugin = -1;
static int guard_plugin_running = 0;
static int guard_plugin_status = 0;
/// The engine's process group, which a descendant could join (it is in the same session): never killed.
static pid_t guard_engine_group = -1;

static const long guard_sweep_seconds = 2;
static const long guard_grace_seconds = 2;

static long long guard_now_milliseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/// Writes the pieces to stderr, up to a NULL, with write(2) alone: the plugin's side of the fork calls it.
static void guard_say(const char *first, ...) __attribute__((sentinel));
static void guard_say(const char *first, ...) {
    va_list pieces;
    va_start(pieces, first);
    for (const char *piece = first; piece != NULL; piece = va_arg(pieces, const char *)) {
        ssize_t written = write(STDERR_FILENO, piece, strlen(piece));
        (void)written;  // nobody to tell if stderr is gone
    }
    va_end(pieces);
}

static void guard_note_exit(pid_t pid, int status) {
    if (pid == guard_plugin) {
        guard_plugin_running = 0;
        guard_plugin_status = status;
    }
}

/// Reaps every child that has ended: the plugin, and orphans that ended by themselves.
static void guard_reap(void) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) guard_note_exit(pid, status);
}

/// The guard's children now (the plugin and the orphans it was given), up to `capacity`.
static int guard_children(pid_t *children, int capacity) {
    pid_t me = getpid();
    DIR *proc = opendir("/proc");
    if (proc == NULL) return 0;
    int count = 0;
    struct dirent *entry;
    while (count < capacity && (entry = readdir(proc)) != NULL) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
        char path[sizeof entry->d_name + 16];
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        int descriptor = open(path, O_RDONLY | O_CLOEXEC);
        if (descriptor < 0) continue;
        char text[512];
        ssize_t length = read(descriptor, text, sizeof text - 1);
        close(descriptor);
        if (length <= 0) continue;
        text[length] = 0;
        // The command (field 2) may hold spaces and parentheses; the fields after its last `)` do not.
        char *close_paren = strrchr(text, ')');
        char state;
        int parent;
        if (close_paren == NULL || sscanf(close_paren + 1, " %c %d", &state, &parent) != 2) continue;
        if (parent == me) children[count++] = (pid_t)strtol(entry->d_name, NULL, 10);
    }
    closedir(proc);
    return count;
}

/// SIGKILL to `pid`, and to its process group when that is one of the commands' own (not the guard's,
/// which holds the guard, nor the engine's).
static void guard_kill(pid_t pid) {
    pid_t group = getpgid(pid);
    if (group > 1 && group != getpgrp() && group != guard_engine_group) killpg(group, SIGKILL);
    kill(pid, SIGKILL);
}

/// Waits up to a second for a killed child to be reaped; by then its own children are the guard's.
static void guard_wait_for(pid_t pid) {
    for (int attempt = 0; attempt < 200; attempt++) {
        int status;
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) {
            guard_note_exit(pid, status);
            return;
        }
        if (done < 0) return;  // reaped already
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

/// Kills every child (the plugin too, when `plugin_too`) and what they leave, round after round, until
/// none is left: each one killed hands its own children to the guard.
static void guard_sweep(int plugin_too) {
    pid_t children[256];
    for (int round = 0; round < 64; round++) {
        guard_reap();
        int found = guard_children(children, 256);
        int killed = 0;
        for (int index = 0; index < found; index++) {
            if (!plugin_too && children[index] == guard_plugin && guard_plugin_running) continue;
            guard_kill(children[index]);
            children[killed++] = children[index];
        }
        if (killed == 0) return;
        for (int index = 0; index < killed; index++) guard_wait_for(children[index]);
    }
}

/// Waits for the next signal of `set`, up to `milliseconds`; the signal, or -1 on a timeout.
static int guard_wait_signal(const sigset_t *set, long long milliseconds) {
    if (milliseconds < 0) milliseconds = 0;
    struct timespec timeout = {(time_t)(milliseconds / 1000), (long)(milliseconds % 1000) * 1000000};
    for (;;) {
        int number = sigtimedwait(set, NULL, &timeout);
        if (number >= 0 || errno != EINTR) return number;
    }
}

/// Exits as the plugin did: its status, or killed by its signal.
#ifdef HAMMOCK_TEST_SEAMS
/// Debug builds only (Package.swift defines HAMMOCK_TEST_SEAMS for them): stops the guard with SIGSTOP at
/// the moment named by HAMMOCK_TEST_GUARD_STOP_AT (`start`: before it reads its parent; `death-signal`:
/// before it asks for the parent-death signal), so a test can kill the engine inside a window of
/// microseconds, continue the guard and see that its checks notice (`GuardTests`).
static void guard_test_stop(const char *moment) {
    const char *wanted = getenv("HAMMOCK_TEST_GUARD_STOP_AT");
    if (wanted != NULL && strcmp(wanted, moment) == 0) raise(SIGSTOP);
}
#else
static void guard_test_stop(const char *moment) { (void)moment; }
#endif

static int guard_exit_like_plugin(void) {
    int status = guard_plugin_status;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (!WIFSIGNALED(status)) return 1;
    int number = WTERMSIG(status);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);  // the plugin's crash is the plugin's, not a guard's core dump
    signal(number, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, number);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    kill(getpid(), number);
    return 128 + number;
}

static int guard_run(const char *path, char *const arguments[]) {
    prctl(PR_SET_NAME, "hammock-guard", 0, 0, 0);
    guard_test_stop("start");
    pid_t parent = getppid();
    const char *engine = getenv("HAMMOCK_ENGINE_PID");
    // Re-parented already: the engine died between starting the guard and now.
    if (engine != NULL && (pid_t)strtol(engine, NULL, 10) != parent) return 1;
    guard_engine_group = getpgid(parent);

    // Every signal the guard acts on is taken by sigtimedwait, so nothing runs in a handler. SIGCHLD must
    // not be ignored (an ignored SIGCHLD reaps by itself, and the plugin's status would be lost).
    struct sigaction default_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &default_action, NULL);
    int death_signal = SIGRTMIN;
    sigset_t handled, original;
    sigemptyset(&handled);
    int taken[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, death_signal};
    for (size_t index = 0; index < sizeof taken / sizeof taken[0]; index++) sigaddset(&handled, taken[index]);
    sigprocmask(SIG_BLOCK, &handled, &original);

    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    guard_test_stop("death-signal");
    prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0);
    if (getppid() != parent) return 1;  // the engine died before the signal was asked for

    // The plugin's parent is the guard, not the engine: a plugin that checks its parent against
    // HAMMOCK_ENGINE_PID, as docs/plugin-protocol.md asks, must find the guard there. The guard lives as long
    // as the engine does, and the plugin dies with it.
    pid_t guard = getpid();
    char guard_text[24];
    snprintf(guard_text, sizeof guard_text, "%d", (int)guard);
    setenv("HAMMOCK_ENGINE_PID", guard_text, 1);
    guard_plugin = fork();
    if (guard_plugin == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != guard) _exit(1);
        sigprocmask(SIG_SETMASK, &original, NULL);
        execv(path, arguments);
        guard_say("hammock: cannot run ", path, ": ", strerror(errno), "\n", NULL);
        _exit(127);
    }
    if (guard_plugin < 0) {
        guard_say("hammock: cannot start a plugin process: ", strerror(errno), "\n", NULL);
        return 126;
    }
    guard_plugin_running = 1;
    // The plugin's stdin, stdout and stderr are its own: hammock learns of its end when they close.
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        if (null > STDERR_FILENO) close(null);
    }

    int engine_gone = 0;
    long long next_sweep = guard_now_milliseconds() + guard_sweep_seconds * 1000;
    while (guard_plugin_running && !engine_gone) {
        int number = guard_wait_signal(&handled, next_sweep - guard_now_milliseconds());
        if (number == SIGCHLD) {
            guard_reap();
        } else if (number == death_signal) {
            // Also sent when the engine's thread that started the guard ends: only a new parent counts.
            if (getppid() != parent) engine_gone = 1;
        } else if (number == SIGUSR1) {
            kill(guard_plugin, SIGKILL);
        } else if (number > 0) {
            kill(guard_plugin, number);
        }
        if (guard_now_milliseconds() >= next_sweep) {
            guard_sweep(0);
            next_sweep = guard_now_milliseconds() + guard_sweep_seconds * 1000;
        }
    }
    if (engine_gone) {
        // A plugin may end its commands itself (a HammockPluginKit plugin does); what is left then is killed.
        kill(guard_plugin, SIGTERM);
        long long deadline = guard_now_milliseconds() + guard_grace_seconds * 1000;
        sigset_t children;
        sigemptyset(&children);
        sigaddset(&children, SIGCHLD);
        guard_reap();
        while (guard_plugin_running && guard_now_milliseconds() < deadline) {
            if (guard_wait_signal(&children, deadline - guard_now_milliseconds()) == SIGCHLD) guard_reap();
        }
        guard_sweep(1);
        return 0;
    }
    guard_sweep(1);
    return guard_exit_like_plugin();
}

int main(int argc, char **argv) {
    if (argc < 3) {
        guard_say("usage: hammock-guard PATH ARGV0 [ARGS...]\n",
                  "hammock starts it to run a plugin; it is not meant to be run by hand.\n", NULL);
        return 2;
    }
    return guard_run(argv[1], argv + 2);
}
