"""`Hammock` against the real binary: start, states, updates, wait_for, exit, and the control commands."""

from __future__ import annotations

import os
import signal
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import pytest

from hammock_client import (
    CommandError,
    EngineExited,
    ErrorReport,
    Hammock,
    Reloaded,
    Removed,
    SourceState,
    Update,
    ViewState,
)
from hammock_client._engine import find_binary

from _support import WAIT, is_stopped, processes_naming, wait_until, write_atomically


# Start, states, updates, wait_for


def test_states_after_start(hammock_bin: str, config: Path) -> None:
    with Hammock(config, binary=hammock_bin) as h:
        assert repr(h) == f"<Hammock pid={h.pid} running>"
        assert h.version
        assert list(h.states().sources) == ["flaky", "steady", "watched", "stuck"]
        assert list(h.states().views) == ["both"]

        states = h.wait_for(
            lambda s: s.source("flaky").latest_error is not None and s.source("steady").content is not None,
            timeout=WAIT,
        )
        flaky = states.source("flaky")
        assert flaky.content is None
        assert flaky.event == "error"
        assert flaky.failures == 1
        assert not flaky.is_loading
        assert flaky.latest_error is not None
        assert flaky.latest_error.exit_status == 1
        assert "ready.json" in flaky.latest_error.message
        assert isinstance(flaky.timestamp, datetime) and flaky.timestamp.tzinfo is not None
        assert abs(flaky.timestamp - datetime.now(timezone.utc)) < timedelta(minutes=10)

        steady = states.source("steady")
        assert steady.content == {"text": "hello"}
        assert (steady.event, steady.origin) == ("newData", "load")
        assert steady.latest_error is None

        view = h.wait_for(lambda s: s.view("both").status == "error", timeout=WAIT).view("both")
        assert view.content is None  # ready: all, and flaky has no content
        assert view.can_try_again
        assert set(view.errors) == {"flaky"}
        assert view.latest_error == view.errors["flaky"]

        watched = h.wait_for(lambda s: s.source("watched").content == {"n": 0}, timeout=WAIT).source("watched")
        # What the file kind says of its content (`meta`): its size and when it changed.
        assert watched.meta is not None
        assert watched.meta["size"] == len((config.parent / "data.json").read_bytes())
        assert isinstance(watched.meta["modified"], str)
        assert steady.meta is None  # the fake kind says nothing
        with pytest.raises(TypeError):
            watched.meta["size"] = 0  # type: ignore[index]
        assert h.source("stuck").is_loading
        with pytest.raises(KeyError, match="nope"):
            h.source("nope")
        with pytest.raises(KeyError):
            h.view("flaky")
    assert h.returncode == 0
    assert repr(h) == f"<Hammock pid={h.pid} exited 0>"
    assert h.bye_reason == "signal"


def test_updates_see_every_change_in_order(hammock_bin: str, config: Path) -> None:
    data = config.parent / "data.json"
    with Hammock(config, binary=hammock_bin) as h:
        h.wait_for(lambda s: s.source("watched").content == {"n": 0}, timeout=WAIT)
        first, second = h.updates(), h.updates()
        write_atomically(data, '{"n": 1}')

        seen: List[Update] = []
        while not seen or not _is_watched(seen[-1], 1):
            seen.append(first.get(timeout=WAIT))
        assert all(a.seq < b.seq for a, b in zip(seen, seen[1:]))
        assert h.source("watched").content == {"n": 1}
        assert h.source("watched").origin == "push"

        # Another iterator made at the same time sees the same lines.
        assert [second.get(timeout=WAIT) for _ in seen] == seen
        first.close()
        second.close()


def test_updates_initial_starts_with_every_current_state(hammock_bin: str, config: Path) -> None:
    data = config.parent / "data.json"
    with Hammock(config, binary=hammock_bin) as h:
        states = h.wait_for(lambda s: s.source("watched").content == {"n": 0} and s.source("steady").content is not None)
        with h.updates(initial=True) as initial, h.updates() as plain:
            # At once, with no line from hammock: every source's current state, then every view's.
            first = [initial.get(timeout=0) for _ in range(5)]
            assert [(type(u).__name__, u.id) for u in first] == [
                ("SourceState", "flaky"),
                ("SourceState", "steady"),
                ("SourceState", "watched"),
                ("SourceState", "stuck"),
                ("ViewState", "both"),
            ]
            assert first[1] == h.source("steady") and first[2].content == {"n": 0}
            # Then both see the same changes; the default (`initial=False`, for compatibility) starts with them.
            write_atomically(data, '{"n": 1}')
            seen: List[Update] = []
            while not seen or not _is_watched(seen[-1], 1):
                seen.append(initial.get(timeout=WAIT))
            assert [plain.get(timeout=WAIT) for _ in seen] == seen
        del states


