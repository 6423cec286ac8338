#!/usr/bin/env python3
"""A plugin for kind `test` that misbehaves on purpose, for hammock's supervision tests.

Usage: misbehaving-plugin.py MODE [ARG]
  good            behaves: answers every load with {"n": <load count>, "pid": <its pid>}
  garbage         answers hello, then writes a line that is not JSON on the first load
  no-hello        never answers the handshake
  crash-at-once   exits with status 3 before reading anything
  crash-after N   behaves for N loads, then exits with status 4
  silent-loads    answers hello and configure, never answers a load
  wrong-kind      says it serves another kind
"""
import json
import os
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "good"
arg = int(sys.argv[2]) if len(sys.argv) > 2 else 0


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if mode == "crash-at-once":
    sys.stderr.write("crashing at once, as asked\n")
    sys.exit(3)

loads = 0
for line in sys.stdin:
    message = json.loads(line)
    op = message.get("op")
    if op == "hello":
        if mode == "no-hello":
            continue
        kinds = ["other"] if mode == "wrong-kind" else ["test"]
        send({"type": "hello", "protocol": 1, "kinds": kinds, "version": "0.0.1"})
    elif op == "configure":
        send({"type": "configured", "source": message["source"]})
    elif op == "load":
        loads += 1
        if mode == "garbage":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
        elif mode == "silent-loads":
            pass
        elif mode == "crash-after" and loads > arg:
            sys.stderr.write("crashing after %d loads, as asked\n" % arg)
            sys.exit(4)
        else:
            send({"type": "newData", "source": message["source"], "id": message["id"],
                  "content": {"n": loads, "pid": os.getpid()}})
    elif op == "shutdown":
        break
