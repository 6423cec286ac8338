// hammock-relay: what `hammock attach` becomes once it is connected to the shared engine.
//
// `hammock-relay FD ENGINE_PID json|bar [CONFIG]` copies the connection on descriptor FD (the engine's socket, its
// handshake done by `hammock attach`, which then execs this program) to stdout, whole lines at a time, and
// stdin to the connection (control lines, or i3bar's clicks), until the engine closes the connection or
// stdout closes. It is what a bar keeps running for as long as it runs, one per bar: C with libc alone, so
// that each costs a few hundred KiB rather than a Swift process's 4.8 MiB (docs/protocol.md, "The shared
// engine"; benchmarks/README.md, the shared engine's memory).
//
// Exit status: 0 once stdout is closed, or when the engine ends the connection after a `bye` line (json);
// 1 when the connection ends without one (a bar format carries no bye: 1 when the engine goes). SIGTERM and
// SIGINT exit 0 at once: the engine goes on for its other clients. SIGUSR1 and SIGUSR2 go on to ENGINE_PID
// (a bar's click, `kill -USR1 %pid%`), as `hammock run` takes them. The end of stdin is not a reason to
// stop: a consumer may only read. A control line that the engine does not take at once waits here, and
// stdin is not read meanwhile, so a consumer that floods is slowed, never buffered without bound.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { chunk_size = 64 * 1024 };

static volatile sig_atomic_t relay_engine = 0;

static void relay_forward(int number) {
    int saved = errno;
    if (relay_engine > 0) kill((pid_t)relay_engine, number);
    errno = saved;
}

static void relay_stop(int number) {
    (void)number;
    _exit(0);
}

/// Writes all of `bytes` to stdout; 0 once stdout is closed. A stdout that someone made non-blocking (it
/// may share its open file with the bar's other writers) is waited for in `poll`, as hammock's own writes do.
static int relay_write_stdout(const char *bytes, size_t count) {
    while (count > 0) {
        ssize_t written = write(STDOUT_FILENO, bytes, count);
        if (written < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                struct pollfd room = {.fd = STDOUT_FILENO, .events = POLLOUT};
                if (poll(&room, 1, -1) < 0 && errno != EINTR) return 0;
                if (room.revents & (POLLERR | POLLHUP)) return 0;
                continue;
            }
            return 0;
        }
        bytes += written;
        count -= (size_t)written;
    }
    return 1;
}

static void relay_catch(int number, void (*handler)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(number, &action, NULL);
}

int main(int argc, char **argv) {
    // A fifth argument, the configuration, is there for `ps` and `pgrep` alone.
    if ((argc != 4 && argc != 5) || (strcmp(argv[3], "json") != 0 && strcmp(argv[3], "bar") != 0)) {
        fprintf(stderr, "hammock-relay: usage: hammock-relay FD ENGINE_PID json|bar [CONFIG] (hammock attach runs it)\n");
        return 2;
    }
    int connection = atoi(argv[1]);
    relay_engine = (sig_atomic_t)atol(argv[2]);
    int json = strcmp(argv[3], "json") == 0;
    if (connection < 3 || fcntl(connection, F_GETFD) < 0) {
        fprintf(stderr, "hammock-relay: %s is not an open descriptor\n", argv[1]);
        return 2;
    }
    fcntl(connection, F_SETFD, FD_CLOEXEC);
    fcntl(connection, F_SETFL, fcntl(connection, F_GETFL) | O_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);
    relay_catch(SIGTERM, relay_stop);
    relay_catch(SIGINT, relay_stop);
    relay_catch(SIGUSR1, relay_forward);
    relay_catch(SIGUSR2, relay_forward);
    // The thread of hammock that exec'd this had signals blocked (its signal thread takes them), and a mask
    // survives exec: without this, SIGTERM would wait for ever.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    // From the engine: bytes past the last whole line wait in `pending` for the rest of their line.
    static char pending[2 * chunk_size];
    size_t pending_count = 0;
    // To the engine: what stdin gave that the connection has not taken yet.
    static char outgoing[chunk_size];
    size_t outgoing_count = 0, outgoing_sent = 0;
    int stdin_open = 1;
    int saw_bye = 0;
    // What `pending` holds begins in the middle of a line (its start was written already).
    int continuing = 0;
    static const char bye[] = "{\"type\":\"bye\"";

    for (;;) {
        struct pollfd watched[3] = {
            {.fd = connection, .events = POLLIN | (outgoing_sent < outgoing_count ? POLLOUT : 0)},
            // stdin is read only once the last control lines are gone to the engine.
            {.fd = stdin_open && outgoing_sent == outgoing_count ? STDIN_FILENO : -1, .events = POLLIN},
            // No events asked: POLLERR once stdout's reader is gone (a pipe), POLLHUP (a terminal).
            {.fd = STDOUT_FILENO, .events = 0},
        };
        if (poll(watched, 3, -1) < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        if (watched[2].revents & (POLLERR | POLLHUP)) return 0;

        if (watched[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            // A line longer than the buffer is written as it comes, without waiting for its end.
            if (pending_count == sizeof pending) {
                if (!relay_write_stdout(pending, pending_count)) return 0;
                pending_count = 0;
                continuing = 1;
            }
            ssize_t count = read(connection, pending + pending_count, sizeof pending - pending_count);
            if (count < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (count <= 0) return json && saw_bye ? 0 : 1;
            pending_count += (size_t)count;
            char *last = memrchr(pending, '\n', pending_count);
            if (last != NULL) {
                // Whole lines go out; a bye among them (at the start of a line) is noted.
                size_t whole = (size_t)(last - pending) + 1;
                for (char *line = pending; json && !saw_bye && line < pending + whole;) {
                    if (!continuing && (size_t)(pending + whole - line) >= sizeof bye - 1 &&
                        memcmp(line, bye, sizeof bye - 1) == 0) {
                        saw_bye = 1;
                    }
                    continuing = 0;
                    line = (char *)memchr(line, '\n', (size_t)(pending + whole - line)) + 1;
                }
                continuing = 0;
                if (!relay_write_stdout(pending, whole)) return 0;
                memmove(pending, pending + whole, pending_count - whole);
                pending_count -= whole;
            }
        }

        if (outgoing_sent < outgoing_count && (watched[0].revents & (POLLOUT | POLLERR))) {
            ssize_t sent = send(connection, outgoing + outgoing_sent, outgoing_count - outgoing_sent, MSG_NOSIGNAL);
            if (sent < 0 && errno != EINTR && errno != EAGAIN) {
                outgoing_count = outgoing_sent = 0;
                stdin_open = 0;  // the engine takes no more: what it writes still comes
            } else if (sent > 0) {
                outgoing_sent += (size_t)sent;
                if (outgoing_sent == outgoing_count) outgoing_count = outgoing_sent = 0;
            }
        }

        if (watched[1].fd >= 0 && (watched[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t count = read(STDIN_FILENO, outgoing, sizeof outgoing);
            if (count < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (count <= 0) {
                stdin_open = 0;
                continue;
            }
            outgoing_count = (size_t)count;
            outgoing_sent = 0;
        }
    }
}
