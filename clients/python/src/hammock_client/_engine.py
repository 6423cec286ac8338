"""What the synchronous and the asyncio client share: finding the binary, applying lines, ids, and
`ClientCore` / `UpdatesCore`, everything of the two clients that neither blocks nor awaits."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import weakref
from collections import deque
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import (
    Any,
    ClassVar,
    ContextManager,
    Deque,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    cast,
)

from ._errors import CommandError, EngineExited, HammockError
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
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest stdout line the clients read (`max_line_bytes`): content can be a whole file or an API's
answer, but a line without end must not take the client's memory with it."""


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


def command_line(
    binary: str,
    config: PathLike,
    args: Sequence[str],
    shared: bool = False,
    socket: Optional[PathLike] = None,
) -> List[str]:
    """`hammock run [ARGS…] CONFIG`; `args` is for options such as `["--log-level", "debug"]`.

    `shared=True`: `hammock attach [--socket SOCKET] [ARGS…] CONFIG` instead, which reads the configuration's
    shared engine (`hammock serve`, started by `attach` when none runs) with the same stdout and stdin as
    `run`: one engine for every consumer of the configuration."""
    if not shared:
        if socket is not None:
            raise ValueError("socket= names a shared engine's socket: pass shared=True too")
        return [binary, "run", *args, os.fspath(config)]
    socket_args = ["--socket", os.fspath(socket)] if socket is not None else []
    return [binary, "attach", *socket_args, *args, os.fspath(config)]


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
        self.bad_lines = 0  # lines that could not be read, each reported as an `ErrorReport`
        self.latest_bad_line: Optional[str] = None

    def apply(self, line: Any) -> Outcome:
        if isinstance(line, BadLine):
            self.bad_lines += 1
            self.latest_bad_line = line.describe()
            return Outcome(update=ErrorReport(message=self.latest_bad_line, seq=self._seq))
        if not isinstance(line, dict):
            return self.apply(BadLine("not a JSON object", json.dumps(line)[: QUOTED_BYTES + 1].encode()))
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


@dataclass(frozen=True)
class BadLine:
    """A stdout line this client could not read: not JSON, nested too deep for Python's parser, not a
    JSON object, or longer than `max_line_bytes`. It becomes an `ErrorReport`; the lines after it are read
    as usual."""

    reason: str
    start: bytes = b""  # the line's first bytes, to quote

    def describe(self) -> str:
        quoted = self.start[:QUOTED_BYTES].decode("utf-8", errors="replace")
        more = "…" if len(self.start) > QUOTED_BYTES else ""
        return f"hammock wrote a line this client could not read ({self.reason}): {quoted!r}{more}"


QUOTED_BYTES = 200

# Python 3.11+ refuses to turn more than 4,300 digits into an int (a guard against slow conversions), and
# hammock writes a number exactly as its source gave it. Longer integers become a `Decimal`, which keeps
# every digit and is fast to make.
_LONGEST_INT = 4000


def _parse_int(text: str) -> Union[int, Decimal]:
    return int(text) if len(text) <= _LONGEST_INT else Decimal(text)


def parse_line(raw: bytes) -> Any:
    """One line as JSON, or a `BadLine` saying why not. Never raises: one bad line must not stop the
    reader, or every line after it would go unseen."""
    try:
        return json.loads(raw, parse_int=_parse_int)
    except RecursionError:
        return BadLine("nested deeper than Python's JSON parser goes", bytes(raw[: QUOTED_BYTES + 1]))
    except ValueError as error:  # JSONDecodeError, and UnicodeDecodeError for bytes that are not UTF-8
        return BadLine(f"not JSON: {error}", bytes(raw[: QUOTED_BYTES + 1]))


def too_long(length: int, max_line_bytes: int) -> BadLine:
    return BadLine(f"a line of {length} bytes, beyond max_line_bytes ({max_line_bytes}); skipped")


def bounded_lines(stream: Any, max_line_bytes: int) -> Iterator[Union[bytes, BadLine]]:
    """The lines of a binary stream (a `BufferedReader`) without their newline, each at most
    `max_line_bytes` long; a longer one is read to its end without being kept, and given as a `BadLine`."""
    while True:
        line: bytes = stream.readline(max_line_bytes + 1)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line[:-1]
            continue
        if len(line) <= max_line_bytes:
            yield line  # the last line, without its newline
            continue
        length = len(line)
        while not line.endswith(b"\n"):
            line = stream.readline(1 << 20)
            if not line:
                break
            length += len(line)
        yield too_long(length - line.endswith(b"\n"), max_line_bytes)


