"""Helpers the tests share."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, List

WAIT = 30.0  # generous: a loaded 2-core machine may take seconds where an idle one takes milliseconds


def processes_naming(text: str) -> List[int]:
    """Pids whose command line contains `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                if text.encode() in file.read():
                    found.append(int(entry))
        except OSError:
            continue  # it ended while we looked
    return found


def wait_until(condition: Callable[[], bool], timeout: float = WAIT) -> bool:
    """For what no event announces (another process's end): poll, with a generous deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def is_stopped(pid: int) -> bool:
    """Whether SIGSTOP has taken effect (state `T` in /proc/PID/stat): kill() returns before it has."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


# A stand-in for hammock, run as `binary=`: it says hello (one source, `s`) and acks every command with an id.
# At the command `go` it first writes the lines of `lines.bin` beside it as they are, then a good source line;
# at `snapshot`, the source line again. So a test subscribes, sends `go`, and sees on the client's side
# exactly the lines a real hammock might write only by accident, and whether the client reads on.
FAKE_ENGINE = r'''
import json, os, sys
out = sys.stdout.buffer
def say(line):
    out.write(json.dumps(line).encode() + b"\n")
    out.flush()
say({"type": "hello", "seq": 1, "protocol": 1, "version": "fake", "sources": ["s"], "views": []})
here = os.path.dirname(os.path.abspath(__file__))
seq = 100
def source(text):
    global seq
    seq += 1
    say({"type": "source", "seq": seq, "id": "s", "event": "newData", "origin": "load",
         "state": {"content": text, "latestError": None, "isLoading": False, "timestamp": None, "failures": 0}})
for raw in sys.stdin.buffer:
    command = json.loads(raw)
    if command.get("op") == "go":
        with open(os.path.join(here, "lines.bin"), "rb") as lines:
            while True:
                chunk = lines.read(1 << 20)
                if not chunk:
                    break
                out.write(chunk)
        out.flush()
        source("after the bad lines")
    if command.get("op") == "snapshot":
        source("snapshot")
    seq += 1
    say({"type": "ack", "seq": seq, "id": command["id"]})
'''


def fake_engine(folder: Path, lines: bytes) -> str:
    """The path of a stand-in hammock (above) that writes `lines` after its hello."""
    import sys

    script = folder / "fake-hammock"
    script.write_text(f"#!{sys.executable}\n" + FAKE_ENGINE)
    script.chmod(0o755)
    (folder / "lines.bin").write_bytes(lines)
    return str(script)
