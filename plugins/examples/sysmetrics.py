#!/usr/bin/env python3
"""sysmetrics: a hammock plugin in Python (standard library only) for kind `sysmetric`.

It reads the machine's own numbers, which none of the shipped kinds gives as structured data:

    sources:
      memory: { kind: sysmetric, metric: memory }                   # /proc/meminfo
      cpu:    { kind: sysmetric, metric: cpu, watch: 1s }           # /proc/stat, pushed every second
      disk:   { kind: sysmetric, metric: disk, path: /home }        # os.statvfs(path)
    plugins:
      sysmetric: { command: [python3, plugins/examples/sysmetrics.py] }

Options: `metric` (memory | cpu | disk, required), `path` (disk only, default /), `watch` (a duration such
as 500ms, 1s or 1m: push a new reading that often). Every problem with the options is reported at once,
each at its JSON Pointer, so hammock can print the YAML line and column.

The protocol (docs/plugin-protocol.md) is JSON lines: messages from hammock on stdin, named by "op"; messages
to hammock on stdout, named by "type"; log text on stderr. Check a plugin with:

    hammock plugin check --options '{"metric":"memory"}' -- python3 plugins/examples/sysmetrics.py
"""
import difflib
import json
import os
import re
import sys
import threading
import time

VERSION = "0.1.0"
KIND = "sysmetric"
KNOWN_KEYS = ["metric", "path", "watch"]
METRICS = ["memory", "cpu", "disk"]

_output = threading.Lock()


def send(message):
    """One message, one line, written whole: loads and watches run on threads of their own."""
    line = json.dumps(message, separators=(",", ":")) + "\n"
    with _output:
        try:
            sys.stdout.write(line)
            sys.stdout.flush()
        except BrokenPipeError:
            os._exit(0)  # hammock is gone: nobody is left to serve


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


# --- Options -------------------------------------------------------------------------------------------


def pointer(key):
    """The JSON Pointer of a top-level key (RFC 6901 escapes ~ and /)."""
    return "/" + key.replace("~", "~0").replace("/", "~1")


def parse_duration(text):
    """`500ms`, `1s`, `2m`, `1h` (or a number of seconds) in seconds; None when it is not one."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text) if text > 0 else None
    if not isinstance(text, str):
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*", text)
    if not match:
        return None
    value = float(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[match.group(2)]
    return value if value > 0 else None


def check_options(options):
    """Returns (settings, problems); problems is a list of {path, message}."""
    problems = []
    if not isinstance(options, dict):
        return None, [{"path": "", "message": "expected an object of options"}]
    for key in options:
        if key not in KNOWN_KEYS:
            message = "unknown key \"%s\" for a %s source" % (key, KIND)
            close = difflib.get_close_matches(key, KNOWN_KEYS, n=1)
            if close:
                message += "; did you mean \"%s\"?" % close[0]
            problems.append({"path": pointer(key), "message": message})
    metric = options.get("metric")
    if metric is None:
        problems.append({"path": "/metric", "message": "missing: one of " + ", ".join(METRICS)})
    elif metric not in METRICS:
        problems.append({"path": "/metric", "message": "expected one of %s, got %s" % (", ".join(METRICS), json.dumps(metric))})
    path = options.get("path", "/")
    if "path" in options:
        if not isinstance(path, str) or not path:
            problems.append({"path": "/path", "message": "expected a non-empty string"})
        elif metric in METRICS and metric != "disk":
            problems.append({"path": "/path", "message": "only a disk metric has a path"})
    watch = None
    if "watch" in options:
        watch = parse_duration(options["watch"])
        if watch is None:
            problems.append({"path": "/watch", "message": "expected a duration such as 500ms, 1s or 1m"})
        elif watch < 0.1:
            problems.append({"path": "/watch", "message": "at least 100ms"})
    return {"metric": metric, "path": path, "watch": watch}, problems


# --- Readings ------------------------------------------------------------------------------------------


def read_memory():
    fields = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            fields[name] = int(rest.split()[0]) * 1024  # kB
    total, available = fields["MemTotal"], fields.get("MemAvailable", fields["MemFree"])
    return {
        "totalBytes": total,
        "availableBytes": available,
        "usedBytes": total - available,
        "usedPercent": round(100 * (total - available) / total, 1),
        "swapTotalBytes": fields.get("SwapTotal", 0),
        "swapFreeBytes": fields.get("SwapFree", 0),
    }


def cpu_times():
    """(busy, total) jiffies of all CPUs together, from the first line of /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user and nice
    return total - idle, total