def _is_watched(update: Update, n: int) -> bool:
    return isinstance(update, SourceState) and update.id == "watched" and update.content == {"n": n}


def test_wait_for_sees_the_state_after_every_line(hammock_bin: str, config: Path) -> None:
    data = config.parent / "data.json"
    with Hammock(config, binary=hammock_bin) as h:
        h.wait_for(lambda s: s.source("watched").content == {"n": 0}, timeout=WAIT)
        result: List[object] = []

        def waiter() -> None:
            result.append(h.wait_for(lambda s: s.source("watched").content == {"n": 2}, timeout=WAIT))

        thread = threading.Thread(target=waiter)
        thread.start()
        write_atomically(data, '{"n": 2}')
        thread.join(WAIT + 5)
        assert len(result) == 1
        assert result[0].source("watched").content == {"n": 2}  # type: ignore[attr-defined]

        with pytest.raises(TimeoutError):
            h.wait_for(lambda s: False, timeout=0.3)


# Exit


def test_close_stops_hammock_and_what_it_started(hammock_bin: str, config: Path) -> None:
    folder = str(config.parent)
    with pytest.raises(RuntimeError, match="leaving the block"):
        with Hammock(config, binary=hammock_bin) as h:
            h.wait_for(lambda s: s.source("stuck").is_loading, timeout=WAIT)
            assert wait_until(lambda: len(processes_naming(folder)) >= 2)  # hammock and stuck's shell
            raise RuntimeError("leaving the block")
    assert h.returncode == 0
    assert h.bye_reason == "signal"
    assert wait_until(lambda: processes_naming(folder) == []), processes_naming(folder)
    # States stay readable after close(); iterating ends.
    assert h.source("steady").id == "steady"
    assert list(h.updates()) == []
    with pytest.raises(EngineExited) as exited:
        h.override("steady", 1)
    assert exited.value.expected


def test_killed_engine_raises_engine_exited_with_its_stderr(hammock_bin: str, config: Path) -> None:
    with Hammock(config, binary=hammock_bin, args=["--log-level", "debug"]) as h:
        h.wait_for(lambda s: s.source("steady").content is not None, timeout=WAIT)
        updates = h.updates()
        assert wait_until(lambda: len(h.stderr_tail) > 0)

        # A command that waits for its answer when hammock dies gets EngineExited: stopped, hammock
        # cannot answer the command, which waits until the kill.
        os.kill(h.pid, signal.SIGSTOP)
        assert wait_until(lambda: is_stopped(h.pid))
        waiting: List[BaseException] = []

        def command() -> None:
            try:
                h.override("steady", "never answered")
            except BaseException as error:
                waiting.append(error)

        thread = threading.Thread(target=command)
        thread.start()
        assert wait_until(lambda: len(h._pending) == 1)
        os.kill(h.pid, signal.SIGKILL)
        thread.join(WAIT)
        assert len(waiting) == 1 and isinstance(waiting[0], EngineExited), waiting

        with pytest.raises(EngineExited) as exited:
            h.wait_for(lambda s: False, timeout=WAIT)
        error = exited.value
        assert error.returncode == -signal.SIGKILL
        assert error.signal == signal.SIGKILL
        assert not error.expected
        assert error.bye_reason is None
        assert error.stderr_tail and error.stderr_tail == h.stderr_tail
        assert "SIGKILL" in str(error) and error.stderr_tail[-1] in str(error)

        with pytest.raises(EngineExited):
            for _ in updates:
                pass
        with pytest.raises(EngineExited):
            h.source("steady")
        with pytest.raises(EngineExited):
            h.load(source="steady")


def test_invalid_configuration_raises_engine_exited_with_the_diagnostics(
    hammock_bin: str, write_config: Callable[[str], Path]
) -> None:
    config = write_config(
        """\
        sources:
          broken:
            kind: shell
            refresh: soon
        """
    )
    with pytest.raises(EngineExited) as exited:
        Hammock(config, binary=hammock_bin)
    assert exited.value.returncode not in (0, None)
    assert any(str(config) in line for line in exited.value.stderr_tail), exited.value.stderr_tail


