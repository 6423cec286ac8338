"""The states hammock reports, as frozen dataclasses, and their parsing from protocol lines."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Tuple, Union


@dataclass(frozen=True)
class LoadError:
    """Why a source's latest load failed (`latestError` on the wire)."""

    message: str
    http_status: Optional[int] = None
    exit_status: Optional[int] = None
    code: Optional[str] = None
    #: When the failing side said it may be asked again (a `Retry-After`, a rate limit's reset): hammock
    #: retries no sooner (`retryAt` on the wire).
    retry_at: Optional[datetime] = None

    @classmethod
    def from_json(cls, value: Any) -> Optional["LoadError"]:
        if not isinstance(value, dict):
            return None
        return cls(
            message=str(value.get("message", "")),
            http_status=_int_or_none(value.get("httpStatus")),
            exit_status=_int_or_none(value.get("exitStatus")),
            code=value.get("code") if isinstance(value.get("code"), str) else None,
            retry_at=parse_timestamp(value.get("retryAt")),
        )


@dataclass(frozen=True)
class SourceState:
    """The whole state of one source after its latest line.

    `event` and `origin` say what produced it (`event` is None before the source's first event; `origin`
    is set only with `newData`: `load`, `push`, `cache`, `override` or `wipe`).
    """

    id: str
    content: Any = None
    latest_error: Optional[LoadError] = None
    is_loading: bool = False
    timestamp: Optional[datetime] = None
    failures: int = 0
    event: Optional[str] = None
    origin: Optional[str] = None
    seq: int = 0
    #: What the loader said of the answer besides the content (`meta` on the wire), read-only; None when it
    #: said nothing. A rest source's has `httpStatus`, `etag`, `lastModified`, `contentType`, `url`,
    #: `headers` (those named in `expose-headers`) and, paginated, `pages` and `hasMore`; a shell source's
    #: `exitStatus`, `durationMs` and `outputBytes`; a file source's `size` and `modified`.
    meta: Optional[Mapping[str, Any]] = None

    @property
    def http_status(self) -> Optional[int]:
        """A rest source's latest HTTP status (`meta.httpStatus`)."""
        return _int_or_none((self.meta or {}).get("httpStatus"))

    @property
    def etag(self) -> Optional[str]:
        """A rest source's latest ETag (`meta.etag`)."""
        value = (self.meta or {}).get("etag")
        return value if isinstance(value, str) else None

    @property
    def has_more(self) -> bool:
        """Whether a paginated source's server has pages after these (`meta.hasMore`): `more()` loads them."""
        return (self.meta or {}).get("hasMore") is True


@dataclass(frozen=True)
class ViewState:
    """The whole state of one view after its latest line. `status` is loading, error, data or idle."""

    id: str
    status: str = "idle"
    content: Optional[Dict[str, Any]] = None
    latest_error: Optional[LoadError] = None
    errors: Mapping[str, LoadError] = field(default_factory=lambda: MappingProxyType({}))
    can_try_again: bool = False
    seq: int = 0


@dataclass(frozen=True)
class Removed:
    """A reload removed this source or view (`what` is "source" or "view")."""

    id: str
    what: str
    seq: int = 0


@dataclass(frozen=True)
class Reloaded:
    """The configuration was read again; these are the ids from now on, in file order."""

    sources: Tuple[str, ...]
    views: Tuple[str, ...]
    seq: int = 0


@dataclass(frozen=True)
class ErrorReport:
    """An `error` line that answers none of this client's waiting commands.

    For example a reload that SIGHUP asked for and that was refused, or the count of error lines dropped
    while the client did not read. `id` is set when the line answers a command whose wait already ended
    (it timed out).
    """

    message: str
    id: Optional[int] = None
    seq: int = 0


Update = Union[SourceState, ViewState, Removed, Reloaded, ErrorReport]
"""What `updates()` yields: one item for each line that changed something."""


@dataclass(frozen=True)
class States:
    """The latest state of every source and view at one moment (after the line numbered `seq`).

    `sources` and `views` are read-only mappings in the configuration's order. A source or view that has
    had no line yet has its initial state (no content, no error, not loading; a view is `idle`).
    """

    seq: int
    sources: Mapping[str, SourceState]
    views: Mapping[str, ViewState]

    def source(self, id: str) -> SourceState:
        try:
            return self.sources[id]
        except KeyError:
            raise KeyError(f"no source {id!r}; sources: {', '.join(self.sources) or 'none'}") from None

    def view(self, id: str) -> ViewState:
        try:
            return self.views[id]
        except KeyError:
            raise KeyError(f"no view {id!r}; views: {', '.join(self.views) or 'none'}") from None


EMPTY_STATES = States(seq=0, sources=MappingProxyType({}), views=MappingProxyType({}))


_TIMESTAMP = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?(?:([Zz])|([+-])(\d\d):?(\d\d))$"
)


def parse_timestamp(text: Any) -> Optional[datetime]:
    """An RFC 3339 timestamp as an aware datetime (hammock writes UTC with milliseconds).

    Written by hand because `datetime.fromisoformat` accepts neither `Z` nor three fraction digits
    before Python 3.11.
    """
    if not isinstance(text, str):
        return None
    match = _TIMESTAMP.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    if zulu:
        tz = timezone.utc
    else:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        tz = timezone(-offset if sign == "-" else offset)
    return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=tz)


def source_from_line(line: Mapping[str, Any]) -> SourceState:
    state = line.get("state")
    if not isinstance(state, dict):
        state = {}
    return SourceState(
        id=str(line.get("id")),
        content=state.get("content"),
        latest_error=LoadError.from_json(state.get("latestError")),
        is_loading=state.get("isLoading") is True,
        timestamp=parse_timestamp(state.get("timestamp")),
        failures=_int_or_none(state.get("failures")) or 0,
        event=line.get("event") if isinstance(line.get("event"), str) else None,
        origin=line.get("origin") if isinstance(line.get("origin"), str) else None,
        seq=_int_or_none(line.get("seq")) or 0,
        meta=MappingProxyType(dict(state["meta"])) if isinstance(state.get("meta"), dict) else None,
    )


def view_from_line(line: Mapping[str, Any]) -> ViewState:
    raw_errors = line.get("errors")
    errors: Dict[str, LoadError] = {}
    if isinstance(raw_errors, dict):
        for source, value in raw_errors.items():
            error = LoadError.from_json(value)
            if error is not None:
                errors[source] = error
    content = line.get("content")
    return ViewState(
        id=str(line.get("id")),
        status=str(line.get("status", "idle")),
        content=content if isinstance(content, dict) else None,
        latest_error=LoadError.from_json(line.get("latestError")),
        errors=MappingProxyType(errors),
        can_try_again=line.get("canTryAgain") is True,
        seq=_int_or_none(line.get("seq")) or 0,
    )


def _int_or_none(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
