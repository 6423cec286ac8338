"""Fixtures: the real hammock binary and a configuration of each test's own in a temporary folder."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[3]

# A source that fails until `ready.json` exists beside the configuration (no automatic retry, so only
# the test's own commands move it), a fake one with content at once, a watched file, and a load that
# never ends by itself (for `cancel`; its command line names the folder, so a test can see it is gone),
# merged into a view that needs the first two.
CONFIG = """\
version: 1
sources:
  flaky:
    kind: shell
    script: "cat ready.json"
    cwd: {dir}
    parse: json
    retry: off
  steady:
    kind: fake
    content: {{ text: hello }}
  watched:
    kind: file
    path: {dir}/data.json
  stuck:
    kind: shell
    script: "sleep 3600; : {dir}"
    timeout: 1h
views:
  both:
    sources: [flaky, steady]
    ready: all
"""


@pytest.fixture(scope="session")
def hammock_bin() -> str:
    path = os.environ.get("HAMMOCK_BIN") or str(REPO / ".build" / "debug" / "hammock")
    if not os.access(path, os.X_OK):
        pytest.fail(f"these tests run the real hammock: build it (swift build) or set HAMMOCK_BIN; {path} is missing")
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The configuration above; `ready.json` is absent at first."""
    path = tmp_path / "hammock.yaml"
    path.write_text(CONFIG.format(dir=str(tmp_path)))
    (tmp_path / "data.json").write_text('{"n": 0}')
    return path


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = tmp_path / "hammock.yaml"
        path.write_text(textwrap.dedent(text).format(dir=str(tmp_path)))
        return path

    return write
