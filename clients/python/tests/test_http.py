"""The HTTP door (`--http`, docs/http.md) read by Python's own HTTP client, `urllib`, and attacked over raw
sockets: states, server-sent events with their resumption, control, and the bounds on hostile clients."""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from _support import WAIT, wait_until

CONFIG = """\
version: 1
sources:
  a: { kind: fake, content: 1 }
  b: { kind: fake, content: { text: two } }
  vault: { kind: shell, command: [sh, -c, 'echo "key $TOKEN"'], env: { TOKEN: "${TOKEN}" }, refresh: 1h }
views:
  both: { sources: [a, b] }
"""

SECRET = "s3cr3t-h77p"


class Door:
    """A running `hammock run --http 127.0.0.1:0` (or `serve`), and where it listens."""

    def __init__(self, process: subprocess.Popen, base: str, stderr: Path):
        self.process = process
        self.base = base
        self.port = int(base.rsplit(":", 1)[1])
        self.stderr = stderr

    def get(self, path: str, headers: Optional[Dict[str, str]] = None) -> Tuple[int, bytes]:
        request = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=WAIT) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def json(self, path: str) -> dict:
        status, body = self.get(path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def control(self, line: dict) -> Tuple[int, dict]:
        request = urllib.request.Request(
            self.base + "/v1/control", data=json.dumps(line).encode(), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=WAIT) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def raw(self, data: bytes, read: bool = True, timeout: float = WAIT) -> bytes:
        """Sends `data` on a connection of its own; what comes back until the server closes it (or `timeout`)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as connection:
            connection.sendall(data)
            return read_until_closed(connection, timeout) if read else b""


def read_until_closed(connection: socket.socket, timeout: float) -> bytes:
    return read_to_close(connection, timeout)[0]


def read_to_close(connection: socket.socket, timeout: float) -> Tuple[bytes, bool]:
    """What comes until the server closes the connection (True) or `timeout` passes (False)."""
    deadline = time.monotonic() + timeout
    received = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return received, False
        connection.settimeout(left)
        try:
            chunk = connection.recv(65536)
        except ConnectionResetError:
            return received, True
        except socket.timeout:
            return received, False
        if not chunk:
            return received, True
        received += chunk


@contextmanager
def door(tmp_path: Path, hammock_bin: str, command: str = "run", config: str = CONFIG,
         arguments: Optional[List[str]] = None, environment: Optional[Dict[str, str]] = None) -> Iterator[Door]:
    path = tmp_path / "hammock.yaml"
    path.write_text(config)
    stderr = tmp_path / "stderr.log"
    env = dict(os.environ, TOKEN=SECRET, XDG_RUNTIME_DIR=str(tmp_path / "run"), **(environment or {}))
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)
    with open(stderr, "wb") as log:
        process = subprocess.Popen(
            [hammock_bin, command, str(path), "--http", "127.0.0.1:0"] + (arguments or []),
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        found: List[str] = []

        def listening() -> bool:
            found[:] = re.findall(r"serving HTTP at (http://127\.0\.0\.1:[0-9]+)/", stderr.read_text())
            return bool(found) or process.poll() is not None

        assert wait_until(listening) and found, stderr.read_text()
        yield Door(process, found[0], stderr)
    finally:
        process.terminate()
        try:
            process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            raise


class Events:
    """A server-sent event stream read with urllib, parsed as a browser's EventSource does."""

    def __init__(self, door: Door, query: str = "", last_event_id: Optional[str] = None):
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        request = urllib.request.Request(door.base + "/v1/events" + query, headers=headers)
        self.response = urllib.request.urlopen(request, timeout=WAIT)
        self.last_id: Optional[str] = last_event_id
        self.comments = 0

    def next(self) -> Tuple[str, dict]:
        """The next event: its type and its data's JSON; comments are counted, not returned."""
        event, data = "message", []
        while True:
            raw = self.response.readline()
            assert raw, "the stream ended"
            line = raw.decode().rstrip("\n")
            if line == "":
                if data:
                    return event, json.loads("\n".join(data))
                continue
            if line.startswith(":"):
                self.comments += 1
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                self.last_id = value

    def until(self, predicate) -> Tuple[str, dict]:
        while True:
            event = self.next()
            if predicate(*event):
                return event

    def snapshot(self) -> List[Tuple[str, dict]]:
        """The events up to the `ack` that ends the snapshot, that ack included."""
        events = []
        while True:
            event = self.next()
            events.append(event)
            if event[0] == "ack" and event[1].get("id") == "snapshot":
                return events

    def close(self) -> None:
        self.response.close()


def wait_for_content(d: Door, source: str, content) -> None:
    assert wait_until(lambda: d.json("/v1/sources/" + source)["state"]["content"] == content), d.json("/v1/sources/" + source)


def test_states_are_the_lines_hammock_writes(tmp_path: Path, hammock_bin: str) -> None:
    with door(tmp_path, hammock_bin) as d:
        wait_for_content(d, "b", {"text": "two"})
        sources = d.json("/v1/sources")
        assert list(sources) == ["a", "b", "vault"]
        assert sources["a"]["type"] == "source" and sources["a"]["id"] == "a" and sources["a"]["state"]["content"] == 1
        assert isinstance(sources["a"]["seq"], int)
        one = d.json("/v1/sources/b")
        assert one["state"]["content"] == {"text": "two"} and one["event"] == "newData"
        views = d.json("/v1/views")
        assert list(views) == ["both"] and views["both"]["status"] == "data"
        assert d.json("/v1/views/both")["content"] == {"a": 1, "b": {"text": "two"}}
        # No secret byte: the shell echoed it, the door redacts it as stdout does.
        assert wait_until(lambda: "redacted" in json.dumps(d.json("/v1/sources/vault")))
        status, body = d.get("/v1/sources")
        assert SECRET.encode() not in body and b"[redacted]" in body
        # Unknown ids, and paths that try to climb or smuggle a slash: 404 with a JSON error, nothing else.
        status, body = d.get("/v1/sources/nope")
        assert status == 404 and "no source \"nope\"" in json.loads(body)["error"]
        status, body = d.get("/v1/views/nope")
        assert status == 404 and "no view \"nope\"" in json.loads(body)["error"]
        for path in ["/v1/sources/a%2Fb", "/v1/sources/..%2Fhealthz", "/v1/sources/../healthz", "/v1/%2e%2e/healthz",
                     "/v1/sources/a/b"]:
            answer = d.raw(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 404"), (path, answer)
            assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"], (path, answer)


def test_events_snapshot_then_live_then_resume(tmp_path: Path, hammock_bin: str) -> None:
    with door(tmp_path, hammock_bin) as d:
        wait_for_content(d, "b", {"text": "two"})
        stream = Events(d, "?sources=a,b&views=both")
        snapshot = stream.snapshot()
        assert snapshot[0][0] == "hello" and snapshot[0][1]["sources"] == ["a", "b"] and snapshot[0][1]["views"] == ["both"]
        assert {(kind, data.get("id")) for kind, data in snapshot[1:-1]} == {("source", "a"), ("source", "b"), ("view", "both")}
        after_snapshot = stream.last_id
        assert after_snapshot is not None and int(after_snapshot) == snapshot[-1][1]["seq"]
        # Live: an override sent over HTTP reaches the stream, with an id that is its seq.
        status, answer = d.control({"op": "override", "source": "a", "content": 41, "id": "o-1"})
        assert status == 200 and answer["type"] == "ack" and answer["id"] == "o-1"
        kind, line = stream.until(lambda kind, data: kind == "source" and data["state"]["content"] == 41)
        assert line["id"] == "a" and int(stream.last_id) == line["seq"] > int(after_snapshot)
        resume_from = stream.last_id
        stream.close()
        # While away: b changes. Back with Last-Event-ID: only what changed since (b, and the view), not a.
        d.control({"op": "override", "source": "b", "content": "bee"})
        wait_for_content(d, "b", "bee")
        back = Events(d, "?sources=a,b&views=both", last_event_id=resume_from)
        changed = back.snapshot()
        ids = {(kind, data.get("id")) for kind, data in changed[1:-1]}
        assert ids == {("source", "b"), ("view", "both")}, changed
        back.close()
        # An id this engine never gave (an older engine's, or nonsense): a whole snapshot.
        for stale in ["5", "not-a-number"]:
            fresh = Events(d, "?sources=a,b", last_event_id=stale)
            assert {data["id"] for kind, data in fresh.snapshot()[1:-1]} == {"a", "b"}
            fresh.close()
        # An unknown id in the query: 404 before any stream.
        status, body = d.get("/v1/events?sources=nope")
        assert status == 404 and "nope" in json.loads(body)["error"]


def test_events_end_with_bye_when_the_engine_stops(tmp_path: Path, hammock_bin: str) -> None:
    with door(tmp_path, hammock_bin) as d:
        stream = Events(d, "?views=both")
        stream.snapshot()
        d.process.terminate()
        kind, line = stream.until(lambda kind, data: kind == "bye")
        assert line["reason"] == "signal"
        assert stream.response.readline() == b""  # and the answer ends


def test_serve_streams_make_what_they_watch_load(tmp_path: Path, hammock_bin: str) -> None:
    config = """\
sources:
  polled: { kind: shell, command: [date, "+%s%N"], refresh: 200ms }
  other: { kind: fake, content: 1 }
"""
    with door(tmp_path, hammock_bin, command="serve", config=config) as d:
        # Nobody watches: nothing loads.
        assert d.json("/healthz")["watched"] == 0
        stream = Events(d, "?sources=polled")
        stream.snapshot()
        first = stream.until(lambda kind, data: kind == "source" and data["event"] == "newData")[1]["state"]["content"]
        second = stream.until(lambda kind, data: kind == "source" and data["event"] == "newData"
                              and data["state"]["content"] != first)
        assert second
        assert d.json("/healthz")["watched"] == 1
        stream.close()
        # The stream gone, nothing is watched again.
        assert wait_until(lambda: d.json("/healthz")["watched"] == 0)


def test_control_answers(tmp_path: Path, hammock_bin: str) -> None:
    with door(tmp_path, hammock_bin) as d:
        status, answer = d.control({"op": "load", "source": "a"})
        assert status == 200 and answer["type"] == "ack" and "id" not in answer
        status, answer = d.control({"op": "load", "source": "nope", "id": 7})
        assert status == 400 and answer["type"] == "error" and answer["id"] == 7 and "nope" in answer["message"]
        status, answer = d.control({"op": "fly"})
        assert status == 400 and answer["type"] == "error"
        for body, content_type, expected in [
            (b'{"op":"load","source":"a"}', "text/plain", 415),
            (b"not json", "application/json", 400),
            (b'{"op":"load","source":"a"}\n{"op":"load","source":"b"}', "application/json", 400),
        ]:
            request = urllib.request.Request(d.base + "/v1/control", data=body, headers={"Content-Type": content_type})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=WAIT)
            assert refused.value.code == expected, (body, refused.value.read())
        # GET on the control route: 405, naming the method it takes.
        status, body = d.get("/v1/control")
        assert status == 405


def test_heartbeats_keep_an_idle_stream_alive(tmp_path: Path, hammock_bin: str) -> None:
    with door(tmp_path, hammock_bin, environment={"HAMMOCK_HTTP_HEARTBEAT": "200ms",
                                                  "HAMMOCK_METRICS_IDLE_TIMEOUT": "300ms"}) as d:
        stream = Events(d, "?sources=a")
        stream.snapshot()
        time.sleep(1.5)  # past the idle timeout of a connection that is not a stream
        d.control({"op": "override", "source": "a", "content": 7})
        stream.until(lambda kind, data: kind == "source" and data["state"]["content"] == 7)
        assert stream.comments >= 3


def test_a_stream_that_is_not_read_is_closed_and_the_engine_goes_on(tmp_path: Path, hammock_bin: str) -> None:
    config = """\
sources:
  big: { kind: shell, command: [sh, -c, 'date +%s%N; head -c 400000 /dev/zero | tr "\\0" a'], refresh: 50ms }
"""
    with door(tmp_path, hammock_bin, config=config, environment={"HAMMOCK_HTTP_STALL_TIMEOUT": "1s"}) as d:
        with socket.create_connection(("127.0.0.1", d.port)) as silent:
            silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            silent.sendall(b"GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            time.sleep(4)  # not reading: the server's writes stall
            # Another client is served meanwhile.
            assert d.json("/healthz")["status"] == "ok"
            received, closed = read_to_close(silent, 10)
            assert received.startswith(b"HTTP/1.1 200"), received[:200]
            # The server closed it (reset: the bytes it had queued are dropped, not trickled out).
            assert closed, f"still open after 10 s, {len(received)} bytes read"
            assert len(received) < 40 * 400_000
        assert d.process.poll() is None


def test_hostile_clients_get_their_own_answer_and_the_rest_go_on(tmp_path: Path, hammock_bin: str) -> None:
    with door(tmp_path, hammock_bin) as d:
        stream = Events(d, "?sources=a")
        stream.snapshot()
        # Malformed HTTP: 400, closed.
        garbage = d.raw(b"GARBAGE GARBAGE\r\n\r\n")
        assert garbage.startswith(b"HTTP/1.1 400"), garbage
        assert "malformed HTTP request" in json.loads(garbage.split(b"\r\n\r\n", 1)[1])["error"]
        # A 1 GiB body: refused with 413 once its declared length is read, the connection closed.
        with socket.create_connection(("127.0.0.1", d.port)) as big:
            big.sendall(b"POST /v1/control HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 1073741824\r\n\r\n")
            try:
                for _ in range(64):
                    big.sendall(b"x" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass
            answer = read_until_closed(big, WAIT)
            assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        # The same without a declared length (chunked): refused once past the bound.
        with socket.create_connection(("127.0.0.1", d.port)) as chunked:
            chunked.sendall(b"POST /v1/control HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n")
            try:
                for _ in range(40):
                    chunked.sendall(b"10000\r\n" + b"x" * 65536 + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert read_until_closed(chunked, WAIT).startswith(b"HTTP/1.1 413")
        # Slowloris: 100 connections each sending a request a byte at a time, never finishing.
        slow = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(100)]
        for index in range(5):
            for connection in slow:
                try:
                    connection.send(b"GET /v1/sources HTTP/1.1\r\n"[index:index + 1])
                except OSError:
                    pass
        assert d.json("/healthz")["status"] == "ok"
        for connection in slow:
            connection.close()
        # 10,000 connections that say nothing: the newest are kept, the oldest idle ones closed; the stream stays.
        held: List[socket.socket] = []
        for _ in range(10_000):
            held.append(socket.create_connection(("127.0.0.1", d.port)))
            if len(held) > 200:
                held.pop(0).close()
        assert d.json("/healthz")["status"] == "ok"
        open_on_server = 0
        for connection in held:
            readable, _, _ = select.select([connection], [], [], 0)
            if not readable:
                open_on_server += 1
        assert open_on_server <= 64
        for connection in held:
            connection.close()
        d.control({"op": "override", "source": "a", "content": "still here"})
        stream.until(lambda kind, data: kind == "source" and data["state"]["content"] == "still here")
        assert d.process.poll() is None
