"""What the synchronous and the asyncio client share: finding the binary, applying lines, ids."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._errors import CommandError, HammockError
from ._states import (
    EMPTY_STATES,
    ErrorReport,
    Reloaded,
    Removed,
    SourceState,
    States,
    Update,
    ViewState,
    source_from_line,
    view_from_line,
)

PathLike = Union[str, "os.PathLike[str]"]

STDERR_TAIL_LINES = 50
PROTOCOL_VERSION = 1


def find_binary(binary: Optional[PathLike]) -> str:
    """`binary`, else `$HAMMOCK_BIN`, else `hammock` on `PATH`."""
    if binary is not None:
        return os.fspath(binary)
    from_env = os.environ.get("HAMMOCK_BIN")
    if from_env:
        return from_env
    found = shutil.which("hammock")
    if found is None:
        raise FileNotFoundError(
            "cannot find the hammock binary: pass binary=..., set HAMMOCK_BIN, or put hammock on PATH"
        )
    return found


def command_line(binary: str, config: PathLike, args: Sequence[str]) -> List[str]:
    """`hammock run [ARGS…] CONFIG`; `args` is for options such as `["--log-level", "debug"]`."""
    return [binary, "run", *args, os.fspath(config)]


def encode_command(id: int, op: str, fields: Mapping[str, Any]) -> bytes:
    """One control line. `allow_nan=False`: NaN is not JSON, and hammock would refuse the whole line."""
    message: Dict[str, Any] = {"op": op}
    message.update(fields)
    message["id"] = id
    return (json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n").encode()


def target_fields(op: str, source: Optional[str], view: Optional[str]) -> Dict[str, str]:
    """`{"source": id}` or `{"view": id}`: checked here so a slip fails before it reaches the engine."""
    if source is not None and view is None:
        return {"source": source}
    if view is not None and source is None:
        return {"view": view}
    raise ValueError(f"{op} takes a source or a view (exactly one of them)")


@dataclass(frozen=True)
class Hello:
    """hammock's first line."""

    protocol: int
    version: str
    sources: Tuple[str, ...]
    views: Tuple[str, ...]


@dataclass(frozen=True)
class Reply:
    """hammock's answer to a command that carried an id: an ack (`error` is None) or an error."""

    id: Any
    error: Optional[str]
    seq: int


@dataclass(frozen=True)
class Outcome:
    """What one line did: a change for subscribers, an answer to a command, or neither."""

    update: Optional[Update] = None
    reply: Optional[Reply] = None


class Model:
    """The latest state per id, built from hammock's lines in the order they are read.

    No I/O and no locking: each client feeds it from one reader and guards it its own way. `states` is
    replaced, never mutated, so a reader of an older `States` is never disturbed.
    """

    def __init__(self) -> None:
        self.states: States = EMPTY_STATES
        self.hello: Optional[Hello] = None
        self.bye_reason: Optional[str] = None
        self._sources: Dict[str, SourceState] = {}
        self._views: Dict[str, ViewState] = {}
        self._seq = 0

    def apply(self, line: Any) -> Outcome:
        if not isinstance(line, dict):
            return Outcome()
        seq = line.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool):
            self._seq = seq
        kind = line.get("type")
        if kind == "hello":
            protocol = line.get("protocol")
            if protocol != PROTOCOL_VERSION:
                raise HammockError(f"hammock speaks protocol {protocol!r}; this client knows {PROTOCOL_VERSION}")
            sources, views = _ids(line.get("sources")), _ids(line.get("views"))
            self.hello = Hello(protocol, str(line.get("version", "")), sources, views)
            self._reorder(sources, views)
            self._publish()
            return Outcome()
        if kind == "source":
            state = source_from_line(line)
            self._sources[state.id] = state
            self._publish()
            return Outcome(update=state)
        if kind == "view":
            view = view_from_line(line)
            self._views[view.id] = view
            self._publish()
            return Outcome(update=view)
        if kind == "removed":
            removed = Removed(id=str(line.get("id")), what=str(line.get("what")), seq=self._seq)
            (self._sources if removed.what == "source" else self._views).pop(removed.id, None)
            self._publish()
            return Outcome(update=removed)
        if kind == "reloaded":
            reloaded = Reloaded(_ids(line.get("sources")), _ids(line.get("views")), seq=self._seq)
            self._reorder(reloaded.sources, reloaded.views)
            self._publish()
            return Outcome(update=reloaded)
        if kind == "ack":
            return Outcome(reply=Reply(line.get("id"), None, self._seq))
        if kind == "error":
            message = str(line.get("message", ""))
            if "id" in line:
                return Outcome(reply=Reply(line.get("id"), message, self._seq))
            return Outcome(update=ErrorReport(message=message, seq=self._seq))
        if kind == "bye":
            self.bye_reason = str(line.get("reason"))
        # Types this client does not know yet are skipped, so a newer hammock's additions break nothing.
        return Outcome()

    def _reorder(self, sources: Tuple[str, ...], views: Tuple[str, ...]) -> None:
        """Configuration order; ids with no line yet get their initial state."""
        self._sources = {id: self._sources.get(id) or SourceState(id=id) for id in sources}
        self._views = {id: self._views.get(id) or ViewState(id=id) for id in views}

    def _publish(self) -> None:
        self.states = States(
            seq=self._seq,
            sources=MappingProxyType(dict(self._sources)),
            views=MappingProxyType(dict(self._views)),
        )


def late_reply_report(reply: Reply) -> Optional[Update]:
    """An error that answers a command nobody waits for any more still reaches subscribers."""
    if reply.error is None:
        return None
    return ErrorReport(message=reply.error, id=reply.id if isinstance(reply.id, int) else None, seq=reply.seq)


def command_error(reply: Reply, op: str, id: int) -> CommandError:
    return CommandError(reply.error or "", op=op, id=id)


def parse_line(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None  # not a protocol line; hammock writes none, and one bad line must not stop the reader


def _ids(value: Any) -> Tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()
