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
