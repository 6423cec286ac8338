"""`AsyncHammock` against the real binary: the same behaviour over asyncio."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any, Awaitable, Callable, List

import pytest

from hammock_client import AsyncHammock, CommandError, EngineExited, Reloaded, Removed, SourceState, Update

from _support import WAIT, is_stopped, processes_naming, wait_until


def run(test: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(test(), 120))


def test_start_states_updates_and_close(hammock_bin: str, config: Path) -> None:
    folder = str(config.parent)

    async def main() -> AsyncHammock:
        unstarted = AsyncHammock(config, binary=hammock_bin)
        assert repr(unstarted) == "<AsyncHammock not started>"
        assert unstarted.returncode is None
        async with AsyncHammock(config, binary=hammock_bin) as h:
            assert repr(h) == f"<AsyncHammock pid={h.pid} running>"
            assert list(h.states().sources) == ["flaky", "steady", "watched", "stuck"]
            states = await h.wait_for(
                lambda s: s.source("flaky").latest_error is not None and s.source("watched").content is not None,
                timeout=WAIT,
            )
            assert states.source("flaky").latest_error.exit_status == 1  # type: ignore[union-attr]
            assert states.source("watched").content == {"n": 0}

            updates = h.updates()
            (config.parent / "data.json").write_text('{"n": 1}')
            async for update in updates:
                if isinstance(update, SourceState) and update.content == {"n": 1}:
                    break
            assert h.source("watched").origin == "push"
            updates.close()

            with pytest.raises(TimeoutError):
                await h.wait_for(lambda s: False, timeout=0.3)
        return h

    h = run(main)
    assert h.returncode == 0
    assert repr(h) == f"<AsyncHammock pid={h.pid} exited 0>"
    assert h.bye_reason == "signal"
    assert wait_until(lambda: processes_naming(folder) == []), processes_naming(folder)


def test_updates_initial_starts_with_every_current_state(hammock_bin: str, config: Path) -> None:
    async def main() -> None:
        async with AsyncHammock(config, binary=hammock_bin) as h:
            await h.wait_for(lambda s: s.source("steady").content is not None, timeout=WAIT)
            initial, plain = h.updates(initial=True), h.updates()
            first = [await initial.get(timeout=0) for _ in range(5)]
            assert [u.id for u in first] == ["flaky", "steady", "watched", "stuck", "both"]  # type: ignore[union-attr]
            assert first[1] == h.source("steady")
            # Then both see the same changes: the default (`initial=False`) starts with them. No line is read
            # between the two calls above (no await), so the two must agree exactly.
            (config.parent / "data.json").write_text('{"n": 1}')
            seen: List[Update] = []
            while not (isinstance(seen[-1:] and seen[-1], SourceState) and seen[-1].content == {"n": 1}):  # type: ignore[union-attr]
                seen.append(await initial.get(timeout=WAIT))
            assert [await plain.get(timeout=WAIT) for _ in seen] == seen
            initial.close()
            plain.close()

    run(main)


def test_control_commands(hammock_bin: str, config: Path) -> None:
    async def main() -> None:
        async with AsyncHammock(config, binary=hammock_bin) as h:
            await h.wait_for(lambda s: s.view("both").can_try_again, timeout=WAIT)
            (config.parent / "ready.json").write_text("[1, 2]")
            await h.retry(view="both")
            await h.wait_for(lambda s: s.view("both").status == "data", timeout=WAIT)
            assert h.view("both").content == {"flaky": [1, 2], "steady": {"text": "hello"}}

            await h.override("steady", {"set": "by test"})
            assert h.source("steady").content == {"set": "by test"}
            await h.wipe(source="steady")
            assert (h.source("steady").content, h.source("steady").origin) == (None, "wipe")
            await h.load(source="steady")
            await h.wait_for(lambda s: s.source("steady").content == {"text": "hello"}, timeout=WAIT)
            await h.load_if_needed(source="flaky")
            await h.cancel(source="stuck")
            await h.wait_for(lambda s: s.source("stuck").event == "requestCancelled", timeout=WAIT)
            assert set((await h.snapshot()).views) == {"both"}

            # Commands sent together each get their own answer.
            results = await asyncio.gather(
                *[h.override("steady", n) for n in range(20)], h.load(source="nope"), return_exceptions=True
            )
            assert results[:20] == [None] * 20
            assert isinstance(results[20], CommandError) and "nope" in str(results[20])

            config.write_text(config.read_text().replace("  stuck:\n", "  stuck2:\n"))
            with h.updates() as updates:
                await h.reload()
                seen: List[Update] = []
                while True:
                    try:
                        seen.append(await updates.get(timeout=0))
                    except TimeoutError:
                        break
            assert any(isinstance(u, Removed) and u.id == "stuck" for u in seen)
            assert any(isinstance(u, Reloaded) and "stuck2" in u.sources for u in seen)
            assert "stuck" not in h.states().sources

    run(main)


def test_killed_engine_raises_engine_exited(hammock_bin: str, config: Path) -> None:
    async def main() -> None:
        async with AsyncHammock(config, binary=hammock_bin, args=["--log-level", "debug"]) as h:
            await h.wait_for(lambda s: s.source("steady").content is not None, timeout=WAIT)
            updates = h.updates()
            os.kill(h.pid, signal.SIGSTOP)  # a command now waits for an answer that never comes
            assert wait_until(lambda: is_stopped(h.pid))
            waiting = asyncio.ensure_future(h.override("steady", "never answered"))

            async def registered() -> None:
                while not h._pending:
                    await asyncio.sleep(0.01)

            await asyncio.wait_for(registered(), WAIT)
            os.kill(h.pid, signal.SIGKILL)
            with pytest.raises(EngineExited):
                await waiting
            with pytest.raises(EngineExited) as exited:
                await h.wait_for(lambda s: False, timeout=WAIT)
            assert exited.value.returncode == -signal.SIGKILL
            assert exited.value.stderr_tail
            with pytest.raises(EngineExited):
                async for _ in updates:
                    pass
            with pytest.raises(EngineExited):
                await h.override("steady", 1)
            with pytest.raises(EngineExited):
                h.view("both")

    run(main)


def test_invalid_configuration_raises_engine_exited(hammock_bin: str, write_config: Callable[[str], Path]) -> None:
    config = write_config("sources:\n  broken:\n    kind: shell\n    refresh: soon\n")

    async def main() -> None:
        with pytest.raises(EngineExited) as exited:
            async with AsyncHammock(config, binary=hammock_bin):
                pass
        assert exited.value.returncode not in (0, None)
        assert any(str(config) in line for line in exited.value.stderr_tail)

    run(main)