def test_binary_from_argument_then_environment_then_path(
    hammock_bin: str, config: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HAMMOCK_BIN", "/from/environment")
    assert find_binary("/from/argument") == "/from/argument"
    assert find_binary(None) == "/from/environment"
    monkeypatch.delenv("HAMMOCK_BIN")
    monkeypatch.setenv("PATH", str(Path(hammock_bin).parent))
    assert find_binary(None) == str(Path(hammock_bin).parent / "hammock")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="HAMMOCK_BIN"):
        find_binary(None)
    with pytest.raises(FileNotFoundError):
        Hammock(config, binary=str(tmp_path / "no-hammock-here"))


# Control


def test_retry_after_the_cause_is_fixed(hammock_bin: str, config: Path) -> None:
    with Hammock(config, binary=hammock_bin) as h:
        h.wait_for(lambda s: s.view("both").can_try_again, timeout=WAIT)
        (config.parent / "ready.json").write_text('{"ok": true}')

        h.retry(view="both")
        states = h.wait_for(lambda s: s.view("both").status == "data", timeout=WAIT)
        assert states.view("both").content == {"flaky": {"ok": True}, "steady": {"text": "hello"}}
        assert states.view("both").errors == {}
        flaky = states.source("flaky")
        assert (flaky.content, flaky.latest_error, flaky.failures) == ({"ok": True}, None, 0)

        h.retry(view="both")  # nothing fails now: still acknowledged


def test_override_wipe_load_and_load_if_needed(hammock_bin: str, config: Path) -> None:
    with Hammock(config, binary=hammock_bin) as h:
        h.wait_for(lambda s: s.source("steady").content is not None, timeout=WAIT)

        h.override("steady", [1, "two", {"three": 3.5}])
        steady = h.source("steady")  # the newData line came before the ack
        assert (steady.content, steady.event, steady.origin) == ([1, "two", {"three": 3.5}], "newData", "override")

        at_ack = h.command("override", {"source": "steady", "content": 7})
        assert at_ack.source("steady").content == 7 and at_ack.seq > steady.seq

        h.wipe(source="steady")
        steady = h.source("steady")
        assert (steady.content, steady.origin) == (None, "wipe")

        with h.updates() as updates:
            h.load(source="steady")
            events: List[Tuple[Optional[str], Optional[str]]] = []
            while not events or events[-1] != ("newData", "load"):
                update = updates.get(timeout=WAIT)
                if isinstance(update, SourceState) and update.id == "steady":
                    events.append((update.event, update.origin))
            assert set(events) <= {("requested", None), ("newData", "load")}
        assert h.source("steady").content == {"text": "hello"}

        h.load_if_needed(source="steady")  # fresh for 30 s: nothing to do, acknowledged all the same
        h.load(view="both")


def test_cancel_and_snapshot(hammock_bin: str, config: Path) -> None:
    with Hammock(config, binary=hammock_bin) as h:
        h.wait_for(lambda s: s.source("stuck").is_loading, timeout=WAIT)
        h.cancel(source="stuck")
        stuck = h.wait_for(lambda s: not s.source("stuck").is_loading, timeout=WAIT).source("stuck")
        assert stuck.event == "requestCancelled"
        assert stuck.timestamp is None  # it never had data or an error, so a load is needed

        h.load_if_needed(source="stuck")
        h.wait_for(lambda s: s.source("stuck").is_loading, timeout=WAIT)
        h.cancel(view="both")  # nothing in flight there: acknowledged all the same
        h.cancel(source="stuck")
        h.wait_for(lambda s: not s.source("stuck").is_loading, timeout=WAIT)

        with h.updates() as updates:
            states = h.snapshot()
            assert set(states.sources) == {"flaky", "steady", "watched", "stuck"}
            rewritten = set()
            while True:
                try:
                    update = updates.get(timeout=0)
                except TimeoutError:
                    break
                assert isinstance(update, (SourceState, ViewState))
                rewritten.add(update.id)
        assert rewritten >= {"flaky", "steady", "watched", "stuck", "both"}  # all before the ack


