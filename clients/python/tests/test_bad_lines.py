"""Lines a client cannot read (red team, round three): each is reported as an `ErrorReport` and the reader
goes on, so later lines are seen and commands answered; a line without end costs at most `max_line_bytes`.
Run against the real hammock where it writes such a line itself (a 5,000-digit number), else against a
stand-in process that writes them (`_support.fake_engine`)."""

from __future__ import annotations

import asyncio
import tracemalloc
from decimal import Decimal
from pathlib import Path
from typing import Callable, List

import pytest

from hammock_client import AsyncHammock, ErrorReport, Hammock, SourceState, Update

from _support import WAIT, fake_engine

NOT_JSON = b"this is not JSON\n"
DEEP = b"[" * 10_000 + b"]" * 10_000 + b"\n"
NOT_AN_OBJECT = b"[1, 2, 3]\n"


def updates_until_good_line(h: Hammock) -> List[Update]:
    """The updates from the stand-in's `go` until its good source line."""
    seen: List[Update] = []
    updates = h.updates()
    h.command("go")
    while True:
        update = updates.get(timeout=WAIT)
        seen.append(update)
        if isinstance(update, SourceState) and update.content == "after the bad lines":
            updates.close()
            return seen


def test_a_5000_digit_number_hammock_wrote_becomes_a_decimal(hammock_bin: str, write_config: Callable[[str], Path], tmp_path: Path) -> None:
    digits = "9" * 5000
    (tmp_path / "big.json").write_text('{"big": %s, "small": 7}' % digits)
    config = write_config(
        """\
        version: 1
        sources:
          big:
            kind: file
            path: {dir}/big.json
          steady:
            kind: fake
            content: ok
        """
    )
    with Hammock(config, binary=hammock_bin) as h:
        states = h.wait_for(lambda s: s.source("big").content is not None and s.source("steady").content is not None)
        assert states.source("big").content == {"big": Decimal(digits), "small": 7}
        assert type(states.source("big").content["small"]) is int
        # The reader went on: a command is answered and its line seen.
        h.override("steady", "after")
        assert h.source("steady").content == "after"


@pytest.mark.parametrize("bad", [NOT_JSON, DEEP, NOT_AN_OBJECT], ids=["not-json", "10000-deep", "not-an-object"])
def test_a_bad_line_is_reported_and_the_reader_goes_on(tmp_path: Path, bad: bytes) -> None:
    with Hammock("unused.yaml", binary=fake_engine(tmp_path, bad), command_timeout=WAIT) as h:
        seen = updates_until_good_line(h)
        reports = [update for update in seen if isinstance(update, ErrorReport)]
        assert len(reports) == 1, seen
        assert "could not read" in reports[0].message
        assert bad.strip()[:20].decode() in reports[0].message
        # Commands are still answered.
        states = h.snapshot()
        assert states.source("s").content == "snapshot"


def test_every_bad_line_in_a_row_is_reported(tmp_path: Path) -> None:
    with Hammock("unused.yaml", binary=fake_engine(tmp_path, NOT_JSON + DEEP + NOT_AN_OBJECT + b"\xff\xfe\n")) as h:
        reports = [update for update in updates_until_good_line(h) if isinstance(update, ErrorReport)]
        assert [("not JSON" in r.message, "deeper" in r.message, "not a JSON object" in r.message) for r in reports] == [
            (True, False, False),
            (False, True, False),
            (False, False, True),
            (True, False, False),
        ]


def test_a_line_beyond_max_line_bytes_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    # 48 MiB without a newline, then its end: with a bound of 1 MiB the client keeps at most about that.
    endless = b"x" * (48 << 20) + b"\n"
    binary = fake_engine(tmp_path, endless)
    tracemalloc.start()
    try:
        with Hammock("unused.yaml", binary=binary, max_line_bytes=1 << 20) as h:
            reports = [update for update in updates_until_good_line(h) if isinstance(update, ErrorReport)]
            peak = tracemalloc.get_traced_memory()[1]
            assert len(reports) == 1
            assert f"a line of {48 << 20} bytes, beyond max_line_bytes ({1 << 20})" in reports[0].message
            assert h.snapshot().source("s").content == "snapshot"
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"the client held {peak} bytes for a line it skips"


def test_a_line_at_max_line_bytes_is_read(tmp_path: Path) -> None:
    line = b'"' + b"y" * 998 + b'"'  # 1,000 bytes, a JSON string: not an object, so reported, but read
    with Hammock("unused.yaml", binary=fake_engine(tmp_path, line + b"\n"), max_line_bytes=1000) as h:
        reports = [update for update in updates_until_good_line(h) if isinstance(update, ErrorReport)]
        assert len(reports) == 1 and "not a JSON object" in reports[0].message, reports


def test_async_client_reports_bad_lines_and_bounds_them(tmp_path: Path) -> None:
    lines = NOT_JSON + DEEP + b"z" * (8 << 20) + b"\n"

    async def main() -> List[Update]:
        seen: List[Update] = []
        async with AsyncHammock("unused.yaml", binary=fake_engine(tmp_path, lines), max_line_bytes=1 << 20) as h:
            updates = h.updates()
            await h.command("go")
            while True:
                update = await updates.get(timeout=WAIT)
                seen.append(update)
                if isinstance(update, SourceState) and update.content == "after the bad lines":
                    break
            assert (await h.snapshot()).source("s").content == "snapshot"
        return seen

    reports = [u.message for u in asyncio.run(main()) if isinstance(u, ErrorReport)]
    assert len(reports) == 3, reports
    assert "not JSON" in reports[0] and "deeper" in reports[1]
    assert f"a line of {8 << 20} bytes, beyond max_line_bytes ({1 << 20})" in reports[2]
