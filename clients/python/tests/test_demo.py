"""The package README's example, run as it is against the project's demo configuration."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import hammock_client

REPO = Path(__file__).resolve().parents[3]


def test_readme_example_runs_on_the_demo(hammock_bin: str) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    match = re.search(r"```python\n(.*?)```", readme, re.S)
    assert match is not None
    example = match.group(1)
    assert len(example.strip().splitlines()) <= 11
    # Where this run imports the package from (installed, or the source folder), for the child too.
    package_root = str(Path(hammock_client.__file__).resolve().parents[1])
    result = subprocess.run(
        [sys.executable, "-c", example],
        cwd=REPO,
        env={**os.environ, "HAMMOCK_BIN": hammock_bin, "PYTHONPATH": package_root},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("load average: ") and "/" in lines[0]  # /proc/loadavg's "1/123" field
    assert lines[1] == "{'text': 'hi from Python'}"
    assert re.fullmatch(r"clock: \d\d:\d\d:\d\d", lines[2]), lines