def test_reload_removes_a_source(hammock_bin: str, config: Path) -> None:
    with Hammock(config, binary=hammock_bin) as h:
        h.wait_for(lambda s: s.source("steady").content is not None, timeout=WAIT)
        text = config.read_text()
        config.write_text(text.replace("sources: [flaky, steady]", "sources: [flaky]").replace(
            "  steady:\n    kind: fake\n    content: { text: hello }\n", ""
        ))
        with h.updates() as updates:
            h.reload()
            seen = []
            while True:
                try:
                    seen.append(updates.get(timeout=0))
                except TimeoutError:
                    break
        assert Removed(id="steady", what="source", seq=_seq_of(seen, Removed)) in seen
        reloaded = [u for u in seen if isinstance(u, Reloaded)]
        assert [r.sources for r in reloaded] == [("flaky", "watched", "stuck")]
        assert list(h.states().sources) == ["flaky", "watched", "stuck"]
        with pytest.raises(KeyError):
            h.source("steady")


def _seq_of(updates: List[Update], kind: type) -> int:
    return next(u.seq for u in updates if isinstance(u, kind))


def test_refused_reload_and_unknown_source_raise_hammocks_message(hammock_bin: str, config: Path) -> None:
    with Hammock(config, binary=hammock_bin) as h:
        with pytest.raises(CommandError) as unknown:
            h.load(source="nope")
        assert unknown.value.op == "load"
        assert "nope" in str(unknown.value)
        assert str(unknown.value) == unknown.value.message

        config.write_text("sources:\n  broken:\n    kind: shell\n    refresh: soon\n")
        with pytest.raises(CommandError) as refused:
            h.reload()
        assert f"{config}:" in str(refused.value)

        # hammock goes on with the running configuration.
        h.override("steady", "still here")
        assert h.source("steady").content == "still here"

        with pytest.raises(ValueError):
            h.load()
        with pytest.raises(ValueError):
            h.load(source="steady", view="both")
        with pytest.raises(ValueError):
            h.override("steady", float("nan"))


def test_commands_from_many_threads_each_get_their_answer(hammock_bin: str, config: Path) -> None:
    with Hammock(config, binary=hammock_bin) as h:
        h.wait_for(lambda s: s.source("steady").content is not None, timeout=WAIT)
        failures: List[BaseException] = []
        last = {}

        def worker(n: int) -> None:
            try:
                for i in range(15):
                    h.override("steady", {"worker": n, "i": i})
                    last[n] = {"worker": n, "i": i}
                    if i % 5 == 0:
                        with pytest.raises(CommandError):
                            h.wipe(source=f"missing-{n}")
            except BaseException as error:  # pragma: no cover - reported below
                failures.append(error)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT * 2)
        assert failures == []
        assert h.source("steady").content in list(last.values())
        assert h.source("steady").content["i"] == 14


# Lazy pages: `more` against a real HTTP server on 127.0.0.1


def test_more_loads_the_next_pages_and_meta_says_how_many(hammock_bin: str, tmp_path: Path) -> None:
    import http.server
    import json as jsonlib

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            page = int(self.path.split("page=")[1]) if "page=" in self.path else 1
            body = jsonlib.dumps(list(range((page - 1) * 2 + 1, page * 2 + 1))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if page < 4:
                self.send_header("Link", f'<http://127.0.0.1:{self.server.server_port}/items?page={page + 1}>; rel="next"')
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        path = tmp_path / "hammock.yaml"
        path.write_text(
            "sources:\n"
            f"  items: {{ kind: rest, url: 'http://127.0.0.1:{server.server_port}/items', paginate: {{ style: link, lazy: true }} }}\n"
        )
        with Hammock(path, binary=hammock_bin) as h:
            first = h.wait_for(lambda s: s.source("items").content is not None, timeout=WAIT).source("items")
            assert first.content == [1, 2]
            assert first.has_more and first.meta is not None and first.meta["pages"] == 1
            assert first.http_status == 200

            h.more("items")  # returns once the page is in
            assert h.source("items").content == [1, 2, 3, 4]
            h.more("items", count=5)
            after = h.source("items")
            assert after.content == list(range(1, 9))
            assert after.meta is not None and after.meta["pages"] == 4
            assert not after.has_more

            with pytest.raises(CommandError) as refused:
                h.more("items")
            assert "has no more pages" in refused.value.message
    finally:
        server.shutdown()
        server.server_close()