def _ids(value: Any) -> Tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


END = object()  # put on every subscription's queue once hammock has exited
QueueItem = Union[Tuple[Update, States], object]


class ProcessLike(Protocol):
    """What the shared code reads of hammock's process: a `subprocess.Popen` or an asyncio `Process`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> Optional[int]: ...


class Answer(Protocol):
    """What a command's caller waits on: a `concurrent.futures.Future` or an `asyncio.Future`."""

    def done(self) -> bool: ...

    def set_result(self, __result: States) -> None: ...

    def set_exception(self, __exception: BaseException) -> None: ...


_Self = TypeVar("_Self", bound="UpdatesCore")


class UpdatesCore:
    """What `Updates` and `AsyncUpdates` share: closing, and what an item taken from the queue means.
    Each keeps its own queue and its own way of waiting on it."""

    def __init__(self, owner: "ClientCore") -> None:
        self._owner = owner
        self._done = False

    def close(self) -> None:
        """Stop receiving updates (an iterator that is never read keeps every update until closed)."""
        self._done = True
        self._owner._unsubscribe(self)

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _put(self, item: QueueItem) -> None:
        raise NotImplementedError

    def _unpack(self, item: QueueItem) -> Optional[Tuple[Update, States]]:
        """The update and the states after it; None at the end of a stop that was asked for. Raises
        `EngineExited` when hammock ended by itself."""
        if item is not END:
            return cast(Tuple[Update, States], item)
        self._done = True
        error = self._owner._exit_error()
        if error is None or error.expected:
            return None
        raise error


