"""The pure parts: timestamps and how lines build the latest states."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from hammock_client import ErrorReport, HammockError, LoadError, Reloaded, Removed, SourceState, ViewState
from hammock_client._engine import Model, encode_command
from hammock_client._states import parse_timestamp


def test_timestamps() -> None:
    assert parse_timestamp("2026-11-22T10:00:00.123Z") == datetime(2026, 11, 22, 10, 0, 0, 123000, tzinfo=timezone.utc)
    assert parse_timestamp("2026-11-22T10:00:00Z") == datetime(2026, 11, 22, 10, tzinfo=timezone.utc)
    assert parse_timestamp("2026-11-22T10:00:00.1234567+02:00") == datetime(
        2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))
    )
    assert parse_timestamp(None) is None
    assert parse_timestamp("yesterday") is None


def test_lines_build_the_latest_states() -> None:
    model = Model()
    model.apply({"type": "hello", "seq": 1, "protocol": 1, "version": "0.1.0", "sources": ["a", "b"], "views": ["v"]})
    assert list(model.states.sources) == ["a", "b"]
    assert model.states.source("b") == SourceState(id="b")
    assert model.states.view("v") == ViewState(id="v")

    error = {"message": "down", "httpStatus": 503}
    outcome = model.apply(
        {
            "type": "source", "seq": 2, "id": "a", "event": "error",
            "state": {"content": [1], "latestError": error, "isLoading": False,
                      "timestamp": "2026-11-22T10:00:00.000Z", "failures": 2},
        }
    )
    a = model.states.source("a")
    assert outcome.update == a
    assert (a.content, a.latest_error, a.failures, a.seq) == ([1], LoadError("down", http_status=503), 2, 2)
    before = model.states

    model.apply({"type": "view", "seq": 3, "id": "v", "status": "error", "content": None, "latestError": error,
                 "errors": {"a": error}, "canTryAgain": True})
    assert model.states.view("v").errors == {"a": LoadError("down", http_status=503)}
    # A rate limit's reset, for a program: `retryAt`.
    held = {"message": "used up", "code": "rateLimited", "retryAt": "2026-11-22T11:00:00.000Z"}
    model.apply({"type": "view", "seq": 3, "id": "v", "status": "error", "content": None, "latestError": held,
                 "errors": {"a": held}, "canTryAgain": True})
    assert model.states.view("v").latest_error.retry_at == datetime(2026, 11, 22, 11, 0, tzinfo=timezone.utc)
    assert before.views["v"] == ViewState(id="v")  # an older States is never changed

    assert model.apply({"type": "removed", "seq": 4, "id": "b", "what": "source"}).update == Removed("b", "source", 4)
    model.apply({"type": "source", "seq": 5, "id": "c", "event": "requested", "state": {"isLoading": True}})
    reloaded = model.apply({"type": "reloaded", "seq": 6, "sources": ["c", "a", "d"], "views": ["v"]}).update
    assert reloaded == Reloaded(("c", "a", "d"), ("v",), 6)
    assert list(model.states.sources) == ["c", "a", "d"]
    assert model.states.source("c").is_loading and model.states.source("a").content == [1]
    with pytest.raises(KeyError, match="no source 'b'"):
        model.states.source("b")

    assert model.apply({"type": "ack", "seq": 7, "id": 3}).reply.error is None  # type: ignore[union-attr]
    assert model.apply({"type": "error", "seq": 8, "id": 4, "message": "no"}).reply.error == "no"  # type: ignore[union-attr]
    assert model.apply({"type": "error", "seq": 9, "message": "refused"}).update == ErrorReport("refused", seq=9)
    assert model.apply({"type": "something-new", "seq": 10}).update is None
    # Fields this client does not know (a newer engine's) are passed over too.
    newer = model.apply({"type": "source", "seq": 10, "id": "a", "event": "newData", "fromTheFuture": {"x": 1},
                         "state": {"content": [2], "isLoading": False, "failures": 0, "alsoNew": True}}).update
    assert newer == model.states.source("a") and model.states.source("a").content == [2]
    model.apply({"type": "bye", "seq": 11, "reason": "signal"})
    assert model.bye_reason == "signal"


def test_a_newer_protocol_is_refused() -> None:
    with pytest.raises(HammockError, match="protocol 2"):
        Model().apply({"type": "hello", "seq": 1, "protocol": 2, "sources": [], "views": []})


def test_control_lines() -> None:
    assert encode_command(7, "override", {"source": "s", "content": {"é": 1}}) == (
        '{"op":"override","source":"s","content":{"é":1},"id":7}\n'.encode()
    )
    with pytest.raises(ValueError):
        encode_command(1, "override", {"source": "s", "content": float("inf")})