class CPU:
    """Use since the previous reading of the same source (the first reading samples for 100 ms)."""

    def __init__(self):
        self.previous = None
        self.lock = threading.Lock()

    def read(self):
        with self.lock:
            if self.previous is None:
                self.previous = cpu_times()
                time.sleep(0.1)
            busy, total = cpu_times()
            last_busy, last_total = self.previous
            self.previous = (busy, total)
        elapsed = total - last_total
        percent = 100 * (busy - last_busy) / elapsed if elapsed > 0 else 0.0
        return {"usedPercent": round(percent, 1), "cpus": os.cpu_count(), "loadAverage": list(os.getloadavg())}


def read_disk(path):
    stats = os.statvfs(path)
    total = stats.f_blocks * stats.f_frsize
    free = stats.f_bfree * stats.f_frsize
    available = stats.f_bavail * stats.f_frsize
    used = total - free
    # As df counts it: used against what a user may fill.
    usable = used + available
    return {
        "path": path,
        "totalBytes": total,
        "usedBytes": used,
        "availableBytes": available,
        "usedPercent": round(100 * used / usable, 1) if usable else 0.0,
    }


class Source:
    def __init__(self, name, settings):
        self.name = name
        self.settings = settings
        self.cpu = CPU()
        self.stopped = threading.Event()
        if settings["watch"]:
            threading.Thread(target=self.watch, daemon=True).start()

    def read(self):
        metric = self.settings["metric"]
        if metric == "memory":
            return read_memory()
        if metric == "cpu":
            return self.cpu.read()
        return read_disk(self.settings["path"])

    def watch(self):
        """A push every `watch` seconds: new data hammock did not ask for."""
        while not self.stopped.wait(self.settings["watch"]):
            try:
                send({"type": "newData", "source": self.name, "content": self.read()})
            except OSError as error:
                send({"type": "error", "source": self.name, "error": {"message": str(error), "code": "readFailed"}})

    def stop(self):
        self.stopped.set()


# --- The protocol --------------------------------------------------------------------------------------


class Plugin:
    def __init__(self):
        self.sources = {}
        self.loads = {}  # load id -> whether it is still to be answered
        self.lock = threading.Lock()

    def handle(self, message):
        op = message.get("op")
        if op == "hello":
            send({"type": "hello", "protocol": 1, "kinds": [KIND], "version": VERSION})
        elif op == "configure":
            name = message["source"]
            settings, problems = check_options(message.get("options"))
            old = self.sources.pop(name, None)
            if old:
                old.stop()
            if problems:
                send({"type": "invalid", "source": name, "errors": problems})
            else:
                self.sources[name] = Source(name, settings)
                send({"type": "configured", "source": name})
        elif op == "load":
            self.load(message)
        elif op == "cancel":
            with self.lock:
                waiting = self.loads.pop(message["id"], False)
            if waiting:
                send({"type": "cancelled", "id": message["id"]})
        elif op == "remove":
            source = self.sources.pop(message["source"], None)
            if source:
                source.stop()
        elif op == "shutdown":
            return False
        else:
            log("ignoring an unknown op: %s" % json.dumps(message)[:200])
        return True

    def load(self, message):
        load_id, name = message["id"], message["source"]
        source = self.sources.get(name)
        if source is None:
            send({"type": "error", "id": load_id, "source": name,
                  "error": {"message": "source \"%s\" is not configured" % name, "code": "notConfigured"}})
            return
        with self.lock:
            self.loads[load_id] = True

        def run():
            try:
                answer = {"type": "newData", "id": load_id, "source": name, "content": source.read()}
            except OSError as error:
                answer = {"type": "error", "id": load_id, "source": name,
                          "error": {"message": str(error), "code": "readFailed"}}
            with self.lock:
                if not self.loads.pop(load_id, False):
                    return  # cancelled: already answered
            send(answer)

        threading.Thread(target=run, daemon=True).start()


def main():
    plugin = Plugin()
    for line in sys.stdin:  # ends when hammock closes our stdin, however it ends
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError as error:
            log("ignoring a line that is not JSON: %s" % error)
            continue
        if not plugin.handle(message):
            break
    for source in plugin.sources.values():
        source.stop()


if __name__ == "__main__":
    main()
