"""`shared=True`: the clients over `hammock attach`, so over the configuration's one shared engine."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

from hammock_client import AsyncHammock, Hammock

from _support import WAIT, processes_naming, wait_until

CONFIG = """\
version: 1
sources:
  steady:
    kind: fake
    content: {{ text: hello }}
views:
  page:
    sources: [steady]
"""


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    """A private XDG_RUNTIME_DIR, so the test's engine meets no other; every engine in it is killed after."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    yield folder
    for pid in serves(folder):
        os.kill(pid, signal.SIGKILL)


def serves(runtime: Path) -> List[int]:
    """The `hammock serve` processes whose socket is under `runtime`."""
    found = []
    for pid in processes_naming(str(runtime)):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                arguments = file.read().split(b"\0")
        except OSError:
            continue
        if len(arguments) > 1 and arguments[1] == b"serve":
            found.append(pid)
    return found


def test_shared_sync_clients_read_one_engine(hammock_bin: str, tmp_path: Path, runtime: Path) -> None:
    config = tmp_path / "hammock.yaml"
    config.write_text(CONFIG.format())
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime))
    args = ["--idle-exit", "1s"]
    with Hammock(config, binary=hammock_bin, env=env, args=args, shared=True) as first:
        states = first.wait_for(lambda s: s.source("steady").content is not None, timeout=WAIT)
        assert states.source("steady").content == {"text": "hello"}
        with Hammock(config, binary=hammock_bin, env=env, args=args, shared=True) as second:
            states = second.wait_for(lambda s: s.view("page").status == "data", timeout=WAIT)
            assert states.view("page").content == {"steady": {"text": "hello"}}
            assert len(serves(runtime)) == 1, serves(runtime)
    # The engine outlives its clients by its idle time only.
    assert wait_until(lambda: serves(runtime) == []), serves(runtime)


def test_shared_async_client_with_socket(hammock_bin: str, tmp_path: Path, runtime: Path) -> None:
    config = tmp_path / "hammock.yaml"
    config.write_text(CONFIG.format())
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime))
    socket = runtime / "engine.sock"

    async def main() -> None:
        async with AsyncHammock(
            config, binary=hammock_bin, env=env, args=["--idle-exit", "1s"], shared=True, socket=socket
        ) as h:
            states = await h.wait_for(lambda s: s.source("steady").content is not None, timeout=WAIT)
            assert states.source("steady").content == {"text": "hello"}
            assert socket.exists()
            await h.load(source="steady")

    asyncio.run(asyncio.wait_for(main(), 120))


def test_socket_needs_shared(hammock_bin: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Hammock(tmp_path / "hammock.yaml", binary=hammock_bin, socket=tmp_path / "x.sock")