class ClientCore:
    """What `Hammock` and `AsyncHammock` share: the model, the commands waiting for an answer, the
    subscribers, the exit, and what each line read does to them. Each client reads hammock's output
    its own way (threads or asyncio) and hands it to `_apply`, `_note_stderr` and `_exited`.

    `_guard` keeps this state whole: a lock where threads share it, nothing on an event loop (one
    thread). The `_…_locked` methods and the `_raise_if_…` checks expect it held; the other methods
    take it, so never call them holding it (the lock does not nest).
    """

    _name: ClassVar[str]  # the class's name in `repr`

    def __init__(self, guard: ContextManager[object], stop_timeout: float, command_timeout: Optional[float]) -> None:
        self._guard = guard
        self._model = Model()
        self._subscribers: "weakref.WeakSet[UpdatesCore]" = weakref.WeakSet()
        self._pending: Dict[int, Tuple[str, Answer]] = {}
        self._ids = itertools.count(1)
        self._stderr_tail: Deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._exit: Optional[EngineExited] = None
        self._fatal: Optional[HammockError] = None  # a line this client cannot follow: it stops hammock
        self._closing = False
        self._stop_timeout = stop_timeout
        self._command_timeout = command_timeout

    # What each client supplies

    def _running_process(self) -> ProcessLike:
        raise NotImplementedError

    def _process_if_started(self) -> Optional[ProcessLike]:
        raise NotImplementedError

    def _terminate(self) -> None:
        """SIGTERM to hammock unless it has exited."""
        raise NotImplementedError

    def _wake_locked(self) -> None:
        """After each line and at the exit: whoever waits for the hello (or the fatal error, or the exit)
        may look again."""
        raise NotImplementedError

    # Public, the same in both clients

    @property
    def pid(self) -> int:
        return self._running_process().pid

    @property
    def returncode(self) -> Optional[int]:
        """None while hammock runs; then its exit status (negative: the signal that ended it)."""
        process = self._process_if_started()
        return process.returncode if process is not None else None

    @property
    def version(self) -> str:
        """hammock's version, from its `hello`."""
        hello = self._model.hello
        return hello.version if hello is not None else ""

    @property
    def bye_reason(self) -> Optional[str]:
        return self._model.bye_reason

    @property
    def stderr_tail(self) -> Tuple[str, ...]:
        """The last lines (up to 50) hammock wrote on stderr."""
        with self._guard:
            return tuple(self._stderr_tail)

    def states(self) -> States:
        """Every source's and view's latest state, as of the newest line read."""
        with self._guard:
            self._raise_if_died()
            return self._model.states

    def source(self, id: str) -> SourceState:
        return self.states().source(id)

    def view(self, id: str) -> ViewState:
        return self.states().view(id)

    def __repr__(self) -> str:
        process = self._process_if_started()
        if process is None:
            return f"<{self._name} not started>"
        state = "running" if process.returncode is None else f"exited {process.returncode}"
        return f"<{self._name} pid={process.pid} {state}>"

    # Subscriptions

    def _subscribe(self, subscription: UpdatesCore, initial: bool = False) -> None:
        """With `initial`, the subscription first receives every source's and view's current state (in the
        configuration's order, sources first), then every change after them: no line falls in between."""
        with self._guard:
            if initial and self._exit is None:
                states = self._model.states
                for state in [*states.sources.values(), *states.views.values()]:
                    subscription._put((state, states))
            self._subscribe_locked(subscription)

    def _watch(self, subscription: UpdatesCore) -> States:
        """The states now, with `subscription` receiving every change after them (for `wait_for`)."""
        with self._guard:
            self._raise_if_died()
            self._subscribe_locked(subscription)
            return self._model.states

    def _subscribe_locked(self, subscription: UpdatesCore) -> None:
        """With the guard held, so no line falls between the states read and the subscription."""
        self._subscribers.add(subscription)
        if self._exit is not None:
            subscription._put(END)

    def _unsubscribe(self, subscription: UpdatesCore) -> None:
        with self._guard:
            self._subscribers.discard(subscription)

    # Commands

    def _register(self, op: str, fields: Optional[Mapping[str, Any]], answer: Answer) -> Tuple[int, bytes]:
        """Number and encode a command, and file `answer` to receive hammock's reply; raises if hammock
        has stopped or is being stopped."""
        with self._guard:
            id = next(self._ids)
        line = encode_command(id, op, fields or {})
        with self._guard:
            self._raise_if_stopped()
            self._pending[id] = (op, answer)
        return id, line

    def _forget(self, id: int) -> None:
        """A command nobody waits for any more: a late error reaches subscribers instead."""
        with self._guard:
            self._pending.pop(id, None)

    def _unanswered_note(self) -> str:
        """For a command that timed out: lines that could not be read may have held its answer."""
        with self._guard:
            if self._model.bad_lines == 0:
                return ""
            return f"; {self._model.bad_lines} lines from hammock could not be read, the latest: {self._model.latest_bad_line}"

    def _write_failed(self) -> HammockError:
        """Call once the reader has seen the exit that broke the pipe, so that the exit is what is reported."""
        return self._exit_error() or HammockError("cannot write to hammock's stdin")

    # What hammock writes

    def _apply(self, line: Any) -> None:
        with self._guard:
            try:
                outcome = self._model.apply(line)
            except HammockError as error:
                self._fatal = error
                self._wake_locked()
                self._terminate()
                return
            if outcome.reply is not None:
                self._answer(outcome.reply)
            if outcome.update is not None:
                self._publish(outcome.update)
            self._wake_locked()

    def _answer(self, reply: Reply) -> None:
        waiting = self._pending.pop(reply.id, None) if isinstance(reply.id, int) else None
        if waiting is None or waiting[1].done():
            late = late_reply_report(reply)
            if late is not None:
                self._publish(late)
            return
        op, answer = waiting
        if reply.error is None:
            answer.set_result(self._model.states)
        else:
            answer.set_exception(command_error(reply, op, reply.id))

    def _publish(self, update: Update) -> None:
        item = (update, self._model.states)
        for subscription in list(self._subscribers):
            subscription._put(item)

    def _note_stderr(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        with self._guard:
            self._stderr_tail.append(text[:4000])

    def _exited(self, returncode: int) -> None:
        """Every command still waiting and every subscription learn of the exit."""
        with self._guard:
            exit = EngineExited(returncode, self._stderr_tail, self._model.bye_reason, expected=self._closing)
            self._exit = exit
            for _, answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(exit.copy())
            self._pending.clear()
            for subscription in list(self._subscribers):
                subscription._put(END)
            self._wake_locked()

    # The exit as an error

    def _exit_error(self) -> Optional[EngineExited]:
        with self._guard:
            return self._exit_error_locked()

    def _exit_error_locked(self) -> Optional[EngineExited]:
        return self._exit.copy() if self._exit is not None else None

    def _raise_if_died(self) -> None:
        error = self._exit_error_locked()
        if error is not None and not error.expected:
            raise error

    def _raise_if_stopped(self) -> None:
        error = self._exit_error_locked()
        if error is not None:
            raise error
        if self._closing:
            raise HammockError("this client is closing hammock")
