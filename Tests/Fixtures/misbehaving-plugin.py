#!/usr/bin/env python3
"""A plugin for kind `test` that misbehaves on purpose, for hammock's supervision and fault-injection tests.

Usage: misbehaving-plugin.py MODE [ARG]
  good              behaves: answers every load with {"n": <load count>, "pid": <its pid>}
  garbage           answers hello, then writes a line that is not JSON on the first load
  garbage-secret N  answers hello, then on the first load writes a line that is not JSON: N "x"s, then its
                    source's `token` option, then " (echoed)"
  no-hello          never answers the handshake
  crash-at-once     exits with status 3 before reading anything
  crash-after N     behaves for N loads, then exits with status 4
  silent-loads      answers hello and configure, never answers a load
  wrong-kind        says it serves another kind
  half-line N       behaves for N loads, then writes half a line (no newline) and exits with status 5
  huge-line N       behaves for N loads, then answers with a line of about 20 MB (over hammock's 16 MiB limit)
  flood             behaves, and after its first answer pushes {"n": i, "t": unix time} for every configured source, about
                    100,000 a second, without end
  ignore-shutdown   behaves, but ignores shutdown, the end of its stdin and SIGTERM, and keeps running
  leave-child N     behaves for N loads, then starts `sleep 300` in a session of its own (setsid), writes its
                    pid to the file named by $HAMMOCK_TEST_CHILD_PID_FILE, and exits with status 6
  skip-configure    never answers `configure` for a source whose name starts with "stuck"; behaves otherwise
  hang-configure    on `configure` of a source whose name starts with "stuck", stops reading its input for good
                    (as a plugin stuck in its setup would); behaves until then
  huge-answer       answers each load of a source whose name starts with "huge" with a line of about 20 MB
                    (over hammock's 16 MiB limit; "id" before "content"), and after each pushes one for it too;
                    behaves for the other sources
  fork-child N      behaves for N loads, then fork()s a child that sleeps (the same argv as the plugin) and
                    exits with status 7
  check-parent      exits with status 9 at once unless its parent's pid is $HAMMOCK_ENGINE_PID (the check that
                    docs/plugin-protocol.md asks for); behaves otherwise
  ignore-all-with-child
                    behaves, and at its first load starts `sleep 300` in a session of its own and fork()s a
                    copy of itself; all of them ignore shutdown, the end of stdin and SIGTERM

Whatever the mode, with $HAMMOCK_TEST_START_LOG set it first appends its start time (the monotonic clock, in
seconds) to that file, one line per start, so a test can count restarts and measure the gaps between them.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "good"
arg = int(sys.argv[2]) if len(sys.argv) > 2 else 0
out_lock = threading.Lock()

if os.environ.get("HAMMOCK_TEST_START_LOG"):
    with open(os.environ["HAMMOCK_TEST_START_LOG"], "a") as start_log:
        start_log.write("%.6f\n" % time.monotonic())


def send(message):
    write(json.dumps(message) + "\n")


def write(text):
    with out_lock:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            os._exit(0)


def flood(sources):
    """Pushes about 100,000 lines a second (fewer if Python cannot keep up), in batches, without end."""
    n = 0
    start = time.monotonic()
    while True:
        # Paced at 100,000 a second (if it can keep up): 1,000 lines every 10 ms.
        ahead = start + n / 100000 - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        batch = []
        written_at = time.time()
        for _ in range(1000):
            n += 1
            for source in sources:
                batch.append('{"type":"newData","source":%s,"content":{"n":%d,"t":%.6f}}\n'
                             % (json.dumps(source), n, written_at))
        write("".join(batch))


def ignore_everything():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        time.sleep(3600)


if mode == "check-parent" and str(os.getppid()) != os.environ.get("HAMMOCK_ENGINE_PID"):
    sys.stderr.write("my parent is %d, not HAMMOCK_ENGINE_PID %s: exiting\n"
                     % (os.getppid(), os.environ.get("HAMMOCK_ENGINE_PID")))
    sys.exit(9)

if mode == "crash-at-once":
    sys.stderr.write("crashing at once, as asked\n")
    sys.exit(3)

if mode in ("ignore-shutdown", "ignore-all-with-child"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def huge_line(source, load_id):
    padding = "x" * (20 << 20)
    if load_id is None:
        return '{"type":"newData","source":%s,"content":{"padding":"%s"}}\n' % (json.dumps(source), padding)
    return '{"type":"newData","source":%s,"id":%d,"content":{"padding":"%s"}}\n' % (json.dumps(source), load_id, padding)


loads = 0
sources = []
tokens = {}
flooding = False
for line in sys.stdin:
    message = json.loads(line)
    op = message.get("op")
    if op == "hello":
        if mode == "no-hello":
            continue
        kinds = ["other"] if mode == "wrong-kind" else ["test"]
        send({"type": "hello", "protocol": 1, "kinds": kinds, "version": "0.0.1"})
    elif op == "configure":
        if message["source"] not in sources:
            sources.append(message["source"])
        tokens[message["source"]] = message.get("options", {}).get("token", "")
        stuck = message["source"].startswith("stuck")
        if mode == "skip-configure" and stuck:
            sys.stderr.write("not answering configure for %s, as asked\n" % message["source"])
            continue
        if mode == "hang-configure" and stuck:
            sys.stderr.write("stuck configuring %s, as asked\n" % message["source"])
            while True:
                time.sleep(3600)
        send({"type": "configured", "source": message["source"]})
    elif op == "load":
        loads += 1
        answer = {"type": "newData", "source": message["source"], "id": message["id"],
                  "content": {"n": loads, "pid": os.getpid()}}
        if mode == "garbage":
            write("this is not json\n")
        elif mode == "garbage-secret":
            write("x" * arg + tokens.get(message["source"], "") + " (echoed)\n")
        elif mode == "silent-loads":
            pass
        elif mode == "crash-after" and loads > arg:
            sys.stderr.write("crashing after %d loads, as asked\n" % arg)
            sys.exit(4)
        elif mode == "half-line" and loads > arg:
            sys.stderr.write("writing half a line and exiting, as asked\n")
            write(json.dumps(answer)[:20])
            sys.exit(5)
        elif mode == "huge-line" and loads > arg:
            sys.stderr.write("writing a line of 20 MB, as asked\n")
            answer["content"] = {"padding": "x" * (20 << 20)}
            send(answer)
        elif mode == "huge-answer" and message["source"].startswith("huge"):
            write(huge_line(message["source"], message["id"]))
            write(huge_line(message["source"], None))
        elif mode == "fork-child" and loads > arg:
            if os.fork() == 0:
                time.sleep(300)
                os._exit(0)
            sys.stderr.write("forked a child that stays, exiting, as asked\n")
            os._exit(7)
        elif mode == "leave-child" and loads > arg:
            child = subprocess.Popen(["sleep", "300"], start_new_session=True,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(os.environ["HAMMOCK_TEST_CHILD_PID_FILE"], "w") as f:
                f.write("%d\n" % child.pid)
            sys.stderr.write("left sleep %d behind in its own session, crashing, as asked\n" % child.pid)
            os._exit(6)
        else:
            send(answer)
            if mode == "ignore-all-with-child" and loads == 1:
                subprocess.Popen(["sleep", "300"], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if os.fork() == 0:
                    os.close(0)
                    ignore_everything()
            if mode == "flood" and not flooding:
                flooding = True
                threading.Thread(target=flood, args=(list(sources),), daemon=True).start()
    elif op == "shutdown":
        if mode == "ignore-shutdown":
            continue
        break

if mode in ("ignore-shutdown", "ignore-all-with-child"):
    try:
        sys.stderr.write("stdin ended; ignoring it, as asked\n")
        sys.stderr.flush()
    except OSError:
        pass  # the engine is gone (a SIGKILL) and its end of the pipe with it: ignore that too
    ignore_everything()
